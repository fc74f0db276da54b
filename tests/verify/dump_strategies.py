"""Hypothesis strategies: Core IR dumps with symbolic dims and assumptions, right or wrong on purpose,
and a concrete oracle that checks them at plain-int bindings of their symbols.

The dumps are text, as an auditor receives them.  Each op's declared type is the type it is meant
to have (computed structurally here, not by the spec's rule), and sometimes a mutated one; reshape
targets, slice bounds and operand pairs are sometimes wrong, so both verdicts occur.
"""

from __future__ import annotations

import itertools
from typing import Any

from hypothesis import strategies as st

from mind.ir.core import Function, Operation, Value
from mind.ir.verify import check_function
from mind.spec.dims import Dim, DimExpr, evaluate, format_dim, sym
from mind.spec.ops import TensorType

SYMBOLS = ("A", "B", "C")
A, B, C = (sym(s) for s in SYMBOLS)
RELATIONS = (">=", "<=", "==", ">", "<")


@st.composite
def dims(draw) -> Dim:
    s = draw(st.sampled_from([A, B, C]))
    t = draw(st.sampled_from([A, B, C]))
    k = draw(st.integers(1, 3))
    return draw(st.sampled_from([s, s, s + k, k * s, s * t, s - 1, 2, 3, 1]))


@st.composite
def assumptions(draw, bound: set[str]) -> list[str]:
    """Up to two assumptions over the symbols the parameters bind."""
    out = []
    for _ in range(draw(st.integers(0, 2))):
        lhs = draw(st.sampled_from([A, B, C, A + B, A * B]))
        rhs = draw(st.one_of(st.integers(0, 3), st.sampled_from([A, B, C, C + 1, B * C])))
        used = lhs.symbols() | (rhs.symbols() if isinstance(rhs, DimExpr) else set())
        if used <= bound:
            out.append(f"{format_dim(lhs)} {draw(st.sampled_from(RELATIONS))} {format_dim(rhs)}")
    return out


def _shape_text(shape: tuple[Dim, ...]) -> str:
    return ", ".join(format_dim(d) for d in shape)


def _bump(draw, shape: tuple[Dim, ...]) -> tuple[Dim, ...]:
    """``shape`` with one dim made wrong on purpose."""
    if not shape:
        return (1,)
    i = draw(st.integers(0, len(shape) - 1))
    new = draw(st.sampled_from([shape[i] + 1, A, B, shape[i] * 2]))
    return shape[:i] + (new,) + shape[i + 1:]


def _broadcast_intent(x: tuple, y: tuple) -> tuple:
    r = max(len(x), len(y))
    x, y = (1,) * (r - len(x)) + x, (1,) * (r - len(y)) + y
    return tuple(b if a == 1 else a for a, b in zip(x, y))


