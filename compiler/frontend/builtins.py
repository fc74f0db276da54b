"""The builtins: argument binding and each builtin's lowering to the 19 Core IR ops.

Every builtin is written in terms of ``Elaborator.emit`` (so result types come from the spec's rules)
and the compile-time argument helpers (``static_int``, ``static_ints``, ``static_dims``).  The
decompositions, and their accuracy and special-value behaviour, are documented in
``docs/frontend-builtins.md``.
"""

from __future__ import annotations

from typing import Any, Callable

from mind.ir.core import Value
from mind.spec.dims import DimExpr, format_dim
from mind.spec.dtypes import DType, parse_dtype

from . import ast as A
from .indexing import py_slice
from .values import POISON, ArrLit, Lit, Tup, suggest

REQUIRED = object()


class _Poisoned(Exception):
    pass


class Args:
    """The bound arguments of one builtin call: AST nodes by parameter name."""

    __slots__ = ("E", "node", "name", "nodes")

    def __init__(self, E: Any, node: A.Call, name: str, nodes: dict[str, Any]):
        self.E = E
        self.node = node
        self.name = name
        self.nodes = nodes

    def has(self, key: str) -> bool:
        return self.nodes.get(key) is not None

    def span(self, key: str) -> tuple[int, int]:
        n = self.nodes.get(key)
        return n.span if n is not None else self.node.span

    def value(self, key: str) -> Any:
        v = self.E.ev(self.nodes[key])
        if v is POISON:
            raise _Poisoned()
        return v

    def tensor(self, key: str) -> Value:
        v = self.E.ev(self.nodes[key])
        if v is POISON:
            raise _Poisoned()
        if type(v) is Value:  # what E.tensor returns unchanged
            return v
        v = self.E.tensor(v, self.span(key), f"argument `{key}` of `{self.name}`")
        if v is POISON:
            raise _Poisoned()
        return v

    def int(self, key: str, default: int | None = None) -> int:
        n = self.nodes.get(key)
        if n is None:
            return default  # type: ignore[return-value]
        return self.E.static_int(n, f"`{key}` of `{self.name}`")

    def ints(self, key: str) -> list[int] | None:
        n = self.nodes.get(key)
        if n is None:
            return None
        return self.E.static_ints(n, f"`{key}` of `{self.name}`")

    def fail(self, code: str, msg: str, key: str | None = None, help: str | None = None) -> Exception:
        return self.E.fail(code, msg, self.span(key) if key else self.node.span, help)


def bind(E: Any, name: str, node: A.Call, params: tuple) -> Args:
    """Match positional and keyword arguments to ``params`` ((name, aliases, default), ...)."""
    nodes: dict[str, Any] = {}
    if len(node.args) > len(params):
        raise E.fail("E2007", f"`{name}` takes at most {len(params)} argument(s), {len(node.args)} given",
                     node.args[len(params)].span, f"the signature is `{_sig(name, params)}`")
    for (pname, _, _), a in zip(params, node.args):
        nodes[pname] = a
    for kw in node.kwargs:
        target = None
        for pname, aliases, _ in params:
            if kw.name == pname or kw.name in aliases:
                target = pname
                break
        if target is None:
            close = suggest(kw.name, [n for p, aliases, _ in params for n in (p, *aliases)])
            raise E.fail("E2009", f"`{name}` has no parameter `{kw.name}`", kw.span,
                         (close + " " if close else "") + f"the signature is `{_sig(name, params)}`")
        if target in nodes:
            raise E.fail("E2009", f"`{target}` of `{name}` is given twice", kw.span)
        nodes[target] = kw.value
    for pname, _, default in params:
        if pname not in nodes:
            if default is REQUIRED:
                raise E.fail("E2007", f"`{name}` is missing its argument `{pname}`", node.span,
                             f"the signature is `{_sig(name, params)}`")
            nodes[pname] = None
    return Args(E, node, name, nodes)


def _sig(name: str, params: tuple) -> str:
    parts = [p if d is REQUIRED else f"{p}=..." for p, _, d in params]
    return f"{name}({', '.join(parts)})"


def _arg_tensor(E: Any, x: A.Expr, name: str, key: str) -> Any:
    """``Args.tensor(key)`` of a positional argument node ``x`` (POISON where it raises _Poisoned)."""
    v = E.ev(x)
    if v is POISON or type(v) is Value:
        return v
    return E.tensor(v, x.span, f"argument `{key}` of `{name}`")


