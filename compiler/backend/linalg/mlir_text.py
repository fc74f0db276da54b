"""Named pieces of MLIR text: types, affine maps and exact literals.

Why text: writing MLIR as text is fast and deterministic (it depends only on the program and its
shapes: no dict or set order, no object ids), and MLIR parses it once.  These helpers give each piece
one spelling, so the op lowerings read as what they build.
"""

from __future__ import annotations

import struct
from typing import Sequence

from mind.spec.dtypes import DType

__all__ = ["ELEM", "tensor_type", "memref_type", "affine_map", "identity_map", "broadcast_map", "float_bits",
           "is_float", "zero"]

ELEM: dict[DType, str] = {DType.BOOL: "i8", DType.I32: "i32", DType.I64: "i64", DType.F32: "f32", DType.F64: "f64"}
"""Core IR dtype -> MLIR element type inside kernels.  bool is one byte holding 0 or 1, never ``i1``:
a vectorized store of ``vector<Nxi1>`` packs bits, which would match neither a scalar reload nor
NumPy's layout."""


def tensor_type(shape: Sequence[int], elem: str) -> str:
    return f"tensor<{''.join(f'{s}x' for s in shape)}{elem}>"


def memref_type(shape: Sequence[int], elem: str) -> str:
    return f"memref<{''.join(f'{s}x' for s in shape)}{elem}>"


def _dims(n: int) -> str:
    return ", ".join(f"d{i}" for i in range(n))


def affine_map(rank: int, exprs: Sequence[str]) -> str:
    """``affine_map<(d0, ..) -> (exprs)>`` over ``rank`` loops."""
    return f"affine_map<({_dims(rank)}) -> ({', '.join(exprs)})>"


def identity_map(rank: int) -> str:
    return affine_map(rank, [f"d{i}" for i in range(rank)])


def broadcast_map(src: Sequence[int], out: Sequence[int]) -> str:
    """The map reading an operand of shape ``src`` broadcast to ``out`` (NumPy's rule): a missing
    leading axis is dropped, a size-1 axis against a larger result reads index 0."""
    r, rank = len(src), len(out)
    exprs = []
    for j, s in enumerate(src):
        k = rank - r + j
        exprs.append("0" if (s == 1 and out[k] != 1) else f"d{k}")
    return affine_map(rank, exprs)


def float_bits(v: float, elem: str) -> str:
    """The exact bit pattern of ``v`` in ``elem`` (``0x7FC00000``): no decimal rounding in the text."""
    if elem == "f32":
        return "0x%08X" % struct.unpack("<I", struct.pack("<f", v))[0]
    return "0x%016X" % struct.unpack("<Q", struct.pack("<d", v))[0]


def is_float(elem: str) -> bool:
    return elem in ("f32", "f64")


def zero(elem: str) -> str:
    """The literal +0 of ``elem``."""
    return float_bits(0.0, elem) if is_float(elem) else "0"
