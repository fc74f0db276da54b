"""The generated single-op tier: every op × dtype × value class, and every op on symbolic dims.

Each cell ``gen/<op>/<dtype>/<class>`` draws ``CASES_PER_CELL`` well-typed applications of the op
(random shapes, attributes and values of the class) from its own seeded stream; the symbolic cells
``gen/<op>/<dtype>/symbolic/<n>`` run one function with a symbolic dim ``N`` bound to several sizes.
Types come from the spec's shape rules (``FunctionBuilder``), expected values from the reference.
"""

from __future__ import annotations

from typing import Any, Callable, Iterator

import numpy as np

from mind.conformance.coverage import ALL, DOMAINS, classes_of
from mind.conformance.generate.build import success_case
from mind.conformance.generate.values import broadcast_operand, rng_for, shape, values
from mind.ir.builder import FunctionBuilder
from mind.ir.core import Assumption, Module
from mind.spec.dims import DimExpr
from mind.spec.dtypes import DType
from mind.spec.ops import TensorType

CASES_PER_CELL = 4
SYMBOLIC_SIZES = (0, 1, 3)
DIRECTIONS = ("eq", "ne", "lt", "le", "gt", "ge")


class Draw:
    """One draw: a builder, the inputs so far, the rng, dtype and class of the cell."""

    def __init__(self, rng: np.random.Generator, dtype: DType, cls: str, k: int):
        self.rng, self.dtype, self.cls, self.k = rng, dtype, cls, k
        self.b = FunctionBuilder("main")
        self.inputs: dict[str, np.ndarray] = {}
        self.empty = cls == "empty"

    def param(self, name: str, shp: list[int], dtype: DType | None = None, **kw: Any) -> Any:
        dt = dtype or self.dtype
        v = self.b.param(name, TensorType(dt, tuple(shp)))
        self.inputs[v.name] = values(self.rng, dt, shp, self.cls if dt is self.dtype else "normal", **kw)
        return v

    def rank(self, lo: int = 0, hi: int = 3) -> int:
        return int(self.rng.integers(lo, hi + 1))

    def shape(self, rank: int, **kw: Any) -> list[int]:
        return shape(self.rng, rank, empty=self.empty, **kw)


def _binary(op: str) -> Callable[[Draw], Any]:
    def make(d: Draw) -> Any:
        r = d.shape(d.rank())
        a = d.param("a", broadcast_operand(d.rng, r))
        b = d.param("b", broadcast_operand(d.rng, r))
        return d.b.emit(op, a, b)
    return make


def _unary(op: str) -> Callable[[Draw], Any]:
    def make(d: Draw) -> Any:
        kw = {"positive": True} if op == "log" else {"scale": 8.0}
        return d.b.emit(op, d.param("a", d.shape(d.rank()), **kw))
    return make


def _compare(d: Draw) -> Any:
    r = d.shape(d.rank())
    sa = broadcast_operand(d.rng, r)
    same = d.rng.random() < 0.4  # equal elements make eq, le and ge interesting
    a = d.param("a", sa)
    b = d.param("b", sa if same else broadcast_operand(d.rng, r))
    if same:
        take = d.rng.random(d.inputs["a"].shape) < 0.5
        d.inputs["b"][take] = d.inputs["a"][take]
    return d.b.emit("compare", a, b, direction=DIRECTIONS[d.k % len(DIRECTIONS)])


def _select(d: Draw) -> Any:
    r = d.shape(d.rank())
    p = d.param("p", broadcast_operand(d.rng, r), DType.BOOL)
    return d.b.emit("select", p, d.param("a", broadcast_operand(d.rng, r)), d.param("b", broadcast_operand(d.rng, r)))


def _convert(d: Draw) -> Any:
    target = ALL[(d.k + ALL.index(d.dtype) + 1) % len(ALL)] if d.k < len(ALL) - 1 else d.dtype
    return d.b.emit("convert", d.param("a", d.shape(d.rank()), scale=300.0), dtype=target)


def _axes(d: Draw, rank: int) -> tuple[int, ...]:
    return tuple(i for i in range(rank) if d.rng.random() < 0.5)


def _reduce(op: str) -> Callable[[Draw], Any]:
    def make(d: Draw) -> Any:
        rank = d.rank(0 if d.k == 0 else 1, 3)
        x = d.param("a", d.shape(rank))
        return d.b.emit(op, x, axes=_axes(d, rank), keepdims=bool(d.rng.random() < 0.5))
    return make


def _factor(d: Draw, total: int, rank: int) -> tuple[int, ...]:
    if total == 0:
        dims = [int(x) for x in d.rng.integers(1, 4, size=max(rank, 1))]
        dims[int(d.rng.integers(len(dims)))] = 0
        return tuple(dims)
    dims = [1] * max(rank, 1 if total > 1 else 0)
    n, p = total, 2
    while n > 1:
        while n % p == 0:
            dims[int(d.rng.integers(len(dims)))] *= p
            n //= p
        p += 1
    return tuple(dims)


