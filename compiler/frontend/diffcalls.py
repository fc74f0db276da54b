"""The autodiff entry points of the ``diff`` module, all at compile time through
``mind.compiler.autodiff.transform.grad_values`` (reverse mode over the ops already emitted):

* ``grad(loss, wrt=[a, b])`` / ``grad(loss, wrt=a)``, ``backward(loss, a)`` / ``backward(loss, [a, b])``:
  gradients of a scalar value with respect to values it was computed from;
* ``grad(f)(x, ...)`` / ``grad(f, x, ...)``: the gradient of a scalar function with respect to its
  first argument (a tensor, a tuple or a struct of tensors: the gradient has its structure);
* ``value_and_grad(f)(x)`` / ``value_and_grad(f, x)``: ``(f(x), grad(f)(x))``;
* ``vjp(f, x)``: ``(f(x), pullback)``; ``pullback(v)`` is vᵀ·J, the gradient of ``sum(f(x) * v)``;
* ``jvp(f, x, v)``: ``(f(x), J·v)``, computed as the gradient of u ↦ ⟨pullback(u), v⟩ (linear in u);
* ``jacobian(f)(x)`` / ``jacobian(f, x)``: shape ``shape(f(x)) ++ shape(x)``, one pullback per
  output element (at most ``MAX_JACOBIAN_ROWS``).

``f`` is a function name, a closure ``|a| ...``, or a name bound to a closure.
"""

from __future__ import annotations

from typing import Any

from mind.ir.core import Value

from . import ast as A
from .values import POISON, Callback, Closure, FnRef, Lit, Scope, StructVal, Tup

MAX_JACOBIAN_ROWS = 1024
_FORMS = {"grad", "backward", "vjp", "jvp", "value_and_grad", "jacobian"}


def is_diff_call(name: str | None) -> bool:
    return name is not None and (name in _FORMS or (name.startswith(("tensor.", "diff.", "std.diff."))
                                                    and name.rsplit(".", 1)[1] in _FORMS))


def base_name(name: str) -> str:
    return name.rsplit(".", 1)[-1]


# -- functions as compile-time values ---------------------------------------------------------------

def function_of(E: Any, node: A.Expr) -> Any:
    """The function ``node`` names (a ``FnRef``, ``Closure`` or ``Callback``), or a diagnostic."""
    if type(node) is A.Closure:
        return Closure(node, E.scope)
    if type(node) is A.Name:
        v, _ = E.scope.lookup(node.id)
        if type(v) in (FnRef, Closure, Callback):
            return v
        if v is None:
            E.name(node)  # reports the unknown name
        raise E.fail("E2009", f"`{node.id}` is not a function", node.span)
    raise E.fail("E2009", "`grad` differentiates a function name or a closure `|a| ...`", node.span)


def apply(E: Any, f: Any, args: list[tuple[Any, Any]], node: A.Expr) -> Any:
    """Call the compile-time function ``f`` on evaluated (argument node, value) pairs."""
    if type(f) is FnRef:
        return E.inline_values(f, args, node)
    if type(f) is Callback:
        if len(args) != f.arity:
            raise E.fail("E2007", f"`{f.name}` takes {f.arity} argument(s), {len(args)} given", node.span)
        return f.fn(E, args, node)
    params = f.node.params
    if len(params) != len(args):
        raise E.fail("E2007", f"the closure takes {len(params)} argument(s), {len(args)} given", node.span)
    if len(E.frame.stack) >= 64:
        raise E.fail("E1012", "closures call each other more than 64 deep", node.span)
    scope = Scope(f.scope, function=True)
    for p, (anode, v) in zip(params, args):
        if p.type is not None:
            v = E.check_type(v, E.type_of(p.type, E.frame.dims, bind=False), E.frame.dims, anode.span,
                             f"argument `{p.name}`")
        scope.names[p.name] = v
    saved = E.scope
    saved_frame = E.frame
    E.scope = scope
    E.frame = type(saved_frame)(saved_frame.dims, saved_frame.stack + ("<closure>",))
    try:
        return E.function_body(lambda: E.ev(f.node.body))
    finally:
        E.scope = saved
        E.frame = saved_frame


# -- structure of points and gradients -------------------------------------------------------------

