"""Output arrays of compiled kernels: large ones come from a pool of buffers that earlier results
gave back when they died.

Why: a fresh multi-megabyte array is fresh pages, and the kernel then pays the operating system's
page faults and zeroing on its first write, on every call (half of the fused chain's kernel time,
``docs/backend-cpu.md``).  An array returned to the caller is theirs; once it (and every
view of it) is gone, its buffer goes back to the pool and the next call of the same size writes into
memory that is already mapped.

Safety: a buffer is reused only when nothing but the pool refers to it (``sys.getrefcount``), so an
array the caller still holds, or a view of it, or its ``.base``, is never overwritten.  The pool is
bounded (``MAX_POOLED_BYTES`` in all, ``MAX_PER_SIZE`` buffers per size); small outputs, where there
is nothing to save, are plain ``np.empty``.
"""

from __future__ import annotations

import sys
import threading
import weakref
from functools import partial
from typing import Callable, Sequence

import numpy as np

__all__ = ["new_output", "output_factory", "results_factory", "MIN_POOLED_BYTES", "MAX_POOLED_BYTES", "MAX_PER_SIZE",
           "pooled_bytes"]

MIN_POOLED_BYTES = 1 << 20
MAX_POOLED_BYTES = 1 << 28
MAX_PER_SIZE = 2
_ALIGN = 64  # a cache line: what np.empty gives large arrays, and the widest vector

_free: dict[int, list[np.ndarray]] = {}
_held = [0]
_lock = threading.RLock()  # re-entrant: a finalizer may run (and give back) while a take holds it


def pooled_bytes() -> int:
    """Bytes held by the pool now (buffers waiting for reuse)."""
    return _held[0]


def _give_back(raw: np.ndarray) -> None:
    with _lock:
        bucket = _free.setdefault(raw.nbytes, [])
        if len(bucket) < MAX_PER_SIZE and _held[0] + raw.nbytes <= MAX_POOLED_BYTES:
            bucket.append(raw)
            _held[0] += raw.nbytes


def _take(nbytes: int) -> np.ndarray | None:
    with _lock:
        bucket = _free.get(nbytes)
        while bucket:
            raw = bucket.pop()
            _held[0] -= raw.nbytes
            # the bucket's reference is gone: ours and getrefcount's argument are the only ones left
            if sys.getrefcount(raw) <= 2:
                return raw
    return None


def new_output(shape: Sequence[int], dtype: np.dtype) -> np.ndarray:
    """An uninitialized C-contiguous array (the kernel writes every element), from the pool when
    it is large."""
    dtype = np.dtype(dtype)
    nbytes = dtype.itemsize
    for d in shape:
        nbytes *= d
    if nbytes < MIN_POOLED_BYTES:
        return np.empty(shape, dtype=dtype)
    raw = _take(nbytes + _ALIGN)
    if raw is None:
        raw = np.empty(nbytes + _ALIGN, dtype=np.uint8)
    offset = -raw.ctypes.data % _ALIGN
    arr = raw[offset:offset + nbytes].view(dtype).reshape(shape)
    weakref.finalize(arr, _give_back, raw).atexit = False
    return arr


def output_factory(shape: Sequence[int], dtype: np.dtype) -> Callable[[], np.ndarray]:
    """A function of no arguments returning what ``new_output(shape, dtype)`` returns, with the
    decision between a plain array and the pool taken once: a kernel's result shapes are fixed, and
    a small result is then one ``np.empty`` per call."""
    dtype = np.dtype(dtype)
    shape = tuple(int(d) for d in shape)
    nbytes = dtype.itemsize
    for d in shape:
        nbytes *= d
    if nbytes < MIN_POOLED_BYTES:
        return partial(np.empty, shape, dtype)
    return partial(new_output, shape, dtype)


def results_factory(specs: Sequence[tuple[Sequence[int], np.dtype]]) -> Callable[[], list[np.ndarray]]:
    """A function of no arguments returning a new list of one ``output_factory`` array per
    ``(shape, dtype)`` of ``specs``: one call's results.  A single result, the common case, is
    made without a loop."""
    makers = tuple(output_factory(shape, dtype) for shape, dtype in specs)
    if len(makers) == 1:
        make = makers[0]
        return lambda: [make()]
    return lambda: [make() for make in makers]
