"""Caches of the frontend's result (source text -> canonical Core IR ``Module``): in memory, and on disk.

Why on disk: a warm start of a compiled program (its kernels in the kernel cache) would otherwise
spend most of its time in the frontend: parsing, elaboration, autodiff and canonicalization, and
importing the passes and autodiff that do them (train_step: 4-6 ms of an 8-12 ms warm start).  A
disk hit is one file read, a SHA-256 and a parse of Core IR text (``docs/cache.md`` has the figures).

What an entry holds: the module's canonical Core IR text (``mind.ir.printer``), which the Core IR
parser reads back (``spans=False``: no positions to compute), and the source spans the text does not
carry (each function's, and any value's or op's the frontend set), which later diagnostics point at
(``mind grad``'s, say).  The text is the module's identity everywhere else too (the kernel cache keys
on it), so a hit gives back a module equal to the frontend's in everything a user sees.  No pickle:
reading an entry never executes anything, whoever wrote it.

File: ``<cache_dir>/frontend/<digest[:2]>/<digest>.mir`` (folders checked by ``mind.cache_store``),
written atomically::

    mind-frontend-v2 <SHA-256 of the rest>
    <spans, one line of JSON>
    <Core IR text>

Key (``digest``): SHA-256 of the format, the Python version, MIND's version, the source text, the
file name (diagnostics and spans mention it) and the frontend's fingerprint: the size and
modification time of every Python source the frontend's output depends on (``FINGERPRINT_PACKAGES``),
the rule Python's own bytecode cache follows, so an edited frontend misses.  Only successful
compilations are stored (a ``MindError`` is raised again on every call, with its diagnostics), and
only modules whose entry stays small (``MAX_ENTRY_BYTES``; constants of more than
``MAX_CONST_ELEMENTS`` elements in all are not even printed).  An entry that is not exactly what
this code writes (hash, header, spans, parse) is a damaged entry: removed with a warning (E7011) and
rebuilt.  ``$MIND_FRONTEND_CACHE=0`` turns the disk layer off, ``$MIND_CACHE=off`` every disk cache.
Cached modules are shared: treat them as read-only.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import sys
from collections import OrderedDict
from typing import Any

from mind.diagnostics import MindError, Span
from mind.ir.core import Function, Module

from .api import compile_source

__all__ = ["compile_cached", "clear", "source_key", "frontend_fingerprint", "disk_enabled", "FORMAT",
           "FINGERPRINT_PACKAGES", "MAX_ENTRY_BYTES", "MAX_CONST_ELEMENTS"]

FORMAT = "mind-frontend-v2"
MAX_ENTRIES = 256
MAX_ENTRY_BYTES = 16 << 20
"""The largest entry stored (and read back): a module whose text is larger compiles on every start."""
MAX_CONST_ELEMENTS = 1 << 22
"""A module whose constants hold more elements than this in all is not stored: printing reads every
constant's value, which builds deferred ones (folded results, splats) in memory and formats
non-uniform ones element by element."""
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
    """``$MIND_FRONTEND_CACHE``: ``1`` (default) or ``0``, and ``$MIND_CACHE`` (``off`` turns every
    disk cache off); anything else is E7002, not a silent default (a misspelt ``off`` would otherwise
    keep the cache on)."""
    from mind.cache_store import caching_enabled
    value = os.environ.get("MIND_FRONTEND_CACHE", "")
    if value not in ("", "0", "1"):
        from mind.diagnostics import error
        raise error("E7002", f"environment variable MIND_FRONTEND_CACHE={value!r} is not a valid setting",
                    help="use 1 (cache frontend results on disk) or 0 (do not), or unset it (default 1)")
    return caching_enabled() and value != "0"


def _disk_path(key: tuple[str, str]) -> tuple[str, str]:
    """The cache root and the entry's path under it."""
    from mind.version import __version__
    from mind.cache_store import cache_dir
    parts = "\n".join((FORMAT, sys.version, __version__, frontend_fingerprint(), key[0], key[1]))
    digest = hashlib.sha256(parts.encode("utf-8", "surrogatepass")).hexdigest()
    root = cache_dir()
    return root, os.path.join(root, "frontend", digest[:2], f"{digest}.mir")


def _read(root: str, file: str) -> Module | None:
    """The module of the entry ``file``, or None when there is none (a damaged one is evicted)."""
    from mind.cache_store import EntryProblem, evict, read_entry, trusted_folder
    if trusted_folder(root, "frontend", os.path.basename(os.path.dirname(file)), create=False) is None:
        return None
    try:
        data = read_entry(file, MAX_ENTRY_BYTES + 4096)
        if data is None:
            return None
        return _decode(data, file)
    except EntryProblem as e:
        evict([file], str(e))
        return None


