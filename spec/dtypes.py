"""Element types of Core IR: bool, i32, i64, f32, f64.

The NumPy mapping is lazy so that ``import mind`` stays cheap; everything that needs a dtype's
facts (bit width, range, machine epsilon) asks here instead of keeping its own table.
"""

from __future__ import annotations

import enum
from typing import Any


class DType(enum.Enum):
    BOOL = "bool"
    I32 = "i32"
    I64 = "i64"
    F32 = "f32"
    F64 = "f64"

    def __str__(self) -> str:
        return self.value

    # ``is_float``, ``is_int``, ``is_numeric``, ``bits``, ``int_min`` and ``int_max`` are plain
    # attributes of each member (set below the class), not properties: shape rules and the
    # frontend read them for every op.
    is_float: bool
    is_int: bool
    is_numeric: bool
    bits: int
    int_min: int
    int_max: int

    # Members are singletons compared by identity: hash them by identity too (C speed), instead of
    # ``Enum.__hash__`` (a Python-level ``hash(self._name_)``).  Dicts keyed by dtype are hot.
    __hash__ = object.__hash__

    @property
    def numpy(self) -> Any:
        import numpy as np

        return np.dtype({"bool": np.bool_, "i32": np.int32, "i64": np.int64,
                         "f32": np.float32, "f64": np.float64}[self.value])

    @property
    def mantissa_bits(self) -> int:
        """Significand precision p (including the implicit bit): unit roundoff is 2**-p."""
        return {"f32": 24, "f64": 53}[self.value]

    @property
    def unit_roundoff(self) -> float:
        return 2.0 ** -self.mantissa_bits

    @property
    def add_identity(self) -> float | int | bool:
        """The value e with ``x + e == x`` for every x, bit for bit: -0.0 for floats (+0.0 is not:
        -0.0 + +0.0 is +0.0), 0 for integers; for bool, False (the identity of ``or``).  What a
        concatenation pads with (``frontend.builtins.concat_tensors``), so that adding its pads is
        the join (``backend.linalg.joins``)."""
        return -0.0 if self.is_float else (False if self is DType.BOOL else 0)


for _d in DType:
    _d.is_float = _d in (DType.F32, DType.F64)
    _d.is_int = _d in (DType.I32, DType.I64)
    _d.is_numeric = _d is not DType.BOOL
    _d.bits = {"bool": 8, "i32": 32, "i64": 64, "f32": 32, "f64": 64}[_d.value]
    _d.int_min = -(1 << (_d.bits - 1))
    _d.int_max = (1 << (_d.bits - 1)) - 1
del _d

#: Membership sets for hot paths (``dt in FLOAT``).
FLOAT: frozenset[DType] = frozenset({DType.F32, DType.F64})
INT: frozenset[DType] = frozenset({DType.I32, DType.I64})
NUMERIC: frozenset[DType] = frozenset({DType.I32, DType.I64, DType.F32, DType.F64})

ALL_DTYPES: tuple[DType, ...] = tuple(DType)
FLOAT_DTYPES: tuple[DType, ...] = (DType.F32, DType.F64)
INT_DTYPES: tuple[DType, ...] = (DType.I32, DType.I64)
NUMERIC_DTYPES: tuple[DType, ...] = INT_DTYPES + FLOAT_DTYPES

_BY_NAME = {d.value: d for d in DType}


def parse_dtype(name: str) -> DType | None:
    """The dtype named ``name`` ("f32", ...), or None."""
    return _BY_NAME.get(name)


_BY_NUMPY: dict[Any, DType] = {}


def from_numpy(np_dtype: Any) -> DType | None:
    """The dtype of a NumPy dtype (or array dtype), or None if Core IR has no such dtype."""
    hit = _BY_NUMPY.get(np_dtype)
    if hit is not None:
        return hit
    import numpy as np

    dt = np.dtype(np_dtype)
    for d in DType:
        if d.numpy == dt:
            try:
                _BY_NUMPY[np_dtype] = d
            except TypeError:
                pass
            return d
    return None