def leaves(v: Any) -> list[Any]:
    if type(v) in (Tup, StructVal):
        out: list[Any] = []
        for x in v.items:
            out.extend(leaves(x))
        return out
    return [v]


def rebuild(like: Any, values: list[Any]) -> Any:
    it = iter(values)

    def build(v: Any) -> Any:
        if type(v) is Tup:
            return Tup([build(x) for x in v.items], v.span)
        if type(v) is StructVal:
            return StructVal(v.info, [build(x) for x in v.items], v.span)
        return next(it)
    return build(like)


def _point(E: Any, v: Any, off: tuple[int, int]) -> Any:
    """The differentiation point with every leaf a tensor (literals materialized)."""
    if type(v) in (Tup, StructVal):
        return rebuild(v, [_point(E, x, off) for x in leaves(v)])
    return E.tensor(v, off, "the point of differentiation")


# -- the entry points -----------------------------------------------------------------------------------

def call(E: Any, node: A.Call) -> Any:
    """A call whose callee is ``grad``, ``backward``, ... (possibly module-qualified)."""
    name = base_name(node.name)
    if name == "grad":
        if len(node.args) >= 2 and not node.kwargs and _looks_like_function(E, node.args[0]):
            return at_point(E, node.args[0], node.args[1:], node, "grad")
        return grad_wrt(E, node)
    if name == "backward":
        if len(node.args) != 2 or node.kwargs:
            raise E.fail("E2007", "`backward` takes the loss and the variables: `backward(loss, x)`",
                         node.span, "or several: `backward(loss, [w, b])`")
        return grad_wrt(E, node, node.args[1])
    if name in ("value_and_grad", "jacobian"):
        if len(node.args) >= 2 and not node.kwargs:
            return at_point(E, node.args[0], node.args[1:], node, name)
        raise E.fail("E2009", f"`{name}(f)` is a function: call it with the point, `{name}(f)(x)`", node.span,
                     f"or give the point: `{name}(f, x)`")
    if name == "vjp":
        if len(node.args) < 2 or node.kwargs:
            raise E.fail("E2007", "`vjp` takes a function and the point: `let (y, back) = vjp(f, x)`", node.span)
        return vjp(E, node, node.args[0], node.args[1:])
    if name == "jvp":
        if len(node.args) != 3 or node.kwargs:
            raise E.fail("E2007", "`jvp` takes a function, the point and a tangent: `jvp(f, x, v)`",
                         node.span)
        return jvp(E, node)
    raise E.fail("E2008", f"unknown function `{node.name}`", node.span)  # pragma: no cover


def call_result(E: Any, gcall: A.Call, node: A.Call) -> Any:
    """``grad(f)(x)``, ``value_and_grad(f)(x)``, ``jacobian(f)(x)``."""
    name = base_name(gcall.name)
    if name not in ("grad", "value_and_grad", "jacobian", "vjp"):
        raise E.fail("E2009", f"the result of `{name}(...)` is not a function", node.func.span)
    if len(gcall.args) != 1 or gcall.kwargs:
        raise E.fail("E2007", f"`{name}(f)` takes one function", gcall.span, f"e.g. `{name}(loss_fn)(w)`")
    if node.kwargs or not node.args:
        raise E.fail("E2007", f"call `{name}(f)` with positional arguments", node.span)
    if name == "vjp":
        return vjp(E, node, gcall.args[0], node.args)
    return at_point(E, gcall.args[0], node.args, node, name)


def _looks_like_function(E: Any, node: A.Expr) -> bool:
    if type(node) is A.Closure:
        return True
    if type(node) is A.Name:
        v, _ = E.scope.lookup(node.id)
        return type(v) in (FnRef, Closure, Callback)
    return False


def _call_at(E: Any, fnode: A.Expr, arg_nodes: Any, node: A.Call) -> tuple[Any, Any, list]:
    """(the point, the function's value there, the evaluated arguments): the function ``fnode``
    applied to ``arg_nodes``, the first of which (the point) has tensors for leaves."""
    f = function_of(E, fnode)
    args = [(a, E.ev(a)) for a in arg_nodes]
    if any(v is POISON for _, v in args):
        return POISON, POISON, args
    point = _point(E, args[0][1], args[0][0].span)
    args[0] = (args[0][0], point)
    return point, apply(E, f, args, node), args


