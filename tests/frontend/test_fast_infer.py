"""The spec rules' concrete fast paths (``OpDef.fast_infer``) agree with the spec rules: wherever a
shortcut gives a type it is the spec rule's type, and it declines whatever the spec rule rejects."""

from __future__ import annotations

import itertools

import pytest

from mind.compiler.frontend.values import SplatAttrs, np_scalar
from mind.spec.ops import OPS

FAST_INFER = {name: op.fast_infer for name, op in OPS.items() if op.fast_infer is not None}
from mind.spec.dims import DimExpr, Facts, SymArith
from mind.spec.dtypes import DType
from mind.spec.ops import OPS, ShapeContext, TensorType

_SHAPES = [(), (1,), (3,), (4,), (2, 3), (3, 4), (1, 4), (4, 1), (2, 1, 4), (3, 3),
           (DimExpr.symbol("B"), 3), (3, DimExpr.symbol("B"))]
_DTYPES = [DType.F32, DType.I32, DType.BOOL]


def _spec(op: str, types: list[TensorType]):
    try:
        return OPS[op].infer(ShapeContext(SymArith(Facts.empty())), types,
                             {"direction": "le"} if op == "compare" else {})
    except Exception as exc:  # a violation or an undecided constraint
        return type(exc).__name__


@pytest.mark.parametrize("op", sorted(FAST_INFER))
def test_fast_infer_matches_spec(op: str) -> None:
    arity = 3 if op == "select" else 2
    types = [TensorType(d, s) for d in _DTYPES for s in _SHAPES]
    fast = FAST_INFER[op]
    hits = 0
    for combo in itertools.product(types, repeat=arity):
        if arity == 3 and (combo[1].dtype is DType.BOOL and combo[0].dtype is not DType.BOOL):
            continue  # keep the product small: the predicate is what matters
        got = fast(list(combo))
        if got is not None:
            hits += 1
            assert got == _spec(op, list(combo)), combo
    assert hits


@pytest.mark.parametrize("dtype", list(DType))
@pytest.mark.parametrize("value", [0.0, -0.0, 1.0, 1.00000001, 1e-50, -2.5, 0, 7, -3, True, False])
def test_splat_scalar_matches_numpy(dtype: DType, value) -> None:
    try:
        want = np_scalar(value, dtype)[()]
    except Exception:
        return
    got = SplatAttrs(value, dtype, (2,), 2).scalar()
    assert type(got) is type(want) and repr(got) == repr(want)
