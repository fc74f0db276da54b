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
           "shares_memory", "check_array", "row_major_strides"]

# MLIR element type -> numpy dtype name
ELEMENT_TYPES: dict[str, str] = {"f32": "float32", "f64": "float64", "i32": "int32", "i64": "int64",
                                 "i8": "bool"}


def row_major_strides(shape: Sequence[int], itemsize: int = 1) -> tuple[int, ...]:
    """The strides of a dense row-major (C-contiguous) array of ``shape``, in units of ``itemsize``
    (elements when 1): what every kernel argument's descriptor holds, and what a buffer must have to
    be read as dense."""
    strides, step = [], itemsize
    for n in reversed(shape):
        strides.append(step)
        step *= n
    return tuple(reversed(strides))


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


def _data_field_offset() -> int | None:
    """Where an ``ndarray`` object keeps its data pointer, relative to the object's address, when
    that can be read directly: on CPython, whose ``id`` is the address, NumPy's ``PyArrayObject``
    starts with the object header and then ``char *data`` (the field its C API's ``PyArray_DATA``
    reads; part of NumPy's ABI).  Why: reading that word costs a fifth of ``a.ctypes.data`` and
    half of ``data_pointer``, and read-only arrays pay no more than writeable ones.  The offset is
    checked here on arrays of every kind a call may see (owned, offset views, read-only, empty,
    0-d); None, and ``data_pointer`` everywhere, if any disagrees with NumPy."""
    import sys

    if sys.implementation.name != "cpython":
        return None
    offset = object.__basicsize__
    base = np.arange(12, dtype=np.float64)
    read_only = base.reshape(3, 4)[1:]
    read_only.flags.writeable = False
    probes = [base, base[5:], read_only, np.empty((0, 3), np.int32), np.asarray(np.float32(1)), np.zeros((), np.bool_)]
    for a in probes:
        if ctypes.c_int64.from_address(id(a) + offset).value != a.ctypes.data:
            return None
    return offset


_ADDRESS_BITS = 47
"""User-space addresses of x86-64 Linux (4-level page tables): below 2**47."""


def _memory_words(offset: int | None) -> memoryview | None:
    """The process's memory as one flat view of int64 words, for reading an array's data pointer:
    ``words[(id(a) + offset) >> 3]``.  Why: indexing a memoryview makes only the int it returns,
    where ``ctypes.c_int64.from_address`` makes a ctypes object first (half the cost; per
    argument, the largest part of a small kernel's call).  The view is a ctypes array type laid
    over address 0 whose length covers the user address space; nothing is read but the words
    indexed, each the data field ``_data_field_offset`` found.  None (``from_address`` then) when
    that field is unknown or not word-aligned, or when a probe's address lies past the view."""
    if offset is None or offset % 8:
        return None
    words = memoryview((ctypes.c_int64 * (1 << (_ADDRESS_BITS - 3))).from_address(0)).cast("B").cast("q")
    probes = [np.arange(3.0), np.arange(4, dtype=np.int32)[1:], np.zeros((), np.bool_)]
    for a in probes:
        at = id(a) + offset
        if at % 8 or at >> 3 >= len(words) or words[at >> 3] != a.ctypes.data:
            return None
    return words


_DATA_FIELD = _data_field_offset()
_WORDS = _memory_words(_DATA_FIELD)
_I64 = ctypes.c_int64
_NDARRAY = np.ndarray


def _pointer(a: np.ndarray) -> int:
    """``a``'s data pointer through the fastest way this process has (``_WORDS``, the data field,
    ``data_pointer``); the binder's calls inline the first."""
    if _WORDS is not None:
        at = id(a) + _DATA_FIELD
        if at >> 3 < len(_WORDS):
            return _WORDS[at >> 3]
    if _DATA_FIELD is not None:
        return _I64.from_address(id(a) + _DATA_FIELD).value
    return data_pointer(a)


def shares_memory(out: np.ndarray, earlier: Sequence[Any]) -> bool:
    """The rule of ``out`` arrays: whether ``out`` may share a byte with one of ``earlier`` (the
    inputs and the results before it).  A kernel relies on it: its data pointers are ``noalias``."""
    return bool(out.size) and any(isinstance(a, np.ndarray) and a.size and np.may_share_memory(out, a)
                                  for a in earlier)