def _reshape(d: Draw) -> Any:
    x = d.param("a", d.shape(d.rank()))
    return d.b.emit("reshape", x, shape=_factor(d, int(np.prod(d.inputs["a"].shape)), d.rank()))


def _transpose(d: Draw) -> Any:
    rank = d.rank(0, 4)
    x = d.param("a", d.shape(rank, hi=3))
    return d.b.emit("transpose", x, permutation=tuple(int(i) for i in d.rng.permutation(rank)))


def _slice(d: Draw) -> Any:
    rank = d.rank(1, 3)
    shp = d.shape(rank, hi=5)
    start, stop, step = [], [], []
    for n in shp:
        s = int(d.rng.choice([-3, -2, -1, 1, 2, 3]))
        if s > 0:
            a, b = (int(v) for v in d.rng.integers(0, n + 1, size=2))
        else:
            a, b = (int(v) for v in d.rng.integers(-1, n, size=2))
        start.append(a), stop.append(b), step.append(s)
    return d.b.emit("slice", d.param("a", shp), start=tuple(start), stop=tuple(stop), step=tuple(step))


def _pad(d: Draw) -> Any:
    rank = d.rank()
    x = d.param("a", d.shape(rank))
    v = d.param("v", [])
    ints = lambda: tuple(int(i) for i in d.rng.integers(0, 3, size=rank))  # noqa: E731
    return d.b.emit("pad", x, v, lo=ints(), hi=ints(), interior=ints())


def _gather(d: Draw) -> Any:
    rank = d.rank(1, 3)
    shp = d.shape(rank)
    x = d.param("a", shp)
    axis = int(d.rng.integers(rank))
    itype = (DType.I32, DType.I64)[d.k % 2]
    ishape = shape(d.rng, d.rank(0, 2), hi=3)
    n = shp[axis]
    idx = d.rng.integers(-2, n + 3, size=ishape)
    if d.k >= 2 and idx.size:  # out-of-range indices at the ends of the index dtype
        idx.reshape(-1)[0] = itype.int_min if d.k % 2 else itype.int_max
    i = d.b.param("i", TensorType(itype, tuple(ishape)))
    d.inputs[i.name] = np.asarray(idx, dtype=itype.numpy)
    return d.b.emit("gather", x, i, axis=axis)


def _matmul(d: Draw) -> Any:
    m, k, n = (int(v) for v in d.rng.integers(1, 5, size=3))
    batch = shape(d.rng, d.rank(0, 2), hi=3)
    dims = [m, k, n] + batch
    if d.empty:
        dims[int(d.rng.integers(len(dims)))] = 0
    m, k, n, batch = dims[0], dims[1], dims[2], dims[3:]
    a = d.param("a", broadcast_operand(d.rng, batch) + [m, k])
    b = d.param("b", broadcast_operand(d.rng, batch) + [k, n])
    return d.b.emit("matmul", a, b)


def _conv2d(d: Draw) -> Any:
    r = d.rng
    nb, h, w, c = int(r.integers(1, 3)), int(r.integers(1, 6)), int(r.integers(1, 6)), int(r.integers(1, 4))
    kh, kw, o = int(r.integers(1, 4)), int(r.integers(1, 4)), int(r.integers(1, 4))
    if d.empty:
        which = int(r.integers(4))
        nb, c, o = (0 if which == 0 else nb), (0 if which == 1 else c), (0 if which == 2 else o)
        if which == 3:
            h, kh = 1, 3
    x = d.param("x", [nb, h, w, c])
    f = d.param("w", [kh, kw, c, o])
    two = lambda lo, hi: tuple(int(v) for v in r.integers(lo, hi + 1, size=2))  # noqa: E731
    pad = tuple((int(r.integers(0, 3)), int(r.integers(0, 3))) for _ in range(2))
    if d.empty and which == 3:
        pad = ((0, 0), pad[1])
    return d.b.emit("conv2d", x, f, strides=two(1, 2), padding=pad, lhs_dilation=two(1, 2), rhs_dilation=two(1, 2))


def _const(d: Draw) -> Any:
    shp = d.shape(d.rank(0, 2))
    return d.b.const(values(d.rng, d.dtype, shp, d.cls), d.dtype)


MAKERS: dict[str, Callable[[Draw], Any]] = {
    "const": _const, "add": _binary("add"), "sub": _binary("sub"), "mul": _binary("mul"), "div": _binary("div"),
    "exp": _unary("exp"), "log": _unary("log"), "compare": _compare, "select": _select, "convert": _convert,
    "reduce_sum": _reduce("reduce_sum"), "reduce_max": _reduce("reduce_max"), "reshape": _reshape,
    "transpose": _transpose, "slice": _slice, "pad": _pad, "gather": _gather, "matmul": _matmul,
    "conv2d": _conv2d,
}


def _case(cid: str, description: str, d: Draw, result: Any) -> dict[str, Any]:
    fn = d.b.finish([result])
    return success_case(cid, description, Module([fn]).text(), d.inputs, None, source="generated")


