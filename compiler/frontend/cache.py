"""An in-memory compilation cache keyed by the SHA-256 of the source text (and the file name,
which diagnostics and spans mention).  Cached modules are shared: treat them as read-only."""

from __future__ import annotations

import hashlib
from collections import OrderedDict

from mind.ir.core import Module

from .api import compile_source

MAX_ENTRIES = 256
_CACHE: "OrderedDict[tuple[str, str], Module]" = OrderedDict()


def source_key(text: str | bytes, path: str) -> tuple[str, str]:
    data = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else text
    return (path, hashlib.sha256(data).hexdigest())


def compile_cached(text: str | bytes, path: str = "<input>") -> Module:
    """``compile_source`` with memoization; failures (MindError) are not cached."""
    key = source_key(text, path)
    hit = _CACHE.get(key)
    if hit is not None:
        _CACHE.move_to_end(key)
        return hit
    module = compile_source(text, path)
    _CACHE[key] = module
    if len(_CACHE) > MAX_ENTRIES:
        _CACHE.popitem(last=False)
    return module


def clear() -> None:
    _CACHE.clear()
