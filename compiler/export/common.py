"""What every exporter shares: concrete shapes, and the coded error for what a target cannot express.

Exporters read Core IR (``mind.ir``) and write another system's format.  They need concrete shapes:
:func:`specialize` binds a function's symbolic dims to values (what the arguments of one call
give), re-inferring every type through the spec's shape rules.
"""

from __future__ import annotations

from typing import Any, Mapping

from mind.diagnostics import MindError, error
from mind.ir.core import Function, Value


def cannot_express(target: str, op: Any, label: str, why: str) -> MindError:
    """E6003 naming the op, the spec label the target cannot express, and why."""
    where = f" (%{op.result.name})" if hasattr(op, "result") else ""
    return error("E6003", f"{target} cannot express `{op.op if hasattr(op, 'op') else op}`{where}: {why}",
                 label=label, help=f"this function cannot be exported to {target}; the op's spec is "
                                   f"`docs/spec/ops/{op.op if hasattr(op, 'op') else op}.md`")


def require_concrete(fn: Function, target: str) -> None:
    for p in fn.params:
        if not all(isinstance(d, int) for d in p.type.shape):
            raise error("E6003", f"{target} export needs concrete shapes; %{p.name} has type {p.type}",
                        help="bind the symbols first (e.g. `mind export --bind N=4`)")


def specialize(fn: Function, env: Mapping[str, int]) -> Function:
    """``fn`` with every symbol of ``env`` replaced by its value (types re-inferred); E6009 when the
    values violate an assumption or a constraint."""
    from mind.spec.dims import evaluate
    from mind.spec.ops import ConstraintUndecided, ConstraintViolation

    if not fn.symbols():
        return fn
    for a in fn.assumptions:
        lhs, rhs = evaluate(a.lhs, env), evaluate(a.rhs, env)
        if not {">=": lhs >= rhs, "<=": lhs <= rhs, "==": lhs == rhs, ">": lhs > rhs, "<": lhs < rhs}[a.rel]:
            raise error("E6009", f"the bound values violate the assumption `{a}` of @{fn.name}")
    try:
        return _specialize(fn, env)
    except (ConstraintViolation, ConstraintUndecided) as exc:
        raise error("E6009", f"@{fn.name} with {env}: {exc.detail}") from None


def _specialize(fn: Function, env: Mapping[str, int]) -> Function:
    from mind.ir.builder import FunctionBuilder
    from mind.spec.dims import evaluate, substitute
    from mind.spec.ops import TensorType

    b = FunctionBuilder(fn.name)
    values: dict[int, Value] = {}
    for p in fn.params:
        shape = tuple(int(evaluate(d, env)) for d in p.type.shape)
        values[id(p)] = b.param(p.name, TensorType(p.type.dtype, shape))
    for op in fn.ops:
        attrs = dict(op.attrs)
        for key in ("shape", "start", "stop"):
            if key in attrs:
                attrs[key] = tuple(int(substitute(d, env)) for d in attrs[key])
        values[id(op.result)] = b.emit(op.op, *[values[id(v)] for v in op.operands], name=op.result.name, **attrs)
    return b.finish([values[id(v)] for v in fn.results])


def bind_from_arrays(fn: Function, arrays: Mapping[str, Any]) -> dict[str, int]:
    """The symbol values the arrays' shapes give (checked by the reference's argument binder)."""
    from mind.calling import bind_arguments

    _arrays, env = bind_arguments(fn, dict(arrays))
    return env


def slice_windows(shape: tuple[int, ...], start: Any, step: Any, out: tuple[int, ...]
                  ) -> tuple[list[int], list[int], list[int], list[int]]:
    """A MIND slice as reverse(axes) then a positive-stride window: (reversed axes, lo, hi, stride)."""
    rev = [i for i, s in enumerate(step) if s < 0]
    lo, hi, st = [], [], []
    for n, b, s, m in zip(shape, start, step, out):
        if m == 0:
            lo.append(0), hi.append(0), st.append(1)
            continue
        b0 = b if s > 0 else n - 1 - b
        lo.append(b0), hi.append(b0 + (m - 1) * abs(s) + 1), st.append(abs(s))
    return rev, lo, hi, st
