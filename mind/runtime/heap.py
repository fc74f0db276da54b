"""The process's cache of the large heap blocks compiled kernels free, for their next calls.

Why: a kernel's intermediates are ``memref.alloc``s that MLIR lowers to ``malloc``/``free`` inside
the kernel.  glibc gives a block of more than its mmap threshold back to the system when it is
freed (and trims the top of its heap), so the next call of the kernel gets fresh pages and pays
the page faults and zeroing of every intermediate again: most of a train step's time
(``docs/backend-cpu.md``, Measurements).  Setting glibc's thresholds would change the whole
process's allocator; this cache keeps only what kernels free.

How: a kernel's module calls ``__mind_alloc``/``__mind_free`` (LLVM IR in the module itself,
``compiler/backend/cpu/runtime.py``) instead of ``malloc``/``free``.  They put a 16-byte header
holding the block's capacity before each block; a freed block of ``min_block`` bytes or more goes
into one of ``SLOTS`` slots of the structure below (``limit`` bytes at most; when full, older
blocks are given back to ``free``), and an allocation takes the smallest cached block that fits
(at most twice the size asked).  Slots are taken and filled with atomic exchanges, so threads
calling kernels at once never share a block and never wait on a lock.  The kernel reads the
structure's address from its exported pointer ``SYMBOL``, which ``attach`` sets when the kernel
is loaded; a kernel that nobody attached (its pointer null) calls ``malloc``/``free`` as before.
One structure for the process: every kernel shares the same bound.

Memory: ``cached_bytes`` is what the cache holds; ``release`` gives it all back (the cpu
backend does so before its memory check, E6004, refuses a call), and a kernel whose ``malloc``
fails gives it back and tries once more.
"""

from __future__ import annotations

import ctypes
import os
import threading
from typing import Any, Callable

__all__ = ["SYMBOL", "DRAIN_SYMBOL", "SLOTS", "HEADER_BYTES", "PAGE_BYTES", "MIN_BLOCK", "LIMIT_WORD", "HELD_WORD",
           "MIN_WORD", "VICTIM_WORD", "SLOT_WORD", "attach", "attach_library", "cached_bytes", "release", "limit",
           "set_limit"]

SYMBOL = "__mind_heap"
"""The exported pointer of a kernel's module that ``attach`` sets to the structure's address."""
DRAIN_SYMBOL = "__mind_heap_drain"
"""The exported function of a kernel's module that frees every cached block (``release``)."""

SLOTS = 64
"""Cached blocks at most (a kernel's large intermediates: the CNN train step frees 21)."""
HEADER_BYTES = 16
"""Before each block: its capacity (keeps ``malloc``'s 16-byte alignment)."""
PAGE_BYTES = 4096
"""Cached blocks' capacities are multiples of this, so that sizes a few bytes apart share blocks."""
MIN_BLOCK = 1 << 18
"""Smaller blocks go straight to ``free``: glibc keeps them in its heap, mapped."""
MAX_LIMIT = 1 << 28
"""The cache holds at most this many bytes, or a sixteenth of the physical memory if less."""

# the structure, in 8-byte words: limit, held, min_block, victim (a counter choosing the slot to
# empty when the cache is full), then SLOTS block pointers, then SLOTS capacities (hints: a taker
# checks the block's own header after taking it)
LIMIT_WORD, HELD_WORD, MIN_WORD, VICTIM_WORD, SLOT_WORD = 0, 1, 2, 3, 4


class _Heap(ctypes.Structure):
    _fields_ = [("limit", ctypes.c_int64), ("held", ctypes.c_int64), ("min_block", ctypes.c_int64),
                ("victim", ctypes.c_uint64), ("slots", ctypes.c_void_p * SLOTS), ("hints", ctypes.c_int64 * SLOTS)]


def _physical_bytes() -> int | None:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None


def _new_heap() -> _Heap:
    """The structure, in memory that is never freed: kernels keep its address for the life of the
    process, daemon threads included, past the interpreter's teardown of this module."""
    libc = ctypes.CDLL(None)
    libc.calloc.restype = ctypes.c_void_p
    libc.calloc.argtypes = [ctypes.c_size_t, ctypes.c_size_t]
    address = libc.calloc(1, ctypes.sizeof(_Heap))
    if not address:
        raise MemoryError("cannot allocate the kernels' heap cache")
    heap = _Heap.from_address(address)
    physical = _physical_bytes()
    heap.limit = MAX_LIMIT if physical is None else min(MAX_LIMIT, physical // 16)
    heap.min_block = MIN_BLOCK
    return heap


_HEAP = _new_heap()
_DRAIN: list[tuple[Callable[[int], None], Any]] = []  # one kernel's drain function and its code's owner
_LOCK = threading.Lock()
_DRAIN_TYPE = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


def attach(pointer_address: int, drain_address: int, owner: Any) -> None:
    """Point the kernel whose ``SYMBOL`` lives at ``pointer_address`` (0: it has none) at the
    structure; ``drain_address``: its ``DRAIN_SYMBOL``, kept for ``release`` with ``owner``, the
    object that keeps its code loaded (any kernel's will do: the code is the same)."""
    if not pointer_address:
        return
    ctypes.c_void_p.from_address(pointer_address).value = ctypes.addressof(_HEAP)
    if drain_address and not _DRAIN:
        with _LOCK:
            if not _DRAIN:
                _DRAIN.append((_DRAIN_TYPE(drain_address), owner))


def attach_library(lib: ctypes.CDLL) -> None:
    """``attach`` the kernel of the loaded shared library ``lib`` (nothing when it allocates nothing)."""
    try:
        pointer = ctypes.addressof(ctypes.c_void_p.in_dll(lib, SYMBOL))
        drain = ctypes.cast(getattr(lib, DRAIN_SYMBOL), ctypes.c_void_p).value or 0
    except (ValueError, AttributeError):
        return
    attach(pointer, drain, lib)


def cached_bytes() -> int:
    """Bytes the cache holds now (blocks waiting for a kernel's next allocation)."""
    return int(_HEAP.held)


def limit() -> int:
    """The most bytes the cache holds."""
    return int(_HEAP.limit)


def set_limit(nbytes: int) -> int:
    """Let the cache hold at most ``nbytes`` from now on (0: none, every block goes to ``free``);
    returns the limit before.  What it holds beyond the new limit is given back at once."""
    before = int(_HEAP.limit)
    _HEAP.limit = max(0, int(nbytes))
    if cached_bytes() > _HEAP.limit:
        release()
    return before


def release() -> int:
    """Give every cached block back to ``free``; returns the bytes the cache held before."""
    held = cached_bytes()
    if held and _DRAIN:
        _DRAIN[0][0](ctypes.addressof(_HEAP))
    return held
