"""Tensor values in conformance JSON: ``{"dtype", "shape", "values"}``.

``values`` is a nested list in row-major order with the given shape.  Floats that JSON cannot hold
are the strings ``"nan"``, ``"inf"`` and ``"-inf"``; ``-0.0`` is written as the number ``-0.0`` (JSON
keeps the sign).  Bools are ``true``/``false``; integers are plain numbers.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from mind.spec.dtypes import DType, from_numpy, parse_dtype

_SPECIAL = {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}


def _decode_scalar(x: Any, dtype: DType) -> Any:
    if isinstance(x, str):
        if not dtype.is_float or x not in _SPECIAL:
            raise ValueError(f"{x!r} is not a {dtype.value} value")
        return _SPECIAL[x]
    if dtype is DType.BOOL:
        if not isinstance(x, bool):
            raise ValueError(f"{x!r} is not a bool value")
        return x
    if isinstance(x, bool):
        raise ValueError(f"{x!r} is not a {dtype.value} value")
    if dtype.is_int:
        if not isinstance(x, int) or not dtype.int_min <= x <= dtype.int_max:
            raise ValueError(f"{x!r} is not an {dtype.value} value")
        return x
    return float(x)


def _flatten(values: Any, out: list) -> None:
    if isinstance(values, list):
        for v in values:
            _flatten(v, out)
    else:
        out.append(values)


def _shape_of(values: Any) -> list[int]:
    if not isinstance(values, list):
        return []
    inner = [_shape_of(v) for v in values]
    if any(s != inner[0] for s in inner):
        raise ValueError("ragged nested list")
    return [len(values)] + (inner[0] if inner else [])


def decode(obj: dict[str, Any]) -> np.ndarray:
    """The NumPy array of a JSON tensor value (checks dtype, shape and element values)."""
    dtype = parse_dtype(obj["dtype"])
    if dtype is None:
        raise ValueError(f"unknown dtype {obj['dtype']!r}")
    shape = tuple(int(d) for d in obj["shape"])
    values = obj["values"]
    flat: list[Any] = []
    _flatten(values, flat)
    size = math.prod(shape)
    if len(flat) != size:
        raise ValueError(f"{len(flat)} values for shape {list(shape)}")
    if size and _shape_of(values) != list(shape):
        raise ValueError(f"nested values have shape {_shape_of(values)}, declared {list(shape)}")
    items = [_decode_scalar(x, dtype) for x in flat]
    with np.errstate(over="ignore"):
        return np.array(items, dtype=dtype.numpy).reshape(shape)


def _encode_scalar(x: Any, dtype: DType) -> Any:
    if dtype is DType.BOOL:
        return bool(x)
    if dtype.is_int:
        return int(x)
    f = float(x)
    if math.isnan(f):
        return "nan"
    if math.isinf(f):
        return "inf" if f > 0 else "-inf"
    return f


def _nest(arr: np.ndarray, dtype: DType) -> Any:
    if arr.ndim == 0:
        return _encode_scalar(arr[()], dtype)
    return [_nest(sub, dtype) for sub in arr]


def encode(arr: Any, dtype: DType | str | None = None) -> dict[str, Any]:
    """The JSON tensor value of an array (``dtype`` defaults to the array's own)."""
    a = np.asarray(arr)
    dt = parse_dtype(dtype) if isinstance(dtype, str) else dtype
    if dt is None:
        dt = from_numpy(a.dtype)
        if dt is None:
            raise ValueError(f"unsupported array dtype {a.dtype}")
    a = a.astype(dt.numpy)
    return {"dtype": dt.value, "shape": list(a.shape), "values": _nest(a, dt)}


def from_literal(values: Any, dtype: DType | str) -> np.ndarray:
    """An array from a nested Python literal with the special strings (as in the spec examples)."""
    dt = parse_dtype(dtype) if isinstance(dtype, str) else dtype
    shape = _shape_of(values)
    return decode({"dtype": dt.value, "shape": shape, "values": values})
