"""Will a run fit in memory?  Checked before anything is allocated, so that a program too large
for the machine is the spec's E6004 at the op that needs the memory, not a crash.

Why before: the cpu backend's kernels do not check their allocations (a failed ``malloc`` is a
segmentation fault), and on Linux a large NumPy allocation may succeed and only fail when its pages
are touched, when the kernel's OOM killer ends the process.  Both leave a user without a diagnostic.

The estimate (``peak_bytes``): the peak, in program order, of the bytes held by the values a
backend materializes, where a value is held from the op that computes it to its last use, and the
function's results to the end.  It is a *lower bound* of what the run needs (parameters are already
in memory and are not counted; temporaries inside an op and values a backend fuses away are not
counted), so a program is refused only when it certainly does not fit: never a program that fits.
Each backend says which values it materializes (``materializes``): the reference interpreter every
value except those NumPy may return as views (``transpose``, ``slice``); the cpu backend its result
buffers and the results of contractions (``matmul``, ``conv2d``), which it always writes in full.

The memory figure (``available_memory``): the smallest of MemAvailable + SwapFree from
``/proc/meminfo``, the room left under the process's cgroup limit (v2 ``memory.max`` of its group
and every ancestor, or v1 ``hierarchical_memory_limit``; the usage counts reclaimable page cache as
free) and the room left under ``RLIMIT_AS``.  Where none is known (not Linux) nothing is refused.
Runs that need less than ``CHECK_FROM`` are not checked (reading the figures costs ~50 µs).
"""

from __future__ import annotations

import os
import sys
from typing import Callable, Mapping, NamedTuple

from mind.diagnostics import error
from mind.reference.program import FunctionLike, OperationLike
from mind.spec.ops import TensorType
from mind.spec.dims import evaluate

__all__ = ["Available", "available_memory", "peak_bytes", "check_memory", "value_bytes", "CHECK_FROM",
           "REFERENCE_VIEWS", "format_bytes"]

CHECK_FROM = 1 << 26
"""Estimates below this (64 MiB) are not compared with the memory available."""

REFERENCE_VIEWS = frozenset({"transpose", "slice"})
"""Ops whose reference result may be a view of their operand (no new memory)."""


class Available(NamedTuple):
    bytes: int
    source: str  # where the figure comes from, for the diagnostic


def available_memory() -> Available | None:
    """How many bytes this process may still allocate (the tightest known limit), or None."""
    found = [a for a in (_meminfo(), _cgroup_v2(), _cgroup_v1(), _rlimit_as()) if a is not None]
    return min(found, key=lambda a: a.bytes) if found else None


def value_bytes(t: TensorType, env: Mapping[str, int]) -> int:
    """Bytes of a value of type ``t`` once its symbols take the values of ``env`` (0 when a dim
    cannot be evaluated: the estimate stays a lower bound)."""
    n = t.dtype.numpy.itemsize
    try:
        for d in t.shape:
            n *= d if isinstance(d, int) else evaluate(d, env)
    except (KeyError, ValueError, ZeroDivisionError):
        return 0
    return max(n, 0)


def peak_bytes(fn: FunctionLike, env: Mapping[str, int],
               materializes: Callable[[OperationLike], bool]) -> tuple[int, OperationLike | None, int]:
    """(peak bytes, the op whose value is the largest of those held at the peak, that value's
    bytes) of ``fn`` under ``env``, counting the results of the ops ``materializes`` accepts and the
    function's results (see the module docstring)."""
    results = {id(v) for v in fn.results}
    last_use: dict[int, int] = {}
    for i, op in enumerate(fn.ops):
        for v in op.operands:
            last_use[id(v)] = i
    held: list[tuple[int, int, int]] = []  # (first op index, last op index, bytes) of each counted value
    for i, op in enumerate(fn.ops):
        r = id(op.result)
        if r in results or materializes(op):
            held.append((i, len(fn.ops) if r in results else last_use.get(r, i), value_bytes(op.result.type, env)))
    released: dict[int, int] = {}  # op index -> bytes no longer held after it
    for _, end, n in held:
        released[end] = released.get(end, 0) + n
    live = peak = 0
    peak_at = -1
    j = 0
    for i in range(len(fn.ops)):
        while j < len(held) and held[j][0] == i:
            live += held[j][2]
            j += 1
        if live > peak:
            peak, peak_at = live, i
        live -= released.get(i, 0)
    if peak_at < 0:
        return 0, None, 0
    start, _, n = max((h for h in held if h[0] <= peak_at <= h[1]), key=lambda h: h[2])
    return peak, fn.ops[start], n


def check_memory(fn: FunctionLike, env: Mapping[str, int], materializes: Callable[[OperationLike], bool],
                 backend: str) -> int:
    """E6004 when ``fn`` certainly needs more memory than is available, or holds a value NumPy
    cannot represent (``representable``); returns the estimate."""
    results = {id(v) for v in fn.results}
    for op in fn.ops:
        if (id(op.result) in results or materializes(op)) and not representable(op.result.type, env):
            raise memory_error(fn, env, op, 0, None, backend,
                               "NumPy represents no array whose extents (zeros left out) times the element "
                               "size exceed 2**63 bytes, even an empty one")
    peak, op, op_bytes = peak_bytes(fn, env, materializes)
    if peak >= CHECK_FROM and op is not None:
        avail = available_memory()
        if avail is not None and peak > avail.bytes:
            raise memory_error(fn, env, op, peak, avail, backend)
    return peak