def _relu_direct(E: Any, name: str, node: A.Call) -> Any:
    """``b_relu`` for ``relu(x)``, without binding the arguments."""
    x = _arg_tensor(E, node.args[0], name, "x")
    if x is POISON:
        return x
    dt = x.type.dtype
    if not dt.is_numeric:
        raise E.fail("E2005", f"`{name}` needs a numeric tensor, found {x.type}", node.args[0].span,
                     "`cast(x, f32)` first")
    off = node.span
    zero = E.const(0, dt)
    c = E.emit("compare", (x, zero), off, "relu", direction="le")
    return E.emit("select", (c, zero, x), off, "relu")


def _matmul_direct(E: Any, name: str, node: A.Call) -> Any:
    """``b_matmul`` for ``matmul(a, b)``, without binding the arguments."""
    a, b = node.args
    x = _arg_tensor(E, a, name, "a")
    if x is POISON:
        return x
    y = _arg_tensor(E, b, name, "b")
    if y is POISON:
        return y
    return matmul_values(E, x, y, node.span, name)


#: builtin -> (number of positional arguments, a direct lowering for exactly that call shape, no
#: keywords): the same result and diagnostics as the bound ``Args`` path.
_DIRECT = {"relu": (1, _relu_direct), "matmul": (2, _matmul_direct)}


def call_builtin(E: Any, name: str, node: A.Call) -> Any:
    direct = _DIRECT.get(name)
    if direct is not None and not node.kwargs and len(node.args) == direct[0]:
        return direct[1](E, name, node)
    params, fn = BUILTINS[name]
    try:
        quick = _QUICK[name]
        args = node.args
        if not node.kwargs and quick[1] <= len(args) <= len(quick[0]):
            # only positional arguments, every required one given: what ``bind`` returns, directly
            names = quick[0]
            nodes = dict(zip(names, args))
            for pname in names[len(args):]:
                nodes[pname] = None
            return fn(Args(E, node, name, nodes))
        return fn(bind(E, name, node, params))
    except _Poisoned:
        return POISON


# -- shared lowering helpers -------------------------------------------------------------------

def _need(a: Args, x: Value, pred: Callable[[DType], bool], what: str, key: str = "x") -> None:
    if not pred(x.type.dtype):
        raise a.fail("E2005", f"`{a.name}` needs a {what} tensor, found {x.type}", key,
                     "`cast(x, f32)` first" if what != "bool" else "compare first, e.g. `x != 0`")


def _neg(E: Any, x: Value, off: tuple[int, int]) -> Value:
    return E.emit("mul", (x, E.const(-1, x.type.dtype)), off, "neg")


def _norm_axis(a: Args, axis: int, rank: int, key: str) -> int:
    if not -rank <= axis < rank:
        raise a.fail("E3004", f"axis {axis} is out of range for rank {rank}", key,
                     f"axes are in [{-rank}, {rank})" if rank else "a rank-0 tensor has no axes")
    return axis + rank if axis < 0 else axis


def _norm_axes(a: Args, axes: list[int], rank: int, key: str) -> list[int]:
    out = [_norm_axis(a, ax, rank, key) for ax in axes]
    if len(set(out)) != len(out):
        dup = next(x for x in out if out.count(x) > 1)
        raise a.fail("E3005", f"duplicate axis {dup} in {axes}", key, "list each axis once")
    return sorted(out)


def _reduce_axes(a: Args, x: Value) -> list[int]:
    axes = a.ints("axes")
    if not axes:  # omitted or [] = all axes (the public compiler's rule)
        return list(range(x.type.rank))
    return _norm_axes(a, axes, x.type.rank, "axes")


def _keepdims(a: Args) -> bool:
    n = a.nodes.get("keepdims")
    if n is None:
        return False
    if type(n) is A.BoolLit:
        return n.value
    raise a.fail("E2009", "`keepdims` must be `true` or `false`", "keepdims")


def _dtype_arg(a: Args, key: str) -> DType | None:
    n = a.nodes.get(key)
    if n is None:
        return None
    text = n.id if type(n) is A.Name else (n.value if type(n) is A.StrLit else None)
    dt = parse_dtype(text) if text is not None else None
    if dt is None:
        raise a.fail("E2005", f"`{key}` of `{a.name}` must be a dtype", key,
                     "dtypes are f32, f64, i32, i64 and bool")
    return dt


def _reshape(E: Any, x: Value, shape: list[Any], off: tuple[int, int], surface: str) -> Value:
    return E.emit("reshape", (x,), off, surface, shape=tuple(shape))


# -- creation ----------------------------------------------------------------------------------