class ArgBinder:
    """A signature's argument checks and descriptors, prepared once per kernel.

    Shapes are static in a compiled kernel, so sizes and strides are fixed: every descriptor of a
    call is written once, into a *frame* (one ``int64`` block holding all the call's descriptors
    back to back, and the tuple of their addresses the entry point takes), and a call only checks
    each array with a few comparisons against the expected dtype (the same object NumPy gives an
    array of that dtype), shape and contiguity, writes its data pointer into the frame's two pointer
    fields and calls.  Frames are taken from a free list and given back after the call, so calls
    from several threads (the GIL is released while a kernel runs) never share one.  Anything the
    quick checks do not accept (a subclass, an equal but distinct dtype object, a wrong array) goes
    through ``check_array``, which raises the precise ``AbiError`` or accepts it."""

    __slots__ = ("name", "n_inputs", "n_outputs", "_specs", "_quick_in", "_quick_out", "_words", "_layout",
                 "_nbytes", "_frames")

    def __init__(self, sig: Signature) -> None:
        self.name = sig.name
        self.n_inputs = len(sig.inputs)
        self.n_outputs = len(sig.outputs)
        specs, quick, layout, words = [], [], [], 0
        nbytes: dict[int, int] = {}  # bytes of each argument, by where its descriptor starts
        for i, spec in enumerate(sig.inputs + sig.outputs):
            what = f"input {i}" if i < self.n_inputs else f"output {i - self.n_inputs}"
            rank = len(spec.shape)
            strides = row_major_strides(spec.shape)
            specs.append((spec, what))
            nbytes[words] = (strides[0] * spec.shape[0] if rank else 1) * np.dtype(spec.dtype).itemsize
            quick.append((np.dtype(spec.dtype), tuple(spec.shape), words))
            layout.append((words, (*spec.shape, *strides)))
            words += 3 + 2 * rank  # allocated, aligned, offset (0), sizes, strides: 8 bytes each
        self._specs = specs
        self._quick_in = tuple(quick[:self.n_inputs])
        self._quick_out = tuple(quick[self.n_inputs:])
        self._words = max(words, 1)
        self._layout = layout
        self._nbytes = nbytes
        self._frames: list[tuple[Any, tuple[int, ...]]] = []

    def _frame(self) -> tuple[Any, tuple[int, ...]]:
        """A new frame: the block with every size and stride written (as a view of int64 words,
        which a call writes faster than the ctypes array it views and keeps alive), and the
        descriptors' addresses."""
        block = (_I64 * self._words)()
        base = ctypes.addressof(block)
        for start, dims in self._layout:
            block[start + 3:start + 3 + len(dims)] = dims
        return memoryview(block).cast("B").cast("q"), tuple(base + 8 * start for start, _ in self._layout)

    def call(self, fn: Any, inputs: Sequence[Any], outputs: Sequence[Any], fresh_outputs: bool = False) -> bool:
        """Call ``fn`` (the kernel's C entry point) on ``inputs`` and ``outputs`` if every array
        passes the quick checks; True when it ran, False (nothing ran) when some argument needs the
        full checks (``call_checked``).  ``fresh_outputs``: the outputs were just allocated from the
        signature (exact dtype and shape, C-contiguous, writeable), so only their pointers are read;
        otherwise each output must also be writeable and share no byte with an input or an earlier
        output (the rule of ``out=`` arrays).

        Why it is written out as it is: this is most of a small kernel's call, and each attribute,
        call or tuple it saves is a noticeable part of it (``docs/backend-cpu.md``, Measurements)."""
        if len(inputs) != self.n_inputs or len(outputs) != self.n_outputs:
            return False
        frames = self._frames
        try:
            frame = frames.pop()
        except IndexError:
            frame = self._frame()
        block = frame[0]
        words, offset = _WORDS, _DATA_FIELD
        try:
            for a, (dtype, shape, at) in zip(inputs, self._quick_in):
                if type(a) is not _NDARRAY or a.dtype is not dtype or a.shape != shape or not a.flags.c_contiguous:
                    frames.append(frame)
                    return False
                block[at] = block[at + 1] = words[(id(a) + offset) >> 3] if words is not None else _pointer(a)
            for a, (dtype, shape, at) in zip(outputs, self._quick_out):
                if not fresh_outputs:
                    if type(a) is not _NDARRAY or a.dtype is not dtype or a.shape != shape:
                        frames.append(frame)
                        return False
                    flags = a.flags
                    if not (flags.c_contiguous and flags.writeable):
                        frames.append(frame)
                        return False
                block[at] = block[at + 1] = words[(id(a) + offset) >> 3] if words is not None else _pointer(a)
                if not fresh_outputs and self._overlaps(block, at):
                    frames.append(frame)
                    return False
        except IndexError:  # an array past the word view (``_memory_words``): the full checks' way
            frames.append(frame)
            return False
        fn(*frame[1])  # ctypes releases the GIL during the call
        frames.append(frame)  # (a frame lost to an exception is only made again)
        return True

    def _overlaps(self, block: Any, at: int) -> bool:
        """Whether the output whose descriptor starts at ``at`` shares bytes with an input or an
        earlier output of the frame ``block`` (all C-contiguous here: an interval each, as
        ``np.may_share_memory`` compares them)."""
        start = block[at]
        end = start + self._nbytes[at]
        for other, nbytes in self._nbytes.items():
            if other == at:
                return False
            if nbytes and start < end and block[other] < end and start < block[other] + nbytes:
                return True
        return False

    def call_checked(self, fn: Any, inputs: Sequence[Any], outputs: Sequence[Any]) -> None:
        """Call ``fn`` after the full checks of every argument (``check_array``; outputs must also be
        writeable and share no memory with an input or an earlier output): the precise ``AbiError``
        for the first that does not match."""
        if len(inputs) != self.n_inputs:
            raise AbiError(f"kernel '{self.name}' takes {self.n_inputs} inputs, got {len(inputs)}")
        if len(outputs) != self.n_outputs:
            raise AbiError(f"kernel '{self.name}' has {self.n_outputs} outputs, got {len(outputs)}")
        arrays = (*inputs, *outputs)
        for i, (a, (spec, what)) in enumerate(zip(arrays, self._specs)):
            check_array(a, spec, what)
            if i >= self.n_inputs:
                if not a.flags.writeable:
                    raise AbiError(f"{what}: array must be writeable")
                if shares_memory(a, arrays[:i]):  # the kernel's data pointers are ``noalias``
                    raise AbiError(f"{what}: array shares memory with an input or an earlier output")
        block, addresses = self._frame()
        for a, (at, _) in zip(arrays, self._layout):
            block[at] = block[at + 1] = data_pointer(a)
        fn(*addresses)  # ctypes releases the GIL during the call

    def run(self, fn: Any, inputs: Sequence[Any], outputs: Sequence[Any]) -> None:
        """``call``, and ``call_checked`` for what its quick checks do not accept."""
        if not self.call(fn, inputs, outputs):
            self.call_checked(fn, inputs, outputs)