def at_point(E: Any, fnode: A.Expr, arg_nodes: Any, node: A.Call, form: str) -> Any:
    """``form`` (grad, value_and_grad, jacobian) of the function ``fnode`` at the arguments, with
    respect to the first argument."""
    point, out, args = _call_at(E, fnode, arg_nodes, node)
    if out is POISON:
        return POISON
    wrt = leaves(point)
    what_x = f"`{E.source_text(args[0][0].span)}`"
    for w in wrt:
        E.check_wrt(w, args[0][0].span, what_x)
    if form == "jacobian":
        return rebuild_jacobian(E, out, point, wrt, node)
    y = E.tensor(out, node.span, "the function's result")
    what = f"the result of `{fnode.id}`" if type(fnode) is A.Name else "the closure's result"
    E.check_loss(y, fnode.span, what)
    grads = rebuild(point, E.differentiate(y, wrt, node.span))
    return Tup([y, grads], node.span) if form == "value_and_grad" else grads


def grad_wrt(E: Any, node: A.Call, wrt_expr: A.Expr | None = None) -> Any:
    """``grad(loss, wrt=...)`` and ``backward(loss, ...)``: the gradients of the scalar ``loss``
    with respect to named values (one value for a single name, a tuple for a list)."""
    if wrt_expr is None:
        wrt_expr = node.kwarg("wrt")
        if len(node.args) != 1 or wrt_expr is None or len(node.kwargs) != 1:
            if len(node.args) == 1 and wrt_expr is None and not node.kwargs:
                raise E.fail("E2009", "`grad(f)` is a function: call it with the point, `grad(f)(x)`",
                             node.span, "or name the variables: `grad(loss, wrt=[w, b])`")
            raise E.fail("E2007", "`grad` takes a loss and `wrt=[...]`", node.span,
                         "e.g. `let (gw, gb) = grad(loss, wrt=[w, b]);`")
    loss = E.tensor(E.ev(node.args[0]), node.args[0].span, "the loss")
    targets = wrt_expr.elts if type(wrt_expr) in (A.ArrayLit, A.TupleExpr) else (wrt_expr,)
    wrt_values = []
    for t in targets:
        if type(t) is not A.Name:
            raise E.fail("E2009", "the variables to differentiate by are listed by name", t.span,
                         "e.g. `wrt=[w1, b1]`")
        v = E.ev(t)
        if v is POISON:
            return POISON
        wrt_values.append(_point(E, v, t.span))
    if loss is POISON:
        return POISON
    E.check_loss(loss, node.args[0].span, f"`{E.source_text(node.args[0].span)}`")
    flat: list[Value] = []
    for t, w in zip(targets, wrt_values):
        for leaf in leaves(w):
            E.check_wrt(leaf, t.span, f"`{t.id}`")
            flat.append(leaf)
    grads = iter(E.differentiate(loss, flat, node.span))
    out = [rebuild(w, [next(grads) for _ in leaves(w)]) for w in wrt_values]
    return out[0] if type(wrt_expr) not in (A.ArrayLit, A.TupleExpr) else Tup(out, node.span)


def _pullback_values(E: Any, y: Value, v: Value, wrt: list[Value], off: tuple[int, int]) -> list[Value]:
    """vᵀ·J for y = f(wrt): the gradient of sum(y * v)."""
    prod = E.emit("mul", (y, v), off, "vjp")
    loss = E.emit("reduce_sum", (prod,), off, "vjp", axes=tuple(range(prod.type.rank)), keepdims=False)
    return E.differentiate(loss, wrt, off)


def vjp(E: Any, node: A.Call, fnode: A.Expr, arg_nodes: Any) -> Any:
    point, out, args = _call_at(E, fnode, arg_nodes, node)
    if out is POISON:
        return POISON
    y = E.tensor(out, node.span, "the function's result")
    wrt = leaves(point)
    for w in wrt:
        E.check_wrt(w, args[0][0].span, f"`{E.source_text(args[0][0].span)}`")
    if not y.type.dtype.is_float:
        raise E.fail("E5006", f"`vjp` needs a float result, found {E.fmt_type(y.type)}", node.span)

    def pullback(E2: Any, pargs: list[tuple[Any, Any]], call: A.Expr) -> Any:
        (vnode, v), = pargs
        v = E2.materialize(v, y.type.dtype) if type(v) is Lit else E2.tensor(v, vnode.span, "the cotangent")
        if v is POISON:
            return POISON
        E2.check_type(v, y.type, {}, vnode.span, "the cotangent")
        return rebuild(point, _pullback_values(E2, y, v, wrt, call.span))
    return Tup([y, Callback("the pullback of `vjp`", 1, pullback)], node.span)