def _fill(a: Args, default: Any) -> Any:
    E = a.E
    # `tensor.zeros(f32, (2, 3))` (public compiler) or `zeros([2, 3])` / `zeros([2, 3], dtype=f32)`.
    first = a.nodes.get("shape")
    second = a.nodes.get("dtype")
    if first is not None and type(first) is A.Name and parse_dtype(first.id) is not None \
            and second is not None and type(second) in (A.ArrayLit, A.TupleExpr, A.IntLit):
        a.nodes["shape"], a.nodes["dtype"] = second, first
    dims = E.static_dims(a.nodes["shape"], f"the shape of `{a.name}`")
    if any(type(d) is not int for d in dims):
        raise a.fail("E3011", f"`{a.name}` needs a static shape, found {_fmt(dims)}", "shape",
                     "constants have concrete shapes")
    if any(d < 0 for d in dims):
        raise a.fail("E3006", f"negative dimension in {_fmt(dims)}", "shape")
    if default is None:
        v = a.value("value")
        if type(v) is not Lit:
            raise a.fail("E2009", "the fill value of `full` must be a literal", "value")
        dt = _dtype_arg(a, "dtype") or {"int": DType.I32, "float": DType.F32, "bool": DType.BOOL}[v.kind]
        return E.splat(E.lit_value(v, dt), dt, tuple(dims), a.node.span)
    dt = _dtype_arg(a, "dtype") or DType.F32
    return E.splat(default, dt, tuple(dims), a.node.span)


def b_zeros(a: Args) -> Any:
    return _fill(a, 0)


def b_ones(a: Args) -> Any:
    return _fill(a, 1)


def b_full(a: Args) -> Any:
    return _fill(a, None)


# -- elementwise -------------------------------------------------------------------------------

def b_relu(a: Args) -> Any:
    E, x, off = a.E, a.tensor("x"), a.node.span
    _need(a, x, lambda d: d.is_numeric, "numeric")
    zero = E.const(0, x.type.dtype)
    c = E.emit("compare", (x, zero), off, "relu", direction="le")
    return E.emit("select", (c, zero, x), off, "relu")


def b_sigmoid(a: Args) -> Any:
    E, x, off = a.E, a.tensor("x"), a.node.span
    _need(a, x, lambda d: d.is_float, "float")
    one = E.const(1, x.type.dtype)
    e = E.emit("exp", (_neg(E, x, off),), off, "sigmoid")
    return E.emit("div", (one, E.emit("add", (one, e), off, "sigmoid")), off, "sigmoid")


# Taylor coefficients of tanh(x) / x in powers of x²; ``n / d`` of two ints is the double nearest
# the exact fraction (CPython rounds integer true division correctly).
_TANH = [n / d for n, d in ((1, 1), (-1, 3), (2, 15), (-17, 315), (62, 2835), (-1382, 155925),
                             (21844, 6081075), (-929569, 638512875), (6404582, 10854718875),
                             (-443861162, 1856156927625))]


def b_tanh(a: Args) -> Any:
    E, x, off = a.E, a.tensor("x"), a.node.span
    _need(a, x, lambda d: d.is_float, "float")
    dt = x.type.dtype
    c = lambda v: E.const(float(v), dt)  # noqa: E731
    em = lambda op, *xs, **kw: E.emit(op, xs, off, "tanh", **kw)  # noqa: E731
    neg = em("compare", x, c(0), direction="lt")
    ax = em("select", neg, _neg(E, x, off), x)
    # |x| < 1/8: the Taylor polynomial x * (1 + x²(c1 + x²(c2 + ...))), which keeps -0 and is
    # accurate where 1 - exp(-2|x|) would cancel.
    x2 = em("mul", x, x)
    coeffs = _TANH[1:5] if dt is DType.F32 else _TANH[1:]
    q = c(coeffs[-1])
    for k in reversed(coeffs[:-1]):
        q = em("add", c(k), em("mul", x2, q))
    small = em("mul", x, em("add", c(1), em("mul", x2, q)))
    # otherwise tanh|x| = (1 - t) / (1 + t) with t = exp(-2|x|) in (0, 1]: no overflow for any x.
    t = em("exp", em("mul", ax, c(-2)))
    r = em("div", em("sub", c(1), t), em("add", c(1), t))
    big = em("select", neg, _neg(E, r, off), r)
    return em("select", em("compare", ax, c(0.125), direction="lt"), small, big)


def _unary(op: str) -> Callable[[Args], Any]:
    def lower(a: Args) -> Any:
        x = a.tensor("x")
        _need(a, x, lambda d: d.is_float, "float")
        return a.E.emit(op, (x,), a.node.span, a.name)
    return lower


