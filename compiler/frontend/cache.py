"""Caches of the frontend's result (source text -> canonical Core IR ``Module``): in memory, and on disk.

Why on disk: a warm start of a compiled program (its kernels in the kernel cache) would otherwise
spend most of its time in the frontend: parsing, elaboration, autodiff and canonicalization, and
importing the passes and autodiff that do them (train_step: 4-6 ms of an 8-12 ms warm start).  A
disk hit is one file read and an unpickling (~0.3 ms for train_step).

Key: SHA-256 of the format, the Python version, MIND's version, the source text, the file name
(diagnostics and spans mention it) and the frontend's fingerprint: the size and modification time
of every Python source the frontend's output depends on (``FINGERPRINT_PACKAGES``), the rule Python's
own bytecode cache follows, so an edited frontend misses.  Only successful compilations are stored
(a ``MindError`` is raised again on every call, with its diagnostics).  Entries are
``<cache_dir>/frontend/<key[:2]>/<key>.pickle``, written atomically.

Why pickle: the module is a graph of MIND's own frozen objects; pickle reads it back exactly and
fast (our Core IR parser takes ~3 ms for train_step).  The cache folder is trusted in any case: it
also holds the shared libraries that warm starts load.  A file that does not unpickle to a
``Module`` is ignored and replaced.  ``$MIND_FRONTEND_CACHE=0`` turns the disk layer off.
Cached modules are shared: treat them as read-only.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import sys
from collections import OrderedDict

from mind.ir.core import Module

from .api import compile_source

__all__ = ["compile_cached", "clear", "source_key", "frontend_fingerprint", "disk_enabled", "FORMAT",
           "FINGERPRINT_PACKAGES"]

FORMAT = "mind-frontend-v1"
MAX_ENTRIES = 256
FINGERPRINT_PACKAGES = ("mind", "mind.ir", "mind.spec", "mind.spec.ops", "mind.reference", "mind.compiler",
                        "mind.compiler.frontend", "mind.compiler.passes", "mind.compiler.autodiff")
"""The packages whose sources decide what ``compile_source`` returns (not the backends)."""

_CACHE: "OrderedDict[tuple[str, str], Module]" = OrderedDict()
_FINGERPRINT: list[str] = []


def source_key(text: str | bytes, path: str) -> tuple[str, str]:
    data = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else text
    return (path, hashlib.sha256(data).hexdigest())


def frontend_fingerprint() -> str:
    """``disk.sources_fingerprint`` of ``FINGERPRINT_PACKAGES`` (once per process)."""
    if not _FINGERPRINT:
        from mind.disk import sources_fingerprint
        folders = []
        for pkg in FINGERPRINT_PACKAGES:
            spec = importlib.util.find_spec(pkg)
            folders += [(pkg, f) for f in ((spec.submodule_search_locations or []) if spec else [])]
        _FINGERPRINT.append(sources_fingerprint(folders))
    return _FINGERPRINT[0]


def disk_enabled() -> bool:
    """``$MIND_FRONTEND_CACHE``: ``1`` (default) or ``0``; anything else is E7002, not a silent
    default (a misspelt ``off`` would otherwise keep the cache on)."""
    value = os.environ.get("MIND_FRONTEND_CACHE", "")
    if value not in ("", "0", "1"):
        from mind.diagnostics import error
        raise error("E7002", f"environment variable MIND_FRONTEND_CACHE={value!r} is not a valid setting",
                    help="use 1 (cache frontend results on disk) or 0 (do not), or unset it (default 1)")
    return value != "0"


def _disk_path(key: tuple[str, str]) -> str:
    from mind import __version__
    from mind.disk import cache_dir
    parts = "\n".join((FORMAT, sys.version, __version__, frontend_fingerprint(), key[0], key[1]))
    digest = hashlib.sha256(parts.encode("utf-8", "surrogatepass")).hexdigest()
    return os.path.join(cache_dir(), "frontend", digest[:2], f"{digest}.pickle")


def _read(path: str) -> Module | None:
    import pickle
    try:
        with open(path, "rb") as f:
            module = pickle.loads(f.read())
    except Exception:  # noqa: BLE001 - absent, truncated or stale: compile instead
        return None
    return module if isinstance(module, Module) else None


def _write(path: str, module: Module) -> None:
    import pickle

    from mind.disk import atomic_write
    try:
        atomic_write(path, pickle.dumps(module, protocol=pickle.HIGHEST_PROTOCOL))
    except (OSError, pickle.PicklingError, TypeError, AttributeError, RecursionError):
        pass  # the cache is an optimization: the module is still returned


def compile_cached(text: str | bytes, path: str = "<input>", *, disk: bool | None = None) -> Module:
    """``compile_source`` memoized in memory and (``disk``, default ``disk_enabled()``) on disk;
    failures (MindError) are not cached."""
    key = source_key(text, path)
    hit = _CACHE.get(key)
    if hit is not None:
        _CACHE.move_to_end(key)
        return hit
    file = _disk_path(key) if (disk_enabled() if disk is None else disk) else None
    module = _read(file) if file else None
    if module is None:
        module = compile_source(text, path)
        if file:
            _write(file, module)
    _CACHE[key] = module
    if len(_CACHE) > MAX_ENTRIES:
        _CACHE.popitem(last=False)
    return module


def clear() -> None:
    """Forget the in-memory entries (the disk entries stay)."""
    _CACHE.clear()
