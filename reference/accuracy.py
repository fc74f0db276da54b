"""Applying the spec's accuracy classes to one op on concrete arrays.

``mind.spec.accuracy`` states the classes and their bounds; a ``sum``/``dot`` bound also needs, per
result element, the number of accumulated terms ``n`` and ``abs_sum`` (Σ|x_i| or Σ|a_k·b_k|).
Those are computed here, on arrays, by the reference's own op applied to the absolute values of
the operands in f64: its float contractions sum in one fixed order (no BLAS), so the bound of a
given input is the same on every machine, and its f64 rounding is far below the bound.
"""

from __future__ import annotations

import math
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from mind.reference.ops import OP_FUNCTIONS
from mind.spec.accuracy import Mismatch, as_dtype, check, get
from mind.spec.dtypes import DType, from_numpy
from mind.spec.ops import OPS

Shapes = Sequence[tuple[int, ...]]

#: ``n`` for each op of a ``sum``-kind accuracy class, from its operand shapes and attributes: the
#: number of terms that one result element accumulates (``tests/reference/test_accuracy.py``
#: checks that the keys are exactly those ops).
TERMS: dict[str, Callable[[Shapes, Mapping[str, Any]], int]] = {
    "reduce_sum": lambda shapes, attrs: math.prod(shapes[0][a] for a in attrs["axes"]),
    "matmul": lambda shapes, attrs: shapes[0][-1],
    "conv2d": lambda shapes, attrs: math.prod(shapes[1][:3]),  # KH · KW · C
}


def accumulation(op: str, operands: Sequence[Any], attrs: Mapping[str, Any],
                 finite_only: bool = False) -> tuple[int, Any] | None:
    """``(n, abs_sum)`` for an op of class ``sum``/``dot`` on concrete operands, else None;
    ``abs_sum`` has the result's shape.  ``finite_only``: Σ| · | over the finite terms only (the
    ``S`` of the spec's overflow rule): a non-finite operand element counts as 0, so every term it
    is a factor of drops out, and a padding zero times an infinite filter element too."""
    if get(OPS[op].accuracy).kind != "sum":
        return None
    absolute = [np.abs(np.asarray(x, dtype=np.float64)) for x in operands]
    if finite_only:
        absolute = [np.where(np.isfinite(x), x, 0.0) for x in absolute]
    with np.errstate(all="ignore"):
        abs_sum = OP_FUNCTIONS[op](*absolute, **attrs)
    return int(TERMS[op]([x.shape for x in absolute], attrs)), abs_sum


def check_op(op: str, operands: Sequence[Any], attrs: Mapping[str, Any], actual: Any, expected: Any,
             dtype: DType | str | None = None) -> Mismatch | None:
    """``mind.spec.accuracy.check`` with the class, ``n`` and ``abs_sum`` of ``op`` applied to
    ``operands`` (``dtype`` defaults to that of ``expected``)."""
    dt = from_numpy(np.asarray(expected).dtype) if dtype is None else as_dtype(dtype)
    acc = OPS[op].accuracy
    extra = accumulation(op, operands, attrs) if dt.is_float else None
    if extra is None:
        return check(acc, dt, actual, expected)
    _n, finite_abs_sum = accumulation(op, operands, attrs, finite_only=True)  # type: ignore[misc]
    return check(acc, dt, actual, expected, n=extra[0], abs_sum=extra[1], finite_abs_sum=finite_abs_sum)