def b_sqrt(a: Args) -> Any:
    E, x, off = a.E, a.tensor("x"), a.node.span
    _need(a, x, lambda d: d.is_float, "float")
    em = lambda op, *xs, **kw: E.emit(op, xs, off, "sqrt", **kw)  # noqa: E731
    if x.type.dtype is DType.F32:
        w = em("convert", x, dtype=DType.F64)
        y = em("exp", em("mul", em("log", w), E.const(0.5, DType.F64)))
        return em("convert", y, dtype=DType.F32)
    half = E.const(0.5, DType.F64)
    y0 = em("exp", em("mul", em("log", x), half))
    y1 = em("mul", half, em("add", y0, em("div", x, y0)))  # one Newton step
    finite = em("compare", em("mul", y0, E.const(0.0, DType.F64)), E.const(0.0, DType.F64), direction="eq")
    positive = em("compare", y0, E.const(0.0, DType.F64), direction="gt")
    ok = em("select", positive, finite, E.const(False, DType.BOOL))
    return em("select", ok, y1, y0)


def b_neg(a: Args) -> Any:
    x = a.tensor("x")
    _need(a, x, lambda d: d.is_numeric, "numeric")
    return _neg(a.E, x, a.node.span)


def b_abs(a: Args) -> Any:
    E, x, off = a.E, a.tensor("x"), a.node.span
    _need(a, x, lambda d: d.is_numeric, "numeric")
    zero = E.const(0, x.type.dtype)
    c = E.emit("compare", (x, zero), off, "abs", direction="lt")
    keep = E.emit("add", (x, zero), off, "abs") if x.type.dtype.is_float else x  # -0 + +0 = +0
    return E.emit("select", (c, _neg(E, x, off), keep), off, "abs")


def _minmax(a: Args, direction: str) -> Any:
    E, off = a.E, a.node.span
    x, y = E.pair(a.value("a"), a.value("b"), off)
    if x is POISON or y is POISON:
        raise _Poisoned()
    c = E.emit("compare", (x, y), off, a.name, direction=direction)
    out = E.emit("select", (c, y, x), off, a.name)
    if x.type.dtype.is_float:  # NaN in either operand gives NaN
        out = E.emit("select", (E.emit("compare", (y, y), off, a.name, direction="ne"), y, out), off, a.name)
    return out


def b_maximum(a: Args) -> Any:
    return _minmax(a, "lt")


def b_minimum(a: Args) -> Any:
    return _minmax(a, "gt")


def b_where(a: Args) -> Any:
    E, off = a.E, a.node.span
    c = a.value("cond")
    if type(c) is Lit or type(c) is ArrLit:
        c = E.materialize(c, DType.BOOL)
    c = E.tensor(c, a.span("cond"), "the condition of `where`")
    x, y = E.pair(a.value("a"), a.value("b"), off)
    if POISON in (c, x, y):
        raise _Poisoned()
    return E.emit("select", (c, x, y), off, "where")


def b_cast(a: Args) -> Any:
    x = a.tensor("x")
    dt = _dtype_arg(a, "dtype")
    return a.E.emit("convert", (x,), a.node.span, "cast", dtype=dt)


# -- reductions --------------------------------------------------------------------------------

def b_sum(a: Args) -> Any:
    x = a.tensor("x")
    return a.E.emit("reduce_sum", (x,), a.node.span, a.name, axes=tuple(_reduce_axes(a, x)),
                    keepdims=_keepdims(a))


def b_max(a: Args) -> Any:
    x = a.tensor("x")
    return a.E.emit("reduce_max", (x,), a.node.span, a.name, axes=tuple(_reduce_axes(a, x)),
                    keepdims=_keepdims(a))


def b_mean(a: Args) -> Any:
    E, x, off = a.E, a.tensor("x"), a.node.span
    _need(a, x, lambda d: d.is_numeric, "numeric")
    axes = tuple(_reduce_axes(a, x))
    keep = _keepdims(a)
    s = E.emit("reduce_sum", (x,), off, "mean", axes=axes, keepdims=keep)
    dt = x.type.dtype
    count: Any = 1
    for ax in axes:
        count = count * x.type.shape[ax]
    if type(count) is int:
        if dt.is_int and count > dt.int_max:
            raise a.fail("E2001", f"`mean` over {count} elements: the count does not fit in {dt.value}")
        n = E.const(float(count) if dt.is_float else count, dt)
    else:
        # A symbolic count: sum a tensor of ones (i64, exact) over the same axes, then convert.
        one = E.const(1, DType.I64)
        ones = E.emit("select", (E.emit("compare", (x, x), off, "mean", direction="eq"), one, one), off, "mean")
        n = E.emit("convert", (E.emit("reduce_sum", (ones,), off, "mean", axes=axes, keepdims=keep),),
                   off, "mean", dtype=dt)
    return E.emit("div", (s, n), off, "mean")