@st.composite
def dump_texts(draw) -> str:
    params: list[tuple[str, tuple[Dim, ...]]] = []
    for i in range(draw(st.integers(1, 3))):
        shape = tuple(draw(st.lists(dims(), min_size=1, max_size=3)))
        params.append((f"p{i}", shape))
    values = list(params)
    lines = []
    for n in range(draw(st.integers(1, 4))):
        name, shape = draw(st.sampled_from(values))
        kind = draw(st.sampled_from(["add", "mul", "reshape", "reshape", "matmul", "reduce_sum", "transpose",
                                     "slice", "pad"]))
        attrs = ""
        if kind in ("add", "mul"):
            other, oshape = draw(st.sampled_from(values))
            operands, intent = f"%{name}, %{other}", _broadcast_intent(shape, oshape)
        elif kind == "reshape":
            total: Any = 1
            for d in shape:
                total = total * d
            target = draw(st.sampled_from([(total,), (1, total), (total + 1,), (A, B), (total, 1)]))
            operands, intent = f"%{name}", target
            attrs = f" {{shape = [{_shape_text(target)}]}}"
        elif kind == "matmul":
            other, oshape = draw(st.sampled_from(values))
            if len(shape) != 2 or len(oshape) != 2:
                continue
            operands, intent = f"%{name}, %{other}", (shape[0], oshape[1])
        elif kind == "reduce_sum":
            if not shape:
                continue
            axis = draw(st.integers(0, len(shape) - 1))
            keep = draw(st.booleans())
            intent = tuple(1 if i == axis else d for i, d in enumerate(shape)) if keep else \
                tuple(d for i, d in enumerate(shape) if i != axis)
            operands = f"%{name}"
            attrs = f" {{axes = [{axis}], keepdims = {'true' if keep else 'false'}}}"
        elif kind == "transpose":
            perm = draw(st.permutations(list(range(len(shape)))))
            operands, intent = f"%{name}", tuple(shape[p] for p in perm)
            attrs = f" {{permutation = [{', '.join(map(str, perm))}]}}"
        elif kind == "slice":
            starts = [draw(st.sampled_from([0, 1])) for _ in shape]
            stops = [draw(st.sampled_from([d, d, d - 1, d + 1, A])) for d in shape]
            operands, intent = f"%{name}", tuple(e - b for b, e in zip(starts, stops))
            attrs = (f" {{start = [{_shape_text(tuple(starts))}], stop = [{_shape_text(tuple(stops))}], "
                     f"step = [{', '.join('1' for _ in shape)}]}}")
        else:  # pad
            lo = [draw(st.integers(0, 2)) for _ in shape]
            hi = [draw(st.integers(0, 2)) for _ in shape]
            lines.append(f"  %z{n} = const {{value = 0.0}} : f32[]")
            operands, intent = f"%{name}, %z{n}", tuple(d + a + b for d, a, b in zip(shape, lo, hi))
            attrs = (f" {{lo = [{', '.join(map(str, lo))}], hi = [{', '.join(map(str, hi))}], "
                     f"interior = [{', '.join('0' for _ in shape)}]}}")
        declared = _bump(draw, intent) if draw(st.integers(0, 3)) == 0 else intent
        out = f"v{n}"
        lines.append(f"  %{out} = {kind}({operands}){attrs} : f32[{_shape_text(declared)}]")
        values.append((out, declared))
    res_name, res_shape = values[-1]
    bound = {n for _, shape in params for d in shape if isinstance(d, DimExpr) for n in d.symbols()}
    where = draw(assumptions(bound))
    head = (f"func @main({', '.join(f'%{p}: f32[{_shape_text(s)}]' for p, s in params)}) -> "
            f"(f32[{_shape_text(res_shape)}])" + (f" where {', '.join(where)}" if where else "") + " {")
    return "\n".join([head, *lines, f"  return %{res_name}", "}"]) + "\n"


# -- the concrete oracle ----------------------------------------------------------------------------


def function_symbols(fn: Function) -> list[str]:
    out: set[str] = set()
    for v in fn.values():
        for d in v.type.shape:
            if isinstance(d, DimExpr):
                out |= d.symbols()
    for op in fn.ops:
        for x in op.attrs.values():
            if isinstance(x, tuple):
                out |= {s for d in x if isinstance(d, DimExpr) for s in d.symbols()}
    for a in fn.assumptions:
        out |= a.symbols()
    return sorted(out)


def allowed(fn: Function, env: dict[str, int]) -> bool:
    """The premises hold on plain ints: every symbol and parameter dim ≥ 0, every assumption."""
    try:
        if any(v < 0 for v in env.values()):
            return False
        if any(evaluate(d, env) < 0 for p in fn.params for d in p.type.shape):
            return False
        rel = {">=": int.__ge__, "<=": int.__le__, "==": int.__eq__, ">": int.__gt__, "<": int.__lt__}
        return all(rel[a.rel](evaluate(a.lhs, env), evaluate(a.rhs, env)) for a in fn.assumptions)
    except ZeroDivisionError:
        return False


def concrete_problems(fn: Function, env: dict[str, int]) -> list:
    """The IR verifier's findings on ``fn`` with every symbol replaced by its value in ``env``."""
    def ty(t: TensorType) -> TensorType:
        return TensorType(t.dtype, tuple(evaluate(d, env) for d in t.shape))

    values: dict[int, Value] = {}
    params = []
    for p in fn.params:
        values[id(p)] = q = Value(p.name, ty(p.type), p.span)
        params.append(q)
    ops = []
    for op in fn.ops:
        attrs = {k: (tuple(evaluate(d, env) for d in x) if k in ("shape", "start", "stop") else x)
                 for k, x in op.attrs.items()}
        values[id(op.result)] = r = Value(op.result.name, ty(op.result.type), op.result.span)
        ops.append(Operation(op.op, tuple(values[id(v)] for v in op.operands), attrs, r, op.span))
    results = [values[id(v)] for v in fn.results]
    out = Function(fn.name, params, ops, results, [], fn.span)
    out.result_decls = tuple((ty(t), s) for t, s in fn.result_decls)
    return check_function(out)


def bindings(names: list[str]) -> list[dict[str, int]]:
    """Every assignment of 0..3 to up to three symbols, and a few larger values."""
    grid = [dict(zip(names, vs)) for vs in itertools.product(range(4), repeat=len(names))]
    grid += [{n: 5 + 2 * i for i, n in enumerate(names)}, {n: 7 for n in names}]
    return grid
