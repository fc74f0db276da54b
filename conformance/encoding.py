"""Tensors in conformance files and in the ``exec:`` protocol: exact bit patterns, never decimals.

A tensor is ``{"dtype": "f32", "shape": [2, 2], "data": ["3f800000", "80000000", "7f800000", "nan"]}``:
``data`` lists the elements in row-major order, each as the hexadecimal digits of its bit pattern
(two's complement for integers), fixed width per dtype: ``bool`` 1 digit (``0``/``1``), ``i32``/``f32``
8 digits, ``i64``/``f64`` 16 digits, lower case.  A decimal round trip can therefore never blur a
value: ``-0.0``, subnormals, the exact float nearest to 0.1 and ``INT64_MIN`` are written as they are.

NaN is a class, not a value: an *expected* float element may be written ``"nan"``, which any NaN
matches (the spec leaves the sign and payload of a NaN result unspecified).  Inputs and answers
always carry concrete bits (an input NaN has a definite pattern; an answer's NaN is whatever the
implementation produced).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from mind.spec.dtypes import DType, parse_dtype

NAN_CLASS = "nan"

_UINT = {1: np.uint8, 4: np.uint32, 8: np.uint64}


class EncodingError(ValueError):
    """A tensor object that does not follow the encoding (the message says what is wrong)."""


def digits(dtype: DType) -> int:
    """Hex digits per element."""
    return 1 if dtype is DType.BOOL else dtype.bits // 4


def _dtype_of(obj: dict[str, Any]) -> DType:
    name = obj.get("dtype")
    dt = parse_dtype(name) if isinstance(name, str) else None
    if dt is None:
        raise EncodingError(f"unknown dtype {name!r}")
    return dt


def _shape_of(obj: dict[str, Any]) -> tuple[int, ...]:
    shape = obj.get("shape")
    if not isinstance(shape, list) or not all(type(d) is int and d >= 0 for d in shape):
        raise EncodingError(f"shape must be a list of non-negative integers, got {shape!r}")
    return tuple(shape)


def decode(obj: Any, *, allow_nan_class: bool = False) -> np.ndarray:
    """The array a tensor object denotes.  With ``allow_nan_class`` (expected values), ``"nan"``
    elements become the canonical quiet NaN, which the accuracy check matches with any NaN."""
    if not isinstance(obj, dict):
        raise EncodingError(f"a tensor is an object with dtype, shape and data, got {type(obj).__name__}")
    dt = _dtype_of(obj)
    shape = _shape_of(obj)
    data = obj.get("data")
    if not isinstance(data, list):
        raise EncodingError("data must be a list of hex strings")
    size = math.prod(shape)
    if len(data) != size:
        raise EncodingError(f"{len(data)} elements for shape {list(shape)} ({size} expected)")
    width = digits(dt)
    limit = 1 if dt is DType.BOOL else (1 << dt.bits) - 1
    bits = np.empty(size, dtype=np.uint64)
    for i, x in enumerate(data):
        if x == NAN_CLASS and allow_nan_class and dt.is_float:
            bits[i] = 0x7FC00000 if dt is DType.F32 else 0x7FF8000000000000
            continue
        if not isinstance(x, str) or len(x) != width or x != x.lower():
            raise EncodingError(f"element {i} is {x!r}, not {width} lower-case hex digits for {dt.value}")
        try:
            v = int(x, 16)
        except ValueError:
            raise EncodingError(f"element {i} is {x!r}, not hexadecimal") from None
        if v > limit:
            raise EncodingError(f"element {i} is {x!r}, out of range for {dt.value}")
        bits[i] = v
    nbytes = 1 if dt is DType.BOOL else dt.bits // 8
    raw = bits.astype(_UINT[nbytes])
    return raw.view(dt.numpy).reshape(shape).copy() if dt is not DType.BOOL else (raw != 0).reshape(shape)


def element_bits(arr: np.ndarray, dtype: DType) -> list[int]:
    """The bit pattern of every element (row-major) as Python ints."""
    a = np.ascontiguousarray(np.asarray(arr, dtype=dtype.numpy)).reshape(-1)
    if dtype is DType.BOOL:
        return [int(x) for x in a.astype(np.uint8)]
    return [int(x) for x in a.view(_UINT[dtype.bits // 8])]


def encode(arr: Any, dtype: DType | str | None = None, *, nan_class: bool = False) -> dict[str, Any]:
    """The tensor object of an array.  With ``nan_class`` (expected values), every NaN is written
    as the class ``"nan"``."""
    a = np.asarray(arr)
    dt = parse_dtype(dtype) if isinstance(dtype, str) else dtype
    if dt is None:
        from mind.spec.dtypes import from_numpy

        dt = from_numpy(a.dtype)
        if dt is None:
            raise EncodingError(f"unsupported array dtype {a.dtype}")
    if a.dtype != dt.numpy:
        raise EncodingError(f"array has dtype {a.dtype}, not {dt.value}")
    width = digits(dt)
    data = [format(b, f"0{width}x") for b in element_bits(a, dt)]
    if nan_class and dt.is_float:
        flat = a.reshape(-1)
        data = [NAN_CLASS if flat[i] != flat[i] else d for i, d in enumerate(data)]
    return {"dtype": dt.value, "shape": [int(d) for d in a.shape], "data": data}


def from_literal(values: Any, dtype: DType | str) -> np.ndarray:
    """An array from a nested Python literal, with ``"nan"``, ``"inf"``, ``"-inf"`` for the float
    specials (the form the spec's worked examples use)."""
    dt = parse_dtype(dtype) if isinstance(dtype, str) else dtype
    special = {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}

    def conv(x: Any) -> Any:
        if isinstance(x, list):
            return [conv(v) for v in x]
        if isinstance(x, str):
            if not dt.is_float or x not in special:
                raise EncodingError(f"{x!r} is not a {dt.value} value")
            return special[x]
        if dt is DType.BOOL and not isinstance(x, bool):
            raise EncodingError(f"{x!r} is not a bool value")
        if dt.is_int and (isinstance(x, bool) or not isinstance(x, int) or not dt.int_min <= x <= dt.int_max):
            raise EncodingError(f"{x!r} is not an {dt.value} value")
        return x

    with np.errstate(over="ignore"):
        return np.array(conv(values), dtype=dt.numpy)