def jvp(E: Any, node: A.Call) -> Any:
    f = function_of(E, node.args[0])
    xnode, vnode = node.args[1], node.args[2]
    x, v = E.ev(xnode), E.ev(vnode)
    if x is POISON or v is POISON:
        return POISON
    x = E.tensor(x, xnode.span, "the point")
    v = E.materialize(v, x.type.dtype) if type(v) is Lit else E.tensor(v, vnode.span, "the tangent")
    E.check_wrt(x, xnode.span, f"`{E.source_text(xnode.span)}`")
    E.check_type(v, x.type, {}, vnode.span, "the tangent")
    y = E.tensor(apply(E, f, [(xnode, x)], node), node.span, "the function's result")
    if y is POISON:
        return POISON
    shape = E.static_shape(y.type, node.span, "the result of `jvp`'s function")
    u = E.splat(0, y.type.dtype, shape, node.span)  # the pullback is linear in u: its value is irrelevant
    (g,) = _pullback_values(E, y, u, [x], node.span)
    inner = E.emit("reduce_sum", (E.emit("mul", (g, v), node.span, "jvp"),), node.span, "jvp",
                   axes=tuple(range(g.type.rank)), keepdims=False)
    (jv,) = E.differentiate(inner, [u], node.span)
    return Tup([y, jv], node.span)


def rebuild_jacobian(E: Any, out: Any, point: Any, wrt: list[Value], node: A.Call) -> Any:
    """∂out/∂point with shape ``shape(out) ++ shape(point)`` (a tensor point), one pullback per
    element of ``out``."""
    import numpy as np

    if len(wrt) != 1 or type(point) is not Value:
        raise E.fail("E2009", "`jacobian` needs a tensor point", node.span,
                     "differentiate with respect to each tensor separately")
    y = E.tensor(out, node.span, "the function's result")
    if not y.type.dtype.is_float:
        raise E.fail("E5006", f"`jacobian` needs a float result, found {E.fmt_type(y.type)}", node.span)
    yshape = E.static_shape(y.type, node.span, "the result of `jacobian`'s function")
    m = int(np.prod(yshape, dtype=np.int64))
    if m > MAX_JACOBIAN_ROWS:
        raise E.fail("E1012", f"`jacobian` of a result with {m} elements (the limit is {MAX_JACOBIAN_ROWS})",
                     node.span, "use `vjp` for a product with one vector")
    x = wrt[0]
    rows = []
    for i in range(m):
        e = np.zeros(m, dtype=y.type.dtype.numpy)
        e[i] = 1
        ei = E.b.const_array(e.reshape(yshape), None, y.type.dtype)
        (g,) = _pullback_values(E, y, ei, [x], node.span)
        rows.append(E.emit("reshape", (g,), node.span, "jacobian", shape=(1,) + tuple(x.type.shape)))
    if m == 0:
        return E.splat(0, x.type.dtype, tuple(yshape) + tuple(E.static_shape(x.type, node.span, "x")),
                       node.span)
    flat = rows[0] if m == 1 else _concat0(E, rows, node.span)
    return E.emit("reshape", (flat,), node.span, "jacobian", shape=tuple(yshape) + tuple(x.type.shape))


def _concat0(E: Any, rows: list[Value], off: tuple[int, int]) -> Value:
    """Rows of shape [1, ...] joined along axis 0 (each padded to the full extent, then added)."""
    m = len(rows)
    r = rows[0].type.rank
    dt = rows[0].type.dtype
    fill = E.const(-0.0 if dt.is_float else 0, dt)
    out = None
    for i, row in enumerate(rows):
        p = E.emit("pad", (row, fill), off, "jacobian", lo=(i,) + (0,) * (r - 1),
                   hi=(m - 1 - i,) + (0,) * (r - 1), interior=(0,) * r)
        out = p if out is None else E.emit("add", (out, p), off, "jacobian")
    return out

