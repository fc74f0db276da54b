"""Symbolic proofs of the elementwise VJP rules: the rule's IR, built on rank-0 f64 values, is
translated to a sympy expression and compared with ``g * sympy.diff`` of the op's scalar formula.

``select`` is proved per branch of its (constant) predicate.  Verdicts: proved (the difference
simplifies to 0), refuted (it is a non-zero constant or non-zero at a sample point), unknown.
sympy is imported lazily.
"""

from __future__ import annotations

from typing import Any

from mind.ir.builder import FunctionBuilder
from mind.spec.dtypes import DType
from mind.spec.ops import OPS, TensorType

F64 = DType.F64
SCALAR = TensorType(F64, ())

# The scalar formula of each op, as a function of sympy symbols (lhs/operand x, rhs y).
FORMULAS = {
    "add": lambda sp, x, y: x + y,
    "sub": lambda sp, x, y: x - y,
    "mul": lambda sp, x, y: x * y,
    "div": lambda sp, x, y: x / y,
    "exp": lambda sp, x, y: sp.exp(x),
    "log": lambda sp, x, y: sp.log(x),
}


def ir_to_sympy(ops: list, env: dict[int, Any], pred: dict[int, bool] | None = None) -> dict[int, Any]:
    """Evaluate elementwise ops symbolically: ``env`` maps value ids to sympy expressions."""
    import sympy as sp

    pred = pred or {}
    for op in ops:
        a = [env.get(id(v)) for v in op.operands]
        if op.op == "const":
            import numpy as np

            val = np.asarray(op.attrs["value"]).reshape(-1)[0]
            r = sp.nsimplify(float(val)) if op.result.type.dtype.is_float else sp.Integer(int(val))
        elif op.op == "add":
            r = a[0] + a[1]
        elif op.op == "sub":
            r = a[0] - a[1]
        elif op.op == "mul":
            r = a[0] * a[1]
        elif op.op == "div":
            r = a[0] / a[1]
        elif op.op == "exp":
            r = sp.exp(a[0])
        elif op.op == "log":
            r = sp.log(a[0])
        elif op.op == "select":
            r = a[1] if pred[id(op.operands[0])] else a[2]
        elif op.op in ("convert", "reshape", "reduce_sum", "transpose"):  # identities on scalars
            r = a[0]
        else:
            raise NotImplementedError(f"no sympy translation of {op.op}")
        env[id(op.result)] = r
    return env


def _verdict(diff: Any, symbols: list) -> tuple[str, str]:
    import random

    import sympy as sp

    d = sp.simplify(diff)
    if d == 0:
        return "proved", ""
    if d.is_number:
        return "refuted", f"difference {d}"
    rnd = random.Random(0)
    for _ in range(5):
        point = {s: sp.Rational(rnd.randint(1, 9), rnd.randint(1, 9)) for s in symbols}
        v = d.subs(point)
        if v.is_number and abs(complex(v.evalf())) > 1e-12:
            return "refuted", f"difference {v} at {point}"
    return "unknown", f"difference {d} did not simplify to 0"


def prove_rule(name: str) -> tuple[str, str]:
    """Prove the VJP rule of elementwise op ``name`` ("select" proves both branches)."""
    import sympy as sp

    x, y, g = sp.symbols("x y g", positive=(name == "log"))
    b = FunctionBuilder(f"vjp_{name}")
    if name == "select":
        p = b.param("p", TensorType(DType.BOOL, ()))
        t, f = b.param("t", SCALAR), b.param("f", SCALAR)
        r = b.emit("select", p, t, f)
        operands, syms = [t, f], [x, y]
    elif name in ("exp", "log"):
        xv = b.param("x", SCALAR)
        r = b.emit(name, xv)
        operands, syms = [xv], [x]
    else:
        xv, yv = b.param("x", SCALAR), b.param("y", SCALAR)
        r = b.emit(name, xv, yv)
        operands, syms = [xv, yv], [x, y]
    fwd = b.ops[-1]
    gv = b.param("g", SCALAR)
    start = len(b.ops)
    cots = OPS[name].vjp(b, fwd, gv, tuple(True if v.type.dtype.is_float else False for v in fwd.operands))
    vjp_ops = b.ops[start:]
    notes = []
    for branch in ((True, False) if name == "select" else (None,)):
        env = {id(v): s for v, s in zip(operands, syms)}
        env[id(gv)] = g
        pred = {}
        if name == "select":
            pred[id(fwd.operands[0])] = branch
            env[id(r)] = x if branch else y
            formula = x if branch else y
        else:
            env[id(r)] = FORMULAS[name](sp, x, y)
            formula = FORMULAS[name](sp, x, y)
        env = ir_to_sympy(vjp_ops, env, pred)
        cot_values = [c for c in cots if c is not None] if name != "select" else [cots[1], cots[2]]
        for v, s, c in zip(operands, syms, cot_values):
            expr = sp.Integer(0) if c is None else env[id(c)]
            verdict, why = _verdict(expr - g * sp.diff(formula, s), [x, y, g])
            if verdict != "proved":
                return verdict, f"d{s}{'' if branch is None else f' (pred={branch})'}: {why}"
            notes.append(f"d{s} = {sp.simplify(expr)}" + ("" if branch is None else f" (pred={branch})"))
    return "proved", "; ".join(notes)


ELEMENTWISE_RULES = ("add", "sub", "mul", "div", "exp", "log", "select")
