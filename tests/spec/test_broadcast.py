"""``broadcast_fast`` (no conditions built) agrees with the general broadcasting rule wherever it
gives a shape, for concrete and symbolic extents, and declines every case the rule rejects or cannot
decide (which then reports with its label)."""

from __future__ import annotations

import itertools

from mind.spec.dims import DimExpr, Facts, SymArith
from mind.spec.ops import ShapeContext
from mind.spec.ops.common import broadcast, broadcast_fast, broadcast_general

B = DimExpr.symbol("B")
N = DimExpr.symbol("N")
_EXTENTS = [1, 3, 4, B, N, B + 1, 2 * B]
_SHAPES = [()] + [(d,) for d in _EXTENTS] + [(a, b) for a in (1, 3, B) for b in _EXTENTS] + [(2, B, 1), (1, 1, N)]


def _general(*shapes):
    try:
        return broadcast_general(ShapeContext(SymArith(Facts.empty())), "C3", *shapes)
    except Exception as exc:  # a violation or an undecided constraint
        return type(exc).__name__


def test_fast_path_matches_general_rule() -> None:
    hits = declined = 0
    for a, b in itertools.product(_SHAPES, repeat=2):
        fast = broadcast_fast((a, b))
        if fast is None:
            declined += 1
            continue
        hits += 1
        assert fast == _general(a, b), (a, b)
    assert hits > 50 and declined > 20


def test_fast_path_takes_symbolic_cases() -> None:
    # the cases that made symbolic programs (a batch dim B) slow: all decided structurally
    assert broadcast_fast(((B, 10), (B, 10))) == (B, 10)
    assert broadcast_fast(((B, 10), (10,))) == (B, 10)
    assert broadcast_fast(((B, 1), (B, 10))) == (B, 10)
    assert broadcast_fast(((1, 10), (B, 1))) == (B, 10)
    assert broadcast_fast(((B, 1), (B, 10), (1, 10))) == (B, 10)


def test_fast_path_declines_what_it_cannot_decide() -> None:
    assert broadcast_fast(((B,), (3,))) is None      # undecided: B == 3?
    assert broadcast_fast(((B,), (N,))) is None      # undecided: B == N?
    assert broadcast_fast(((3,), (4,))) is None      # a violation: the general rule reports C3
    assert broadcast_fast(((object(),), (1,))) is None  # not a dim of ours (a Z3 term in the verifier)
    assert _general((3,), (4,)) == "ConstraintViolation"


def test_three_way_and_general_agree() -> None:
    for shapes in [((B, 1), (1, 10), (B, 10)), ((1,), (B, 1), (2, B, 1)), ((3, 1), (B,), (1,))]:
        fast = broadcast_fast(shapes)
        assert fast is not None and fast == _general(*shapes)
        assert broadcast(ShapeContext(SymArith(Facts.empty())), "C3", *shapes) == fast


def test_any_extent_against_a_literal_one_is_that_extent():
    # ite(a == 1, 1, a) is a whether or not a is 1: decided, not "undecided" (the spec's text)
    assert _general((2 * B,), ()) == (2 * B,)
    assert _general((1, B + 1), (N, 1)) == (N, B + 1)