def cell_cases(op: str, dtype: DType, cls: str) -> Iterator[dict[str, Any]]:
    cell = f"gen/{op}/{dtype.value}/{cls}"
    rng = rng_for(cell)
    for k in range(CASES_PER_CELL):
        d = Draw(rng, dtype, cls, k)
        result = MAKERS[op](d)
        yield _case(f"{cell}/{k}", f"`{op}` on {dtype.value} {cls} values (seeded draw {k})", d, result)


# ---------------------------------------------------------------------------------------------
# symbolic dims
# ---------------------------------------------------------------------------------------------

def _symbolic(op: str, dtype: DType, b: FunctionBuilder) -> tuple[Any, dict[str, Callable[[int], list[int]]]]:
    """The function of a symbolic cell, and each parameter's shape as a function of N."""
    N = DimExpr.symbol("N")
    T = lambda *s, dt=dtype: TensorType(dt, tuple(s))  # noqa: E731
    shapes: dict[str, Callable[[int], list[int]]] = {}

    def param(name: str, t: TensorType, shp: Callable[[int], list[int]]) -> Any:
        shapes[name] = shp
        return b.param(name, t)

    if op in ("add", "sub", "mul", "div"):
        r = b.emit(op, param("a", T(N, 3), lambda n: [n, 3]), param("b", T(3), lambda n: [3]))
    elif op in ("exp", "log"):
        r = b.emit(op, param("a", T(N, 2), lambda n: [n, 2]))
    elif op == "compare":
        r = b.emit(op, param("a", T(N, 2), lambda n: [n, 2]), param("b", T(N, 2), lambda n: [n, 2]), direction="lt")
    elif op == "select":
        r = b.emit(op, param("p", T(N, 2, dt=DType.BOOL), lambda n: [n, 2]), param("a", T(N, 2), lambda n: [n, 2]),
                   param("b", T(), lambda n: []))
    elif op == "convert":
        r = b.emit(op, param("a", T(N), lambda n: [n]), dtype=ALL[(ALL.index(dtype) + 2) % len(ALL)])
    elif op in ("reduce_sum", "reduce_max"):
        r = b.emit(op, param("a", T(N, 3), lambda n: [n, 3]), axes=(0,), keepdims=False)
    elif op == "reshape":
        r = b.emit(op, param("a", T(N, 2), lambda n: [n, 2]), shape=(N * 2,))
    elif op == "transpose":
        r = b.emit(op, param("a", T(N, 3), lambda n: [n, 3]), permutation=(1, 0))
    elif op == "slice":
        r = b.emit(op, param("a", T(N, 4), lambda n: [n, 4]), start=(0, 1), stop=(N, 4), step=(1, 2))
    elif op == "pad":
        r = b.emit(op, param("a", T(N, 2), lambda n: [n, 2]), param("v", T(), lambda n: []),
                   lo=(1, 0), hi=(0, 1), interior=(0, 1))
    elif op == "gather":
        r = b.emit(op, param("a", T(N, 2), lambda n: [n, 2]), param("i", T(3, dt=DType.I32), lambda n: [3]), axis=0)
    elif op == "matmul":
        r = b.emit(op, param("a", T(N, 3), lambda n: [n, 3]), param("b", T(3, 2), lambda n: [3, 2]))
    elif op == "conv2d":
        r = b.emit(op, param("x", T(N, 3, 3, 1), lambda n: [n, 3, 3, 1]), param("w", T(2, 2, 1, 2), lambda n: [2, 2, 1, 2]),
                   strides=(1, 1), padding=((0, 0), (0, 0)), lhs_dilation=(1, 1), rhs_dilation=(1, 1))
    else:
        raise KeyError(op)
    return r, shapes


def symbolic_cases(op: str, dtype: DType) -> Iterator[dict[str, Any]]:
    cell = f"gen/{op}/{dtype.value}/symbolic"
    rng = rng_for(cell)
    for n in SYMBOLIC_SIZES:
        b = FunctionBuilder("main", [Assumption(DimExpr.symbol("N"), ">=", 0)])
        result, shapes = _symbolic(op, dtype, b)
        fn = b.finish([result])
        inputs = {}
        for p in fn.params:
            shp = shapes[p.name](n)
            if p.name == "i":
                inputs[p.name] = rng.integers(-1, 4, size=shp).astype(np.int32)
            else:
                inputs[p.name] = values(rng, p.type.dtype, shp, "normal", positive=op == "log")
        yield success_case(f"{cell}/{n}", f"`{op}` on {dtype.value} with a symbolic dim N bound to {n}",
                           Module([fn]).text(), inputs, None, source="generated")


def all_cases() -> Iterator[dict[str, Any]]:
    """Single-op cells first (op, dtype, class), then the symbolic cells."""
    for op, domain in DOMAINS.items():
        for dtype in domain:
            for cls in classes_of(dtype):
                yield from cell_cases(op, dtype, cls)
    for op, domain in DOMAINS.items():
        if op == "const":
            continue
        for dtype in domain:
            yield from symbolic_cases(op, dtype)
