"""Facts of the element types that several layers read (``spec.dtypes``)."""

from __future__ import annotations

import numpy as np
import pytest

from mind.spec.dtypes import ALL_DTYPES, DType


@pytest.mark.parametrize("dt", [d for d in ALL_DTYPES if d.is_numeric], ids=str)
def test_add_identity_adds_nothing_bit_for_bit(dt):
    """``x + add_identity`` is ``x`` for every value, signed zeros, infinities and NaNs included
    (what lets a concatenation's added pads be one tensor of copies, ``backend.linalg.joins``);
    +0.0 would not do for floats: -0.0 + +0.0 is +0.0."""
    e = np.asarray(dt.add_identity, dt.numpy)
    if dt.is_float:
        x = np.array([0.0, -0.0, 1.5, -2.25, np.inf, -np.inf, np.nan, np.finfo(dt.numpy).tiny / 4], dt.numpy)
        assert (np.asarray(-0.0, dt.numpy) + np.asarray(0.0, dt.numpy)).tobytes() != np.asarray(-0.0, dt.numpy).tobytes()
    else:
        x = np.array([0, 1, -1, dt.int_min, dt.int_max], dt.numpy)
    assert (x + e).tobytes() == x.tobytes()


def test_add_identity_of_bool_is_the_identity_of_or():
    x = np.array([False, True])
    assert ((x | np.asarray(DType.BOOL.add_identity)) == x).all()
