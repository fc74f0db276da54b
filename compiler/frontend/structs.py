"""Structs: named tuples of tensors.

``struct P { w: Tensor<f32, [N, M]>, b: Tensor<f32, [M]> }`` defines a type whose values hold one
value per field.  A struct literal ``P { w: a, b: c }`` checks each field against its declared type
(symbols are unified across the fields, as for a function's parameters); ``p.w`` reads a field;
``p.w = e`` gives ``p`` a new value with one field replaced (of the same type).  A function
parameter of struct type becomes one IR parameter per field, named ``p_w`` (nested structs:
``p_inner_w``), and a struct result one IR result per field, in declaration order.
"""

from __future__ import annotations

from typing import Any

from mind.ir.core import Value

from . import ast as A
from .values import POISON, StructInfo, StructType, StructVal, Tup, describe, suggest


def _lookup_struct(E: Any, name: str) -> StructInfo | None:
    v, _ = E.scope.lookup(name)
    return v if type(v) is StructInfo else None


def named_type(E: Any, t: A.TypeName, env: dict[str, Any], bind: bool) -> Any:
    """The type a name stands for: a struct, or ``unit`` (the empty tuple)."""
    if t.name in ("unit", "()"):
        return ()
    info = _lookup_struct(E, t.name)
    if info is None:
        structs = [k for k, v in _visible(E) if type(v) is StructInfo]
        hint = suggest(t.name, structs + ["f32", "f64", "i32", "i64", "bool"])
        raise E.fail("E2005", f"`{t.name}` is not a type", t.span,
                     hint or "types are f32, f64, i32, i64, bool, tensor types such as "
                             "`Tensor<f32, [2, 3]>`, tuples and structs")
    saved = E.scope
    E.scope = info.scope
    try:
        return StructType(info, [E.type_of(f.type, env, bind) for f in info.node.fields])
    finally:
        E.scope = saved


def _visible(E: Any) -> list[tuple[str, Any]]:
    out = []
    s = E.scope
    while s is not None:
        out.extend(s.names.items())
        s = s.parent
    return out


def check_struct(E: Any, v: Any, want: StructType, env: dict[str, Any], off: tuple[int, int],
                 what: str) -> Any:
    if type(v) is not StructVal or v.info is not want.info:
        raise E.fail("E2001", f"{what} is {describe(v)}, the declared type is `{want.info.name}`", off)
    items = [E.check_type(x, t, env, off, f"{what}.{name}")
             for x, t, name in zip(v.items, want.types, want.info.fields)]
    return StructVal(v.info, items, v.span)


def struct_lit(E: Any, node: A.StructLit) -> Any:
    info = _lookup_struct(E, node.name)
    if info is None:
        structs = [k for k, v in _visible(E) if type(v) is StructInfo]
        raise E.fail("E2002", f"cannot find struct `{node.name}`", node.span,
                     suggest(node.name, structs) or f"define it: `struct {node.name} {{ ... }}`")
    given: dict[str, A.Keyword] = {}
    for kw in node.fields:
        if kw.name not in info.fields:
                raise E.fail("E2009", f"struct `{info.name}` has no field `{kw.name}`", kw.span,
                         suggest(kw.name, info.fields) or f"its fields are {', '.join(info.fields)}")
        if kw.name in given:
            raise E.fail("E2010", f"field `{kw.name}` is given twice", kw.span)
        given[kw.name] = kw
    missing = [f for f in info.fields if f not in given]
    if missing:
        raise E.fail("E2001", f"`{info.name} {{ ... }}` is missing the field(s) {', '.join(missing)}",
                     node.span, "give every field a value")
    values = [E.ev(given[f].value) for f in info.fields]
    if any(v is POISON for v in values):
        return POISON
    env: dict[str, Any] = {}
    stype = named_type(E, A.TypeName(info.name, node.span), env, bind=False)
    items = [E.check_type(v, t, env, given[f].value.span, f"field `{f}`")
             for v, t, f in zip(values, stype.types, info.fields)]
    return StructVal(info, items, node.span)


def get_field(E: Any, node: A.Attribute) -> Any:
    base = E.ev(node.value)
    if base is POISON:
        return POISON
    if type(base) is StructVal:
        if node.attr in base.info.fields:
            return base.field(node.attr)
        raise E.fail("E2009", f"struct `{base.info.name}` has no field `{node.attr}`", node.span,
                     suggest(node.attr, base.info.fields) or f"its fields are {', '.join(base.info.fields)}")
    if type(base) is Tup and node.attr.isdigit():  # pragma: no cover - `t.0` lexes as a float
        return base.items[int(node.attr)]
    if type(base) is Value and node.attr == "T":
        perm = tuple(range(base.type.rank - 1, -1, -1))
        return E.emit("transpose", (base,), node.span, ".T", permutation=perm)
    raise E.fail("E2009", f"`.{node.attr}`: only structs have fields", node.span,
                 "call a builtin as a function, `sum(x)`, or as a method, `x.sum()`")


def struct_params(E: Any, name: str, stype: StructType) -> tuple[list[Value], StructVal]:
    """IR parameters for a parameter ``name`` of struct type: one per field, ``name_field``."""
    params: list[Value] = []
    items: list[Any] = []
    for field, t in zip(stype.info.fields, stype.types):
        pname = f"{name}_{field}"
        if type(t) is StructType:
            sub, val = struct_params(E, pname, t)
            params.extend(sub)
            items.append(val)
        elif isinstance(t, tuple):
            raise E.fail("E2009", f"field `{field}` of `{stype.info.name}` is a tuple: a parameter's "
                                  f"fields must be tensors or structs", stype.info.node.span)
        else:
            v = Value(pname, t, None)
            params.append(v)
            items.append(v)
    return params, StructVal(stype.info, items, stype.info.node.span)
