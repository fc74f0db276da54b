"""Calling convention between numpy and compiled cpu kernels: ranked memref descriptors over numpy buffers.

It lives in the runtime because both the cpu backend (its warm path) and a loaded ``mind build``
artifact (``mind.runtime``) call kernels through it, and the runtime imports nothing of the compiler.

A kernel is an MLIR ``func.func`` whose tensor arguments are the inputs and whose memref arguments
are the outputs (out-parameters), compiled with ``llvm.emit_c_interface``.  Its C entry point
``_mlir_ciface_<name>`` takes one pointer per argument, each to a ranked memref descriptor
``{T* allocated; T* aligned; i64 offset; i64 sizes[R]; i64 strides[R]}`` (rank 0: no sizes/strides).

Element types at the boundary: f32, f64, i32, i64, and numpy ``bool`` as **i8** (one byte holding
0 or 1).  ``i1`` is refused at the boundary: a vectorized store of ``vector<Nxi1>`` writes packed
bits, which is not numpy's one-byte bool layout.  A lowering converts with ``arith.extui``/
``arith.trunci`` (or ``arith.cmpi ne, 0``) inside the kernel.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

__all__ = ["ArgSpec", "Signature", "ELEMENT_TYPES", "descriptor_type", "ArgBinder", "data_pointer", "AbiError",
           "check_array"]

# MLIR element type -> numpy dtype name
ELEMENT_TYPES: dict[str, str] = {"f32": "float32", "f64": "float64", "i32": "int32", "i64": "int64",
                                 "i8": "bool"}


class AbiError(ValueError):
    """An argument does not match the kernel's signature (dtype, shape or layout)."""


@dataclass(frozen=True)
class ArgSpec:
    """dtype (numpy name) and static shape of one kernel argument."""

    dtype: str
    shape: tuple[int, ...]

    def to_json(self) -> dict[str, Any]:
        return {"dtype": self.dtype, "shape": list(self.shape)}

    @staticmethod
    def from_json(d: dict[str, Any]) -> "ArgSpec":
        return ArgSpec(str(d["dtype"]), tuple(int(s) for s in d["shape"]))


@dataclass(frozen=True)
class Signature:
    """Inputs (tensor arguments) then outputs (memref out-parameters), in argument order."""

    name: str
    inputs: tuple[ArgSpec, ...]
    outputs: tuple[ArgSpec, ...]

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "inputs": [a.to_json() for a in self.inputs],
                "outputs": [a.to_json() for a in self.outputs]}

    @staticmethod
    def from_json(d: dict[str, Any]) -> "Signature":
        return Signature(str(d["name"]), tuple(ArgSpec.from_json(a) for a in d["inputs"]),
                         tuple(ArgSpec.from_json(a) for a in d["outputs"]))


_DESCRIPTORS: dict[int, type[ctypes.Structure]] = {}
"""The ctypes struct of each rank's memref descriptor, made once per process (a C layout: a fact)."""


def descriptor_type(rank: int) -> type[ctypes.Structure]:
    """The ctypes struct of a ranked memref descriptor (element pointers typed as void*)."""
    t = _DESCRIPTORS.get(rank)
    if t is None:
        fields: list[tuple[str, Any]] = [("allocated", ctypes.c_void_p), ("aligned", ctypes.c_void_p),
                                         ("offset", ctypes.c_int64)]
        if rank > 0:
            fields += [("sizes", ctypes.c_int64 * rank), ("strides", ctypes.c_int64 * rank)]
        t = type(f"MemRefDescriptor{rank}", (ctypes.Structure,), {"_fields_": fields})
        _DESCRIPTORS[rank] = t
    return t


def check_array(a: Any, spec: ArgSpec, what: str) -> np.ndarray:
    """Refuse (never copy) arrays that do not match: zero-copy needs C-contiguous exact dtype."""
    if not isinstance(a, np.ndarray):
        raise AbiError(f"{what}: expected a numpy array, got {type(a).__name__}")
    if a.dtype != np.dtype(spec.dtype):
        raise AbiError(f"{what}: expected dtype {spec.dtype}, got {a.dtype}")
    if a.shape != spec.shape:
        raise AbiError(f"{what}: expected shape {spec.shape}, got {a.shape}")
    if not a.flags.c_contiguous:
        raise AbiError(f"{what}: array must be C-contiguous (use np.ascontiguousarray)")
    return a


_BYTE = ctypes.c_char


def data_pointer(a: np.ndarray) -> int:
    """The address of ``a``'s first element.

    Why not always ``a.ctypes.data``: it builds a helper object per array, most of a scalar kernel's
    call overhead; a ctypes view of a writeable, non-empty buffer costs half as much."""
    if a.flags.writeable and a.nbytes:
        return ctypes.addressof(_BYTE.from_buffer(a))
    return a.ctypes.data


class ArgBinder:
    """A signature's argument checks and descriptor layouts, prepared once per kernel.

    Shapes are static in a compiled kernel, so sizes and strides are fixed: a call only checks each
    array and fills in its data pointer."""

    __slots__ = ("name", "n_inputs", "_args")

    def __init__(self, sig: Signature) -> None:
        self.name = sig.name
        self.n_inputs = len(sig.inputs)
        args = []
        for i, spec in enumerate(sig.inputs + sig.outputs):
            what = f"input {i}" if i < len(sig.inputs) else f"output {i - len(sig.inputs)}"
            rank = len(spec.shape)
            layout: tuple[Any, ...] = ()
            if rank:
                strides, step = [0] * rank, 1
                for k in range(rank - 1, -1, -1):
                    strides[k] = step
                    step *= spec.shape[k]
                layout = ((ctypes.c_int64 * rank)(*spec.shape), (ctypes.c_int64 * rank)(*strides))
            args.append((spec, np.dtype(spec.dtype), tuple(spec.shape), descriptor_type(rank), layout, what))
        self._args = args

    def descriptors(self, inputs: Sequence[Any], outputs: Sequence[np.ndarray]) -> list[Any]:
        """Descriptors for all arguments, in order; the caller keeps them alive during the call."""
        if len(inputs) != self.n_inputs:
            raise AbiError(f"kernel '{self.name}' takes {self.n_inputs} inputs, got {len(inputs)}")
        descs = []
        for a, (spec, dtype, shape, struct, layout, what) in zip((*inputs, *outputs), self._args):
            if type(a) is not np.ndarray or a.dtype != dtype or a.shape != shape or not a.flags.c_contiguous:
                check_array(a, spec, what)  # raises the precise AbiError
            p = data_pointer(a)
            descs.append(struct(p, p, 0, *layout))
        return descs

