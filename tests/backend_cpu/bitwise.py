"""Bitwise comparison of float results, shared by the tests that ask for the same bits (a rewrite
against the code it replaces, a kernel against the spec's rule)."""

from __future__ import annotations

import numpy as np


def same_bits(got: np.ndarray, want: np.ndarray) -> np.ndarray:
    """Elementwise: the same bit pattern (so +0 is not -0), or both NaN (of any payload)."""
    as_int = np.dtype(f"u{got.dtype.itemsize}")
    return (got.view(as_int) == want.view(as_int)) | (np.isnan(got) & np.isnan(want))
