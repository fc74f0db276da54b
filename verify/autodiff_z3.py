"""Z3 proofs that every linear/structural VJP rule returns a cotangent of the primal operand's
shape, for all values of the symbolic dims.

Two kinds of proof, both reusing ``mind.ir.z3dims`` (``Z3Arith``, ``SymbolTable``) and ``verify.z3arith`` (``Z3Context``):

1. *Rule runs on symbolic shapes.*  The rule (``OpDef.vjp``) builds its IR with a ``FunctionBuilder``
   over symbolic dims (``B``, ``M``, …) exactly as the transform does.  Then every op of the forward
   op and of the VJP IR is re-run through the spec's shape rule on Z3 terms: the forward op's
   constraints are the premise; the goal is that every VJP op's constraints hold, its result shape is
   the one the builder recorded, and each cotangent's shape equals its operand's shape.
2. *Attribute formulas for all extents.*  Where a rule needs concrete attributes (``pad``'s lo/hi,
   ``slice``'s start/stop, ``conv2d``'s padding), the helper that computes them
   (``mind.spec.ops.vjp.slice_vjp_params`` / ``pad_vjp_params`` / ``conv_window``) is
   evaluated on Z3 terms with the extents symbolic (attributes enumerated over small ranges), and the
   spec's shape functions (``slice_extent``, ``pad_extent``, ``conv_extent`` via the op's shape rule)
   of the VJP ops must give back the primal extent.

Verdicts: proved (unsat of the negation), refuted (a model; reported), unknown (solver gave up).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from mind.ir.builder import FunctionBuilder
from mind.ir.core import Assumption, Operation
from mind.spec.dims import sym
from mind.spec.dtypes import DType
from mind.spec.ops import OPS, TensorType
from mind.spec.ops.vjp import conv_window, pad_vjp_params, slice_vjp_params

F64 = DType.F64


def _z3():
    import z3

    return z3


def check_implication(premise: Any, goal: Any) -> tuple[str, str]:
    z3 = _z3()
    from mind.ir.z3dims import new_solver, timed_check
    from mind.verify.prove import spec_limits

    limits = spec_limits()
    s = new_solver(limits)
    s.add(premise, z3.Not(goal))
    r, reason = timed_check(s, limits)
    if r == z3.unsat:
        return "proved", ""
    if r == z3.sat:
        return "refuted", str(s.model())
    return "unknown", reason or ""


def _zeq(a: Any, b: Any) -> Any:
    z3 = _z3()
    from mind.ir.z3dims import zint

    if isinstance(a, int) and isinstance(b, int):
        return z3.BoolVal(a == b)
    return zint(a) == zint(b)


# ---------------------------------------------------------------------------------------------
# 1. rule runs on symbolic shapes
# ---------------------------------------------------------------------------------------------


@dataclass
class SymCase:
    rule: str  # e.g. "matmul/lhs"
    op: str
    operands: Sequence[TensorType | Any]  # TensorType → a parameter; other → a constant (numpy array)
    attrs: dict[str, Any]
    wants: tuple[bool, ...]
    assumptions: tuple[Assumption, ...] = ()


def _attrs_z3(op: str, attrs: dict[str, Any], table: Any) -> dict[str, Any]:
    out = {}
    for a in OPS[op].attrs:
        if a.name not in attrs:
            continue
        v = attrs[a.name]
        out[a.name] = tuple(table.to_z3(d) for d in v) if a.kind == "dims" else v
    return out


def _run_z3(op: Operation, zshapes: dict[int, tuple], table: Any) -> tuple[tuple, list]:
    from mind.verify.z3arith import Z3Context

    ctx = Z3Context()
    types = [TensorType(v.type.dtype, zshapes[id(v)]) for v in op.operands]
    t = OPS[op.op].infer(ctx, types, _attrs_z3(op.op, op.attrs, table))
    return tuple(t.shape), [o.cond for o in ctx.obligations]


def prove_symbolic(case: SymCase) -> tuple[str, str]:
    z3 = _z3()
    from mind.ir.z3dims import SymbolTable

    b = FunctionBuilder("adjoint", case.assumptions)
    vals = []
    for i, t in enumerate(case.operands):
        if isinstance(t, TensorType):
            vals.append(b.param(f"x{i}", t))
        else:
            from mind.spec.dtypes import from_numpy

            vals.append(b.const(t, from_numpy(t.dtype)))
    y = b.emit(case.op, *vals, **case.attrs)
    fwd = b.ops[-1]
    g = b.param("g", y.type)
    start = len(b.ops)
    cots = OPS[case.op].vjp(b, fwd, g, case.wants)
    table = SymbolTable()
    zshapes: dict[int, tuple] = {}
    premises = []
    for p in b.params:
        zshapes[id(p)] = tuple(table.to_z3(d) for d in p.type.shape)
    for op in b.ops[:start]:
        shape, obl = _run_z3(op, zshapes, table)
        zshapes[id(op.result)] = shape
        premises += obl
    zshapes[id(g)] = zshapes[id(y)]
    goals = []
    for op in b.ops[start:]:
        shape, obl = _run_z3(op, zshapes, table)
        goals += obl
        declared = tuple(table.to_z3(d) for d in op.result.type.shape)
        goals += [_zeq(a, c) for a, c in zip(shape, declared)]
        zshapes[id(op.result)] = shape
    for v, c, w in zip(vals, cots, case.wants):
        if w and c is not None:
            goals += [_zeq(a, c2) for a, c2 in zip(zshapes[id(c)], zshapes[id(v)])]
            if len(zshapes[id(c)]) != len(zshapes[id(v)]):
                return "refuted", "rank differs"
    for name, var in table.vars.items():
        premises.append(var >= 0)
    for a in case.assumptions:
        rel = {">=": lambda x, y: x >= y, "<=": lambda x, y: x <= y, "==": lambda x, y: x == y,
               ">": lambda x, y: x > y, "<": lambda x, y: x < y}[a.rel]
        premises.append(rel(_zint(table.to_z3(a.lhs)), _zint(table.to_z3(a.rhs))))
    return check_implication(z3.And(*premises) if premises else z3.BoolVal(True),
                             z3.And(*goals) if goals else z3.BoolVal(True))


def _zint(x: Any) -> Any:
    from mind.ir.z3dims import zint

    return zint(x)


def symbolic_cases() -> list[SymCase]:
    import numpy as np

    B, M, K, N, C, O = (sym(s) for s in "BMKNCO")
    ge1 = tuple(Assumption(s, ">=", 1) for s in (B, M, K, N, C, O))
    T = lambda *s: TensorType(F64, tuple(s))  # noqa: E731
    conv = {"strides": (2, 1), "padding": ((1, 0), (0, 2)), "lhs_dilation": (1, 2), "rhs_dilation": (2, 1)}
    return [
        SymCase("reshape", "reshape", [T(B, M, 6)], {"shape": (B * M, 2, 3)}, (True,)),
        SymCase("transpose", "transpose", [T(B, M, K)], {"permutation": (2, 0, 1)}, (True,)),
        SymCase("reduce_sum", "reduce_sum", [T(B, M, K)], {"axes": (0, 2), "keepdims": False}, (True,)),
        SymCase("reduce_sum/keepdims", "reduce_sum", [T(B, 3, K)], {"axes": (1,), "keepdims": True}, (True,)),
        SymCase("slice", "slice", [T(B, M)], {"start": (0, M - 1), "stop": (B, -1), "step": (1, -1)}, (True,), ge1),
        SymCase("slice/window", "slice", [T(B, 7)], {"start": (1, 6), "stop": (B - 1, 0), "step": (1, -3)}, (True,),
                (Assumption(B, ">=", 3),)),
        SymCase("pad", "pad", [T(B, M), T()], {"lo": (1, 0), "hi": (2, 3), "interior": (0, 0)}, (True, True)),
        SymCase("pad/interior", "pad", [T(B, 4), T()], {"lo": (0, 2), "hi": (1, 0), "interior": (0, 2)}, (True, True)),
        SymCase("gather", "gather", [T(B, 5, K), TensorType(DType.I64, (M, N))], {"axis": 1}, (True, False)),
        SymCase("matmul/lhs", "matmul", [T(B, 1, M, K), T(N, K, O)], {}, (True, False)),
        SymCase("matmul/rhs", "matmul", [T(B, 1, M, K), T(N, K, O)], {}, (False, True)),
        SymCase("matmul/2d", "matmul", [T(M, K), T(K, N)], {}, (True, True)),
        SymCase("conv2d/input", "conv2d", [T(B, 6, 5, C), T(3, 2, C, O)], conv, (True, False)),
        SymCase("conv2d/filter", "conv2d", [T(B, 6, 5, C), T(3, 2, C, O)], conv, (False, True)),
        SymCase("convert", "convert", [T(B, M)], {"dtype": DType.F32}, (True,)),
        SymCase("add/broadcast", "add", [T(B, 1, K), T(M, 1)], {}, (True, True)),
        SymCase("select/broadcast", "select", [np.array([True, False]), T(B, 2), T(1)], {}, (False, True, True)),
        SymCase("reduce_max", "reduce_max", [T(B, M, 3)], {"axes": (1, 2), "keepdims": False}, (True,)),
    ]


# ---------------------------------------------------------------------------------------------
# 2. attribute formulas for all extents
# ---------------------------------------------------------------------------------------------


def _infer(op: str, shapes: Sequence[tuple], attrs: dict[str, Any]) -> tuple[tuple, list]:
    from mind.verify.z3arith import Z3Context

    ctx = Z3Context()
    t = OPS[op].infer(ctx, [TensorType(F64, tuple(s)) for s in shapes], attrs)
    return tuple(t.shape), [o.cond for o in ctx.obligations]


def prove_slice_formula(steps: Sequence[int] = (-3, -2, -1, 1, 2, 3)) -> tuple[str, str]:
    """∀ n, start, stop (any integers satisfying slice's constraints) and each step: the rule's
    reversal slice and pad are well-formed and give back extent n (for m ≥ 1, or |step| = 1)."""
    z3 = _z3()
    from mind.ir.z3dims import Z3_ARITH as A

    n, b, e = z3.Ints("n start stop")
    for s in steps:
        (m,), pre = _infer("slice", [(n,)], {"start": (b,), "stop": (e,), "step": (s,)})
        lo, hi, interior, rev = slice_vjp_params(A, n, b, s, m)
        goals = []
        ext = m
        if rev:
            (ext,), obl = _infer("slice", [(m,)], {"start": (m - 1,), "stop": (-1,), "step": (-1,)})
            goals += obl
        (out,), obl = _infer("pad", [(ext,), ()], {"lo": (lo,), "hi": (hi,), "interior": (interior,)})
        goals += obl + [out == n]
        premise = z3.And(n >= 0, *pre, z3.Or(_zint(m) >= 1, z3.BoolVal(abs(s) == 1)))
        verdict, why = check_implication(premise, z3.And(*goals))
        if verdict != "proved":
            return verdict, f"step {s}: {why}"
    return "proved", ""


def prove_pad_formula(interiors: Sequence[int] = (0, 1, 2, 3)) -> tuple[str, str]:
    """∀ n, lo, hi ≥ 0 and each interior: slice(start = lo, stop = lo + n·(i+1) - i, step = i+1) of
    the padded extent is well-formed and has extent n (when n ≥ 1 or lo ≥ i; else start = stop)."""
    z3 = _z3()
    from mind.ir.z3dims import Z3_ARITH as A

    n, lo, hi = z3.Ints("n lo hi")
    for i in interiors:
        (p,), pre = _infer("pad", [(n,), ()], {"lo": (lo,), "hi": (hi,), "interior": (i,)})
        start, stop, step = pad_vjp_params(A, n, lo, i)
        (m,), obl = _infer("slice", [(p,)], {"start": (start,), "stop": (stop,), "step": (step,)})
        prem = z3.And(n >= 0, *pre)
        verdict, why = check_implication(z3.And(prem, z3.Or(n >= 1, lo >= i)), z3.And(*obl, m == n))
        if verdict != "proved":
            return verdict, f"interior {i}: {why}"
        (m0,), obl0 = _infer("slice", [(p,)], {"start": (lo,), "stop": (lo,), "step": (step,)})
        verdict, why = check_implication(z3.And(prem, n == 0), z3.And(*obl0, m0 == n))
        if verdict != "proved":
            return verdict, f"interior {i}, n = 0: {why}"
    return "proved", ""


def prove_conv_formula(which: str, ks=(1, 2, 3), ss=(1, 2, 3), ds=(1, 2), rs=(1, 2), pads=(0, 1, 3)
                       ) -> tuple[str, str]:
    """∀ input extent H (and the batch/channel dims symbolic), each kernel extent, stride,
    lhs/rhs dilation and padding pair from the ranges: the VJP convolution's window (via
    ``conv_window``) is well-formed and its result extent is H (``input``) or K (``filter``)."""
    z3 = _z3()
    from mind.ir.z3dims import Z3_ARITH as A

    H, N, C, O = z3.Ints("H N C O")
    count = 0
    for k, s, d, r, p0, p1 in itertools.product(ks, ss, ds, rs, pads, pads):
        attrs = {"strides": (s, 1), "padding": ((p0, p1), (0, 0)), "lhs_dilation": (d, 1), "rhs_dilation": (r, 1)}
        (_, oh, _, _), pre = _infer("conv2d", [(N, H, 1, C), (k, 1, C, O)], attrs)
        if which == "input":
            length = (H - 1) * d + (k - 1) * r + 1
            h0, h1, lo, hi = conv_window(A, oh, s, (k - 1) * r - p0, length)
            (_, g1, _, _), o1 = _infer("slice", [(N, oh, 1, O)], {"start": (0, h0, 0, 0), "stop": (N, h1, 1, O),
                                                                    "step": (1, 1, 1, 1)})
            (_, out, _, c_out), o2 = _infer("conv2d", [(N, g1, 1, O), (k, 1, O, C)],
                                            {"strides": (d, 1), "padding": ((lo, hi), (0, 0)),
                                             "lhs_dilation": (s, 1), "rhs_dilation": (r, 1)})
            goal = z3.And(*o1, *o2, out == H, _zeq(c_out, C))
            premise = z3.And(H >= 1, N >= 0, C >= 0, O >= 0, *pre, _zint(h1) > _zint(h0))
        else:
            length = (oh - 1) * s + (k - 1) * r + 1
            h0, h1, lo, hi = conv_window(A, H, d, p0, length)
            (_, x1, _, _), o1 = _infer("slice", [(N, H, 1, C)], {"start": (0, h0, 0, 0), "stop": (N, h1, 1, C),
                                                                   "step": (1, 1, 1, 1)})
            (_, out, _, _), o2 = _infer("conv2d", [(C, x1, 1, N), (oh, 1, N, O)],
                                        {"strides": (r, 1), "padding": ((lo, hi), (0, 0)),
                                         "lhs_dilation": (d, 1), "rhs_dilation": (s, 1)})
            goal = z3.And(*o1, *o2, out == k)
            premise = z3.And(H >= 0, N >= 0, C >= 0, O >= 0, *pre, _zint(oh) >= 1, _zint(h1) > _zint(h0))
        verdict, why = check_implication(premise, goal)
        count += 1
        if verdict != "proved":
            return verdict, f"k={k} s={s} d={d} r={r} pad=({p0},{p1}): {why}"
    return "proved", f"{count} attribute combinations"


def all_proofs() -> list[tuple[str, Callable[[], tuple[str, str]]]]:
    out: list[tuple[str, Callable[[], tuple[str, str]]]] = []
    for c in symbolic_cases():
        out.append((c.rule, lambda c=c: prove_symbolic(c)))
    out.append(("slice/formula", prove_slice_formula))
    out.append(("pad/formula", prove_pad_formula))
    out.append(("conv2d/input/formula", lambda: prove_conv_formula("input")))
    out.append(("conv2d/filter/formula", lambda: prove_conv_formula("filter")))
    return out
