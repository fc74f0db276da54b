"""Locating the first op where an implementation departs from the reference.

Comparing only final results says *that* two implementations differ; this says *where*.  The
implementation runs a probe function: the same parameters and ops, returning every intermediate
value.  Then each op is re-evaluated by the reference *on the implementation's own operand values*
and compared with the implementation's result under that op's accuracy class (``spec/accuracy``).
Errors therefore never accumulate: the first op that fails its own bound is the culprit.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from mind.ir.core import Function
from mind.reference.accuracy import check_op
from mind.reference.interpreter import bind_arguments
from mind.reference.ops import OP_FUNCTIONS
from mind.spec.dims import evaluate

Runner = Callable[[Sequence[Any] | Mapping[str, Any]], list[np.ndarray]]


@dataclass
class Divergence:
    index: int  # position of the op in the function
    op: str
    value: str  # the result's SSA name
    detail: str

    def __str__(self) -> str:
        return f"first divergence at op #{self.index} `%{self.value} = {self.op}(...)`: {self.detail}"


def probe_function(fn: Function) -> Function:
    """``fn`` with every op result returned, in program order."""
    return Function(f"{fn.name}_probe", list(fn.params), list(fn.ops), [op.result for op in fn.ops],
                    list(fn.assumptions), fn.span)


def reference_result(op: Any, operands: Sequence[np.ndarray], env: Mapping[str, int]) -> tuple[dict[str, Any], np.ndarray]:
    """The op's attributes with symbolic dims evaluated under ``env``, and the reference's result
    of the op on ``operands`` (another implementation's own operand values)."""
    attrs = dict(op.attrs)
    for key in ("shape", "start", "stop"):
        if key in attrs:
            attrs[key] = tuple(evaluate(d, env) for d in attrs[key])
    with np.errstate(all="ignore"):
        return attrs, np.asarray(OP_FUNCTIONS[op.op](*operands, **attrs))


def first_divergence(fn: Function, args: Sequence[Any] | Mapping[str, Any],
                     compile_runner: Callable[[Function], Runner]) -> Divergence | None:
    """Run ``fn``'s probe through ``compile_runner`` and check each op against the reference."""
    arrays, env = bind_arguments(fn, args)
    if not fn.ops:
        return None
    observed = compile_runner(probe_function(fn))(list(arrays))
    values: dict[int, np.ndarray] = {id(p): a for p, a in zip(fn.params, arrays)}
    for i, (op, got) in enumerate(zip(fn.ops, observed)):
        operands = [values[id(v)] for v in op.operands]
        attrs, want = reference_result(op, operands, env)
        got = np.asarray(got)
        if got.shape != want.shape or got.dtype != want.dtype:
            return Divergence(i, op.op, op.result.name,
                              f"result is {got.dtype}{list(got.shape)}, the reference gives "
                              f"{want.dtype}{list(want.shape)}")
        mismatch = check_op(op.op, operands, attrs, got, want)
        if mismatch is not None:
            return Divergence(i, op.op, op.result.name, str(mismatch))
        values[id(op.result)] = got  # continue from the implementation's own value
    return None
