"""On-disk cache of compiled kernels: a shared library plus a JSON sidecar, checked before every load.

Why a shared library: a hit is a JSON read, a SHA-256 of the library and a ``dlopen``, with no MLIR or
LLVM import, which is what makes a second process start warm (``benchmarks/cpu.py``, warm load).
A key is a SHA-256 over the program (the MLIR text and its entry function, or the canonical Core IR
text and the symbol values) and the options' fingerprint (``CpuOptions.fingerprint``: the thread
count, schedule, optimization level, what matmuls call, the target's CPU model and flags, the
toolchain versions, the backend's own sources and a threaded kernel's OpenMP ABI), so any change of
those misses.

What a load trusts, and why (threat model: ``docs/cache.md``): the folders pass ``mind.cache_store``'s
checks (the user's own, writable by nobody else), so only the user's account can have written an
entry.  Everything else is checked or recomputed: entry names are hex keys (``is_key``; an alias names
its target by key, never by path); the sidecar records its own key and the SHA-256 of the library,
which is hashed from the very descriptor that is then ``dlopen``ed (``/proc/self/fd/N``: no window
between check and load); the kernel's signature comes from the Core IR (or the MLIR text the key
hashes), never from the sidecar, which must agree with it; the OpenMP ABI and the matmul library
must be ones the resolved options allow (``Expected``).  An entry that fails any check is removed
with a warning (E7011) and rebuilt.  Every write goes to a temporary file in the same folder and is
published with ``os.replace`` (``mind.disk.atomic_write``, ``codegen.link_shared``); the sidecar is
written last, so a present sidecar means a complete entry.  Folder: ``mind.cache_store.cache_dir()``.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from typing import Any

from mind.cache_store import EntryProblem, cache_dir, evict, is_key, open_entry, read_entry, trusted_folder
from mind.disk import atomic_write

from .abi import Signature

__all__ = ["cache_dir", "mlir_cache_key", "ir_cache_key", "KernelCache", "Expected", "Entry", "CACHE_FORMAT",
           "MAX_LIBRARY_BYTES"]

CACHE_FORMAT = "mind-cpu-kernel-v2"
MAX_SIDECAR_BYTES = 1 << 16
MAX_LIBRARY_BYTES = 1 << 30
"""The largest shared library stored (and read back); a larger kernel is linked outside the cache."""


def _key(program: dict[str, Any], fingerprint: dict[str, Any]) -> str:
    """SHA-256 (hex) of a program's identity and the options' ``fingerprint``."""
    parts = {"format": CACHE_FORMAT, "program": program, "options": fingerprint}
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode("utf-8")).hexdigest()


def mlir_cache_key(mlir_text: str, func_name: str, fingerprint: dict[str, Any]) -> str:
    """The key of the kernel ``func_name`` of ``mlir_text`` compiled with options of ``fingerprint``
    (``CpuOptions.fingerprint``)."""
    return _key({"mlir_sha256": hashlib.sha256(mlir_text.encode("utf-8")).hexdigest(), "func": func_name},
                fingerprint)


def ir_cache_key(core_ir_text: str, env: dict[str, int], fingerprint: dict[str, Any]) -> str:
    """The key of a kernel from the canonical Core IR text of its function, the symbol values and the
    options' ``fingerprint``: computable without emitting MLIR, so a warm start never runs the
    emitter.  Entries under it are aliases of the MLIR-text key (``mlir_cache_key``)."""
    return _key({"ir_sha256": hashlib.sha256(core_ir_text.encode("utf-8")).hexdigest(),
                 "env": sorted(env.items())}, fingerprint)


@dataclass(frozen=True)
class Expected:
    """What a load of a kernel may accept, recomputed by the loader: the signature (from the Core IR
    function and its symbol values, or the MLIR text the key hashes), the OpenMP ABIs the resolved
    options allow (``None``: no runtime) and the matmul library they resolve to (None: schedules)."""

    signature: Signature
    openmp: tuple[str | None, ...]
    library: str | None


@dataclass
class Entry:
    """A checked entry: ``fd`` an open descriptor of its library (hashed; ``dlopen`` it through
    ``/proc/self/fd``, then ``close``), the library's path, the validated sidecar, and the files
    ``evict`` removes if the library does not load."""

    fd: int
    library_path: str
    meta: dict[str, Any]
    files: tuple[str, ...]

    def close(self) -> None:
        os.close(self.fd)


@dataclass
class KernelCache:
    """A cache folder; entries are ``<key[:2]>/<key>.so`` and ``<key[:2]>/<key>.json``."""

    root: str

    @staticmethod
    def default() -> "KernelCache":
        return KernelCache(cache_dir())

    def paths(self, key: str) -> tuple[str, str]:
        if not is_key(key):
            raise ValueError(f"not a cache key: {key!r}")  # keys are computed: a caller's bug
        d = os.path.join(self.root, key[:2])
        return os.path.join(d, key + ".so"), os.path.join(d, key + ".json")

    def folder(self, key: str, create: bool = False) -> str | None:
        """The checked folder of ``key``'s entry (``cache_store.trusted_folder``; E7010 if unsafe)."""
        return trusted_folder(self.root, key[:2], create=create)

    def lookup(self, key: str, expected: Expected) -> Entry | None:
        """The checked entry of ``key``, or None.  A damaged or inconsistent entry is evicted with a
        warning (E7011) and None returned, so the caller rebuilds it.

        An alias (a sidecar whose ``alias_of`` is another key) uses that key's library."""
        so, meta_path = self.paths(key)
        if self.folder(key) is None:
            return None
        try:
            raw = read_entry(meta_path, MAX_SIDECAR_BYTES)
        except EntryProblem as e:
            evict([meta_path, so], f"its sidecar {e}")
            return None
        if raw is None:
            return None  # no entry, or its library is still being linked
        try:
            data = json.loads(raw)
        except ValueError:
            data = None
        problem = _sidecar_problem(data, key, expected)
        if problem is not None:
            evict([meta_path, so], problem)
            return None
        target = data.get("alias_of", key)
        lib_so, lib_meta = self.paths(target)
        files = (meta_path, lib_so) + ((lib_meta,) if target != key else ())
        if self.folder(target) is None:
            evict(files, "its shared library is missing")
            return None
        try:
            opened = open_entry(lib_so, MAX_LIBRARY_BYTES)
        except EntryProblem as e:
            evict(files, f"its shared library {e}")
            return None
        if opened is None:
            evict(files, "its shared library is missing")
            return None
        fd, payload = opened
        if hashlib.sha256(payload).hexdigest() != data["library_sha256"]:
            os.close(fd)
            evict(files, "its shared library does not match the SHA-256 its sidecar records")
            return None
        return Entry(fd, lib_so, data, files)

    def store_metadata(self, key: str, metadata: dict[str, Any]) -> None:
        """Publish the sidecar of ``key`` (after its library is in place): ``metadata`` with the format
        and the key."""
        _, meta = self.paths(key)
        self.folder(key, create=True)
        body = dict(metadata, format=CACHE_FORMAT, key=key)
        atomic_write(meta, json.dumps(body, sort_keys=True).encode("utf-8"))

    def open_library(self, path: str, sha256: str) -> int:
        """A descriptor of the library just stored at ``path``, checked against its ``sha256``
        (``EntryProblem`` otherwise)."""
        opened = open_entry(path, MAX_LIBRARY_BYTES)
        if opened is None:
            raise EntryProblem("is missing")
        fd, payload = opened
        if hashlib.sha256(payload).hexdigest() != sha256:
            os.close(fd)
            raise EntryProblem("changed while it was stored")
        return fd


def _sidecar_problem(data: Any, key: str, expected: Expected) -> str | None:
    """Why the sidecar ``data`` of ``key`` cannot be used, or None."""
    if not isinstance(data, dict):
        return "its sidecar is not a JSON object"
    checks = (
        (data.get("format") == CACHE_FORMAT, "its sidecar is not in this version's format"),
        (data.get("key") == key, "its sidecar belongs to another key"),
        ("alias_of" not in data or is_key(data["alias_of"]), "its sidecar's alias_of is not a cache key"),
        (is_key(data.get("library_sha256")), "its sidecar records no SHA-256 of the library"),
        ("signature" in data, "its sidecar records no signature"),
        (data.get("signature") == expected.signature.to_json(),
         "its sidecar's signature differs from the one the program gives"),
        (data.get("openmp") in expected.openmp, "its sidecar names an OpenMP runtime these options do not use"),
        (data.get("matmul_library") in (None, expected.library),
         "its sidecar names a matmul library these options do not use"),
        (data.get("scheduled") in (None, True, False), "its sidecar's schedule flag is not a boolean"),
    )
    for ok, problem in checks:
        if not ok:
            return problem
    return None