def representable(t: TensorType, env: Mapping[str, int]) -> bool:
    """Whether NumPy can make an array of type ``t``: it refuses shapes whose nonzero extents,
    times the element size, exceed its index type, even when another extent is 0 (empty)."""
    n = t.dtype.numpy.itemsize
    try:
        for d in t.shape:
            n *= max(d if isinstance(d, int) else evaluate(d, env), 1)
    except (KeyError, ValueError, ZeroDivisionError):
        return True
    return n <= sys.maxsize


def memory_error(fn: FunctionLike, env: Mapping[str, int], op: OperationLike, peak: int, avail: Available | None,
                 backend: str, why: str | None = None):
    """The E6004 diagnostic about ``op``, the largest value held when ``fn`` needs ``peak`` bytes
    (or the value that cannot be held, ``why``), as a ``MindError`` to raise.  Located at the op, or
    at the function where ops carry no source position (the frontend does not record them)."""
    t = op.result.type
    shape = ", ".join(str(d if isinstance(d, int) else evaluate(d, env)) for d in t.shape)
    value = f"`%{op.result.name} = {op.op}`, {t.dtype.value}[{shape}]"
    if why is not None:
        message = f"@{fn.name} cannot hold {value} on the {backend} backend: {why}"
    else:
        have = f"{format_bytes(avail.bytes)} are available ({avail.source})" if avail else "allocating it failed"
        message = (f"@{fn.name} needs at least {format_bytes(peak)} of memory on the {backend} backend; "
                   f"{value} alone takes {format_bytes(value_bytes(t, env))}; {have}")
    return error("E6004", message, op.span or fn.span,
                 help="run it on smaller inputs, or on a machine with more memory")


def format_bytes(n: int) -> str:
    """``n`` bytes for people: ``1.5 GiB (1610612736 bytes)``."""
    for unit, size in (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n / size:.1f} {unit} ({n} bytes)"
    return f"{n} bytes"


# -- the figures ------------------------------------------------------------------------------

def _read(path: str) -> str | None:
    try:
        with open(path, encoding="ascii", errors="replace") as fh:
            return fh.read(1 << 16)
    except OSError:
        return None


def _fields(text: str | None, unit: int = 1) -> dict[str, int]:
    """``name value`` lines (``/proc/meminfo`` with ``unit`` 1024, ``memory.stat``)."""
    out: dict[str, int] = {}
    for line in (text or "").splitlines():
        parts = line.replace(":", " ").split()
        if len(parts) >= 2 and parts[1].isdigit():
            out[parts[0]] = int(parts[1]) * unit
    return out


def _meminfo() -> Available | None:
    info = _fields(_read("/proc/meminfo"), 1024)
    if "MemAvailable" not in info:
        return None
    return Available(info["MemAvailable"] + info.get("SwapFree", 0), "MemAvailable + SwapFree in /proc/meminfo")


def _own_cgroup(controller: str) -> str | None:
    """The process's cgroup path for ``controller`` ("" for the v2 unified hierarchy)."""
    for line in (_read("/proc/self/cgroup") or "").splitlines():
        parts = line.split(":", 2)
        if len(parts) == 3 and (controller in parts[1].split(",") if controller else parts[1] == ""):
            return parts[2]
    return None


def _int_file(path: str) -> int | None:
    text = (_read(path) or "").strip()
    return int(text) if text.isdigit() else None


def _cgroup_v2() -> Available | None:
    rel = _own_cgroup("")
    if rel is None:
        return None
    root = "/sys/fs/cgroup"
    best: Available | None = None
    d = os.path.normpath(root + "/" + rel.strip("/")) if rel.strip("/") else root
    while d.startswith(root):
        limit, current = _int_file(d + "/memory.max"), _int_file(d + "/memory.current")
        if limit is not None and current is not None:
            reclaimable = _fields(_read(d + "/memory.stat")).get("inactive_file", 0)
            room = max(limit - max(current - reclaimable, 0), 0)
            if best is None or room < best.bytes:
                best = Available(room, f"the limit of cgroup {d}")
        if d == root:
            break
        d = os.path.dirname(d)
    return best


_UNLIMITED_V1 = 1 << 62  # v1 writes "no limit" as a page-rounded 2**63 - 1


def _cgroup_v1() -> Available | None:
    rel = _own_cgroup("memory")
    if rel is None:
        return None
    for d in (os.path.normpath("/sys/fs/cgroup/memory/" + rel.strip("/")), "/sys/fs/cgroup/memory"):
        stat = _fields(_read(d + "/memory.stat"))
        usage = _int_file(d + "/memory.usage_in_bytes")
        limit = stat.get("hierarchical_memory_limit")
        if limit is None or usage is None:
            continue
        if limit >= _UNLIMITED_V1:
            return None
        room = max(limit - max(usage - stat.get("total_inactive_file", 0), 0), 0)
        return Available(room, f"the limit of cgroup {d}")
    return None


def _rlimit_as() -> Available | None:
    try:
        import resource
    except ImportError:  # not POSIX
        return None
    soft, _hard = resource.getrlimit(resource.RLIMIT_AS)
    if soft == resource.RLIM_INFINITY:
        return None
    size = _fields(_read("/proc/self/status"), 1024).get("VmSize")
    if size is None:
        return None
    return Available(max(soft - size, 0), "the address-space limit (ulimit -v)")