def _softmax(a: Args, log: bool) -> Any:
    E, x, off = a.E, a.tensor("x"), a.node.span
    _need(a, x, lambda d: d.is_float, "float")
    ax = (_norm_axis(a, a.int("axis", -1), x.type.rank, "axis"),)
    m = E.emit("reduce_max", (x,), off, a.name, axes=ax, keepdims=True)
    d = E.emit("sub", (x, m), off, a.name)
    e = E.emit("exp", (d,), off, a.name)
    s = E.emit("reduce_sum", (e,), off, a.name, axes=ax, keepdims=True)
    if log:
        return E.emit("sub", (d, E.emit("log", (s,), off, a.name)), off, a.name)
    return E.emit("div", (e, s), off, a.name)


def b_softmax(a: Args) -> Any:
    return _softmax(a, False)


def b_log_softmax(a: Args) -> Any:
    return _softmax(a, True)


# -- contractions ------------------------------------------------------------------------------

def matmul_values(E: Any, x: Value, y: Value, off: tuple[int, int], surface: str) -> Any:
    if x is POISON or y is POISON:
        return POISON
    if x.type.rank == 0 or y.type.rank == 0:
        raise E.fail("E3002", f"`{surface}` of a rank-0 operand ({x.type} and {y.type})", off,
                     "use `*` to scale by a scalar")
    xv, yv = x.type.rank == 1, y.type.rank == 1
    if xv:
        x = _reshape(E, x, [1, x.type.shape[0]], off, surface)
    if yv:
        y = _reshape(E, y, [y.type.shape[0], 1], off, surface)
    r = E.emit("matmul", (x, y), off, surface)
    if xv or yv:
        shape = list(r.type.shape)
        if yv:
            shape.pop(-1)
        if xv:
            shape.pop(-1 if yv else -2)
        r = _reshape(E, r, shape, off, surface)
    return r


def b_matmul(a: Args) -> Any:
    return matmul_values(a.E, a.tensor("a"), a.tensor("b"), a.node.span, a.name)


def _pairs(a: Args, key: str) -> list[tuple[int, int]]:
    n = a.nodes[key]
    if type(n) is A.Call and n.name == "Custom" and len(n.args) == 1 and not n.kwargs:
        n = n.args[0]
    if type(n) not in (A.ArrayLit, A.TupleExpr) or any(type(e) not in (A.ArrayLit, A.TupleExpr) or len(e.elts) != 2
                                                     for e in n.elts):
        raise a.fail("E2009", f"`{key}` must be a list of [before, after] pairs", key,
                     "e.g. `Custom([[1, 1], [2, 2]])`")
    return [(a.E.static_int(e.elts[0], key), a.E.static_int(e.elts[1], key)) for e in n.elts]


def _two(a: Args, key: str, hkey: str | None, wkey: str | None) -> list[int]:
    vals = a.ints(key) or [1, 1]
    if len(vals) == 1:
        vals = vals * 2
    if len(vals) != 2:
        raise a.fail("E4007", f"`{key}` of `conv2d` needs 2 entries, found {len(vals)}", key)
    if hkey and a.has(hkey):
        vals[0] = a.int(hkey)
    if wkey and a.has(wkey):
        vals[1] = a.int(wkey)
    return vals


