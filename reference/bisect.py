"""Locating the first op where an implementation departs from the reference.

Comparing only final results says *that* two implementations differ; this says *where*.  Given the
value the implementation computed for every op result (a probe run: ``mind.bisect``), each op is
re-evaluated by the reference *on the implementation's own operand values* and compared with the
implementation's result under that op's accuracy class (``spec/accuracy``).  Errors therefore
never accumulate: the first op that fails its own bound is the culprit.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np

from mind.reference.accuracy import check_op
from mind.reference.ops import OP_FUNCTIONS
from mind.reference.program import FunctionLike, OperationLike
from mind.spec.dims import evaluate

__all__ = ["Divergence", "divergence", "reference_result"]


@dataclass
class Divergence:
    index: int  # position of the op in the function
    op: str
    value: str  # the result's SSA name
    detail: str

    def __str__(self) -> str:
        return f"first divergence at op #{self.index} `%{self.value} = {self.op}(...)`: {self.detail}"


def reference_result(op: OperationLike, operands: Sequence[np.ndarray],
                     env: Mapping[str, int]) -> tuple[dict[str, Any], np.ndarray]:
    """The op's attributes with symbolic dims evaluated under ``env``, and the reference's result
    of the op on ``operands`` (another implementation's own operand values)."""
    attrs = dict(op.attrs)
    for key in ("shape", "start", "stop"):
        if key in attrs:
            attrs[key] = tuple(evaluate(d, env) for d in attrs[key])
    with np.errstate(all="ignore"):
        return attrs, np.asarray(OP_FUNCTIONS[op.op](*operands, **attrs))


def divergence(fn: FunctionLike, arrays: Sequence[np.ndarray], env: Mapping[str, int],
               observed: Sequence[np.ndarray]) -> Divergence | None:
    """The first op of ``fn`` whose value in ``observed`` (the implementation's, one per op in
    program order, on the bound ``arrays`` with symbol values ``env``) leaves the op's accuracy
    bound around the reference applied to the implementation's own operands; None if none does."""
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