def _decode(data: bytes, file: str) -> Module:
    """The module of an entry's bytes; ``EntryProblem`` for anything but what ``_encode`` writes."""
    from mind.cache_store import EntryProblem
    from mind.ir.parser import parse_module
    header, sep, body = data.partition(b"\n")
    fields = header.split(b" ")
    if not sep or len(fields) != 2 or fields[0] != FORMAT.encode():
        raise EntryProblem("its header is not that of a frontend entry")
    if hashlib.sha256(body).hexdigest().encode() != fields[1]:
        raise EntryProblem("its contents do not match their SHA-256")
    spans_line, _, ir = body.partition(b"\n")
    try:
        text = ir.decode("utf-8")
        module = parse_module(text, file, spans=False)
        _apply_spans(module, json.loads(spans_line))
        _keep_function_texts(module, text)
    except (UnicodeDecodeError, ValueError, MindError, TypeError, KeyError, IndexError, AttributeError) as e:
        raise EntryProblem(f"it does not read back as a module ({type(e).__name__})") from None
    return module


def _keep_function_texts(module: Module, text: str) -> None:
    """Give each function its canonical text (``Function.canonical_text``), cut from the entry's
    module text (``print_module``: the functions' texts joined by blank lines, which a function's own
    text never has), so the CPU backend keys its kernels without printing the function again.  Only
    when the cut is exactly one piece per function, each beginning with that function's header and
    ending its body; else the functions keep none (and are printed)."""
    pieces = text[:-1].split("\n\n") if text.endswith("\n") else []
    if len(pieces) != len(module.functions):
        return
    if all(p.startswith(f"func @{f.name}(") and p.endswith("\n}") for p, f in zip(pieces, module.functions)):
        for f, piece in zip(module.functions, pieces):
            f.canonical_text = piece


def _encode(module: Module) -> bytes | None:
    """An entry's bytes, or None for a module too large to store."""
    if sum(_const_elements(op) for f in module.functions for op in f.ops) > MAX_CONST_ELEMENTS:
        return None
    text = module.text()
    _keep_function_texts(module, text)
    body = (json.dumps(_spans(module), separators=(",", ":")) + "\n" + text).encode("utf-8")
    if len(body) > MAX_ENTRY_BYTES:
        return None
    return f"{FORMAT} {hashlib.sha256(body).hexdigest()}\n".encode() + body


def _const_elements(op: Any) -> int:
    if op.op != "const":
        return 0
    if op.hint is not None:  # a deferred constant: its size without building it
        return int(op.hint.size)
    return int(getattr(op.attrs.get("value"), "size", 1))


def _span_json(span: Span | None) -> list[Any] | None:
    return None if span is None else [span.file, span.line, span.col, span.end_line, span.end_col]


def _spans(module: Module) -> list[dict[str, Any]]:
    """Every span of the module, per function: its own, and those of parameters, ops and op results
    (by index; only the ones that are set)."""
    out = []
    for f in module.functions:
        entry: dict[str, Any] = {"span": _span_json(f.span)}
        for field, items in (("params", f.params), ("ops", f.ops), ("results", [op.result for op in f.ops])):
            found = {str(i): _span_json(x.span) for i, x in enumerate(items) if x.span is not None}
            if found:
                entry[field] = found
        out.append(entry)
    return out


def _span_from(value: Any) -> Span | None:
    if value is None:
        return None
    file, line, col, end_line, end_col = value
    if not (isinstance(file, str) and all(isinstance(v, int) or (v is None and i >= 2)
                                          for i, v in enumerate((line, col, end_line, end_col)))):
        raise ValueError("not a span")
    return Span(file, line, col, end_line, end_col)


def _apply_spans(module: Module, table: Any) -> None:
    """Set the spans ``_spans`` recorded (the parsed module has none)."""
    if not isinstance(table, list) or len(table) != len(module.functions):
        raise ValueError("the span table does not match the module")
    for f, entry in zip(module.functions, table):
        _apply_function_spans(f, entry)


def _apply_function_spans(f: Function, entry: dict[str, Any]) -> None:
    f.span = _span_from(entry["span"])
    for field, items in (("params", f.params), ("ops", f.ops), ("results", [op.result for op in f.ops])):
        for index, value in entry.get(field, {}).items():
            i = int(index)
            if not 0 <= i < len(items):
                raise IndexError(index)
            items[i].span = _span_from(value)


def _write(root: str, file: str, module: Module) -> None:
    from mind.cache_store import trusted_folder
    from mind.disk import atomic_write
    data = _encode(module)
    if data is None:
        return
    try:
        trusted_folder(root, "frontend", os.path.basename(os.path.dirname(file)), create=True)
        atomic_write(file, data)
    except OSError:
        pass  # the cache is an optimization: the module is still returned


def compile_cached(text: str | bytes, path: str = "<input>", *, disk: bool | None = None) -> Module:
    """``compile_source`` memoized in memory and (``disk``, default ``disk_enabled()``) on disk;
    failures (MindError) are not cached.  E7010 when the cache folder is not safe to use."""
    use_disk = disk_enabled() if disk is None else disk  # a bad setting is E7002 on every call, hit or not
    key = source_key(text, path)
    hit = _CACHE.get(key)
    if hit is not None:
        _CACHE.move_to_end(key)
        return hit
    place = _disk_path(key) if use_disk else None
    module = _read(*place) if place else None
    if module is None:
        module = compile_source(text, path)
        if place:
            _write(*place, module)
    _CACHE[key] = module
    if len(_CACHE) > MAX_ENTRIES:
        _CACHE.popitem(last=False)
    return module


def clear() -> None:
    """Forget the in-memory entries (the disk entries stay)."""
    _CACHE.clear()