def b_conv2d(a: Args) -> Any:
    E, off = a.E, a.node.span
    x, w = a.tensor("x"), a.tensor("w")
    strides = _two(a, "strides", "stride_h", "stride_w")
    dil = _two(a, "dilation", None, None)
    n = a.nodes.get("padding")
    mode = "valid"
    if n is not None:
        if type(n) is A.StrLit:
            mode = n.value.lower()
        elif type(n) is A.Name:
            mode = n.id.lower()
        else:
            mode = "custom"
    if mode == "valid":
        pads = [(0, 0), (0, 0)]
    elif mode == "same":
        pads = []
        if x.type.rank == 4 and w.type.rank == 4:
            for i in range(2):
                h, k, s, d = x.type.shape[1 + i], w.type.shape[i], strides[i], dil[i]
                if type(h) is not int or type(k) is not int:
                    raise a.fail("E3011", f"`padding=Same` needs static spatial extents, found "
                                          f"{format_dim(h)} and kernel {format_dim(k)}", "padding",
                                 "give explicit padding: `padding=Custom([[t, b], [l, r]])`")
                if s < 1:
                    raise a.fail("E3006", f"stride {s} must be ≥ 1", "strides")
                out = -(-h // s)
                total = max((out - 1) * s + (k - 1) * d + 1 - h, 0)
                pads.append((total // 2, total - total // 2))
        else:
            pads = [(0, 0), (0, 0)]
    elif mode == "custom":
        pads = _pairs(a, "padding")
    else:
        raise a.fail("E2009", f"unknown padding `{mode}`", "padding",
                     "padding is \"valid\", \"same\", Valid, Same or Custom([[t, b], [l, r]])")
    return E.emit("conv2d", (x, w), off, "conv2d", strides=tuple(strides), padding=tuple(pads),
                  lhs_dilation=(1, 1), rhs_dilation=tuple(dil))


# -- data movement -----------------------------------------------------------------------------

def b_transpose(a: Args) -> Any:
    x = a.tensor("x")
    r = x.type.rank
    perm = a.ints("permutation")
    perm = list(range(r - 1, -1, -1)) if perm is None else [p + r if p < 0 else p for p in perm]
    return a.E.emit("transpose", (x,), a.node.span, "transpose", permutation=tuple(perm))


def b_reshape(a: Args) -> Any:
    E, x = a.E, a.tensor("x")
    dims = E.static_dims(a.nodes["shape"], "a dimension of `reshape`")
    holes = [i for i, d in enumerate(dims) if type(d) is int and d == -1]
    if len(holes) > 1:
        raise a.fail("E2009", "at most one dimension of `reshape` may be -1", "shape")
    if holes:
        arith = E.b.arith
        total = arith.prod(x.type.shape)
        known = arith.prod(d for i, d in enumerate(dims) if i != holes[0])
        if type(total) is int and type(known) is int:
            if known <= 0 or total % known:
                raise a.fail("E3007", f"cannot reshape {x.type} to {_fmt(dims)}: {total} elements "
                                      f"are not a multiple of {known}", "shape",
                             "the element count must be preserved")
            dims[holes[0]] = total // known
        else:
            q = arith.floordiv(total, known) if type(known) is int and known > 0 else None
            if q is None or arith.truth(arith.eq(q * known, total)) is not True:
                raise a.fail("E3011", f"cannot infer the -1 of {_fmt(dims)} from {x.type}", "shape",
                             "write the dimension explicitly")
            dims[holes[0]] = q
    return _reshape(E, x, dims, a.node.span, "reshape")


def b_expand_dims(a: Args) -> Any:
    x = a.tensor("x")
    axes = a.ints("axis") or []
    r = x.type.rank + len(axes)
    axes = _norm_axes(a, axes, r, "axis")
    shape = list(x.type.shape)
    for ax in axes:
        shape.insert(ax, 1)
    return _reshape(a.E, x, shape, a.node.span, "expand_dims")


def b_squeeze(a: Args) -> Any:
    E, x = a.E, a.tensor("x")
    shape = x.type.shape
    given = a.ints("axes")
    if given is None:
        axes = [i for i, d in enumerate(shape) if type(d) is int and d == 1]
    else:
        axes = _norm_axes(a, given, x.type.rank, "axes")
        for ax in axes:
            c = E.b.arith.truth(E.b.arith.eq(shape[ax], 1))
            if c is False:
                raise a.fail("E3009", f"cannot squeeze axis {ax} of {x.type}: its extent is "
                                      f"{format_dim(shape[ax])}, not 1", "axes",
                             "only axes of extent 1 can be squeezed; use `reshape` or `index` instead")
            if c is not True:
                raise a.fail("E3011", f"cannot squeeze axis {ax} of {x.type}: needs "
                                      f"{format_dim(shape[ax])} == 1, which the declared dimensions "
                                      f"do not decide", "axes", "make the dimension concrete")
    return _reshape(E, x, [d for i, d in enumerate(shape) if i not in axes], a.node.span, "squeeze")


def _slice_axis(a: Args, x: Value, axis: int, start: Any, stop: Any, step: int, surface: str) -> Value:
    E = a.E
    starts = [0] * x.type.rank
    stops = list(x.type.shape)
    steps = [1] * x.type.rank
    starts[axis], stops[axis], steps[axis] = start, stop, step
    return E.emit("slice", (x,), a.node.span, surface, start=tuple(starts), stop=tuple(stops),
                  step=tuple(steps))


def b_index(a: Args) -> Any:
    x = a.tensor("x")
    axis = _norm_axis(a, a.int("axis", 0), x.type.rank, "axis")
    i = a.int("i")
    n = x.type.shape[axis]
    if type(n) is int:
        if not -n <= i < n:
            raise a.fail("E3006", f"index {i} is out of bounds for axis {axis} of extent {n}", "i",
                         f"indices are in [{-n}, {n})")
        i = i + n if i < 0 else i
        start: Any = i
    else:
        start = n + i if i < 0 else i
    s = _slice_axis(a, x, axis, start, start + 1, 1, "index")
    return _reshape(a.E, s, [d for k, d in enumerate(s.type.shape) if k != axis], a.node.span, "index")


def _py_slice(a: Args, n: Any, start: int | None, stop: int | None, step: int) -> tuple[Any, Any]:
    if step == 0:
        raise a.fail("E3006", "slice step cannot be 0", "step")
    return py_slice(n, start, stop, step)


def b_slice(a: Args) -> Any:
    x = a.tensor("x")
    axis = _norm_axis(a, a.int("axis", 0), x.type.rank, "axis")
    step = a.int("step", 1)
    b, e = _py_slice(a, x.type.shape[axis], a.int("start"), a.int("end"), step)
    return _slice_axis(a, x, axis, b, e, step, a.name)


def b_gather(a: Args) -> Any:
    E = a.E
    x = a.tensor("x")
    idx = a.tensor("idx")
    axis = _norm_axis(a, a.int("axis", 0), x.type.rank, "axis")
    return E.emit("gather", (x, idx), a.node.span, "gather", axis=axis)


def b_pad(a: Args) -> Any:
    E, x = a.E, a.tensor("x")
    r = x.type.rank
    if a.has("pads"):
        pairs = _pairs(a, "pads")
        lo, hi = [p[0] for p in pairs], [p[1] for p in pairs]
    else:
        lo, hi = a.ints("lo") or [0] * r, a.ints("hi") or [0] * r
    interior = a.ints("interior") or [0] * r
    v = a.value("value") if a.has("value") else Lit(0, "int", a.node.span)
    if type(v) is Lit and x.type.dtype is DType.BOOL and v.kind == "int" and v.value == 0:
        v = Lit(False, "bool", v.span)
    v = E.materialize(v, x.type.dtype) if type(v) is Lit else E.tensor(v, a.span("value"))
    return E.emit("pad", (x, v), a.node.span, "pad", lo=tuple(lo), hi=tuple(hi), interior=tuple(interior))


def tensor_list(a: Args, extra: tuple[str, ...] = ()) -> tuple[list[Value], list[Any]]:
    """The tensors of argument ``xs`` (a list ``[a, b]`` or one value) and of the parameters
    ``extra``, with their nodes; at least one (E2007)."""
    E = a.E
    n = a.nodes["xs"]
    nodes = list(n.elts) if type(n) in (A.ArrayLit, A.TupleExpr) else [n]
    nodes += [a.nodes[k] for k in extra if a.nodes.get(k) is not None]
    xs = []
    for k in nodes:
        v = E.ev(k)
        if v is POISON:
            raise _Poisoned()
        xs.append(E.tensor(v, k.span, f"an operand of `{a.name}`"))
    if not xs:
        raise a.fail("E2007", f"`{a.name}` needs at least one tensor", "xs")
    return xs, nodes


def b_concat(a: Args) -> Any:
    xs, nodes = tensor_list(a, ("x1", "x2", "x3", "x4", "x5", "x6", "x7"))
    return concat_tensors(a, xs, nodes, a.int("axis", 0))


def concat_tensors(a: Args, xs: list[Value], nodes: list[Any], axis: int) -> Value:
    """Join the tensors ``xs`` (written at ``nodes``) along ``axis`` (also ``stack``'s last step)."""
    E, off = a.E, a.node.span
    first = xs[0].type
    for v, k in zip(xs[1:], nodes[1:]):
        if v.type.dtype is not first.dtype:
            raise E.fail("E2004", f"`concat` operands have dtypes {first.dtype.value} and {v.type.dtype.value}",
                         k.span, _help_cast(first.dtype))
        if v.type.rank != first.rank:
            raise E.fail("E3002", f"`concat` operands have ranks {first.rank} and {v.type.rank}", k.span)
    axis = _norm_axis(a, axis, first.rank, "axis")
    arith = E.b.arith
    for v, k in zip(xs[1:], nodes[1:]):
        for i, (d1, d2) in enumerate(zip(first.shape, v.type.shape)):
            if i == axis:
                continue
            c = arith.truth(arith.eq(d1, d2))
            if c is False:
                raise E.fail("E3003", f"`concat` along axis {axis}: axis {i} has extents {format_dim(d1)} "
                                      f"and {format_dim(d2)}", k.span, "all other axes must be equal")
            if c is not True:
                raise E.fail("E3011", f"`concat` needs {format_dim(d1)} == {format_dim(d2)} (axis {i}), "
                                      f"which the declared dimensions do not decide", k.span)
    sizes = [v.type.shape[axis] for v in xs]
    for s, k in zip(sizes, nodes):
        if type(s) is not int:
            raise E.fail("E3011", f"`concat` along an axis of symbolic extent {format_dim(s)} is not "
                                  f"supported", k.span, "concatenate along an axis of static extent")
    if len(xs) == 1:
        return xs[0]
    total = sum(sizes)
    dt = first.dtype
    fill = E.const(dt.add_identity, dt)
    out = None
    offset = 0
    for v, s in zip(xs, sizes):
        lo, hi = [0] * first.rank, [0] * first.rank
        lo[axis], hi[axis] = offset, total - offset - s
        offset += s
        p = E.emit("pad", (v, fill), off, "concat", lo=tuple(lo), hi=tuple(hi), interior=(0,) * first.rank)
        if out is None:
            out = p
        elif dt is DType.BOOL:
            out = E.emit("select", (out, E.const(True, DType.BOOL), p), off, "concat")
        else:
            out = E.emit("add", (out, p), off, "concat")
    return out


def _help_cast(dt: DType) -> str:
    return f"`cast(x, {dt.value})` the other operands"


def _fmt(dims: list[Any]) -> str:
    return "[" + ", ".join(format_dim(d) if isinstance(d, (int, DimExpr)) else str(d) for d in dims) + "]"


R = REQUIRED
X = (("x", (), R),)
AXES = (("axes", ("axis",), None), ("keepdims", (), None))

BUILTINS: dict[str, tuple[tuple, Callable[[Args], Any]]] = {
    "zeros": ((("shape", (), R), ("dtype", (), None)), b_zeros),
    "ones": ((("shape", (), R), ("dtype", (), None)), b_ones),
    "full": ((("shape", (), R), ("value", ("fill_value",), R), ("dtype", (), None)), b_full),
    "relu": (X, b_relu),
    "sigmoid": (X, b_sigmoid),
    "tanh": (X, b_tanh),
    "exp": (X, _unary("exp")),
    "log": (X, _unary("log")),
    "sqrt": (X, b_sqrt),
    "neg": (X, b_neg),
    "abs": (X, b_abs),
    "maximum": ((("a", (), R), ("b", (), R)), b_maximum),
    "minimum": ((("a", (), R), ("b", (), R)), b_minimum),
    "where": ((("cond", ("condition",), R), ("a", ("x",), R), ("b", ("y",), R)), b_where),
    "sum": (X + AXES, b_sum),
    "mean": (X + AXES, b_mean),
    "max": (X + AXES, b_max),
    "softmax": (X + (("axis", (), None),), b_softmax),
    "log_softmax": (X + (("axis", (), None),), b_log_softmax),
    "matmul": ((("a", (), R), ("b", (), R)), b_matmul),
    "dot": ((("a", (), R), ("b", (), R)), b_matmul),
    "transpose": (X + (("permutation", ("axes", "perm"), None),), b_transpose),
    "reshape": (X + (("shape", ("new_shape",), R),), b_reshape),
    "expand_dims": (X + (("axis", ("axes",), R),), b_expand_dims),
    "squeeze": (X + (("axes", ("axis",), None),), b_squeeze),
    "index": (X + (("axis", (), R), ("i", ("index",), R)), b_index),
    "slice": (X + (("axis", (), R), ("start", (), None), ("end", ("stop",), None)), b_slice),
    "slice_stride": (X + (("axis", (), R), ("start", (), None), ("end", ("stop",), None),
                          ("step", (), R)), b_slice),
    "gather": (X + (("idx", ("indices",), R), ("axis", (), None)), b_gather),
    "pad": (X + (("pads", ("padding",), None), ("value", (), None), ("lo", (), None), ("hi", (), None),
                 ("interior", (), None)), b_pad),
    "concat": ((("xs", ("tensors",), R),) + tuple((f"x{i}", (), None) for i in range(1, 8))
               + (("axis", (), None),), b_concat),
    "conv2d": ((("x", ("input",), R), ("w", ("filter", "kernel"), R), ("strides", ("stride",), None),
                ("padding", (), None), ("dilation", ("dilations", "rhs_dilation"), None),
                ("stride_h", (), None), ("stride_w", (), None)), b_conv2d),
    "cast": (X + (("dtype", (), R),), b_cast),
}


#: name -> (parameter names, the number of leading positional arguments that covers every required
#: parameter): calls with only positional arguments in that range bind trivially.
_QUICK: dict[str, tuple[tuple[str, ...], int]] = {}


def register(table: dict[str, tuple[tuple, Callable[[Args], Any]]]) -> None:
    """Add builtins (name -> (parameters, lowering)); a later table may replace a name."""
    for name, (params, fn) in table.items():
        assert all(d is None or d is REQUIRED for _, _, d in params)
        BUILTINS[name] = (params, fn)
        _QUICK[name] = (tuple(p for p, _, _ in params),
                        max((i + 1 for i, (_, _, d) in enumerate(params) if d is REQUIRED), default=0))


register(dict(BUILTINS))
