"""The on-disk form of a ``mind build`` artifact, written by the compiler and read by the runtime.

An artifact is a folder: the kernels, a launch plan (``plan.json``), the function's Core IR
(``function.mir``) and ``manifest.json``, which names every other file with its SHA-256, and
records what the files were made from (the Core IR's SHA-256, the spec and MIND versions, the
toolchain, the resolved options).  Both sides share this module so that the format is defined
once: ``manifest_bytes`` is the one serializer (canonical JSON, so two builds of the same input
are byte-identical), ``read_checked`` the one reader.

Why the reader checks every hash before anything is parsed or loaded: an artifact travels (to a
machine with a GPU, into a container), and a changed byte in a shared object is code that runs.
A file that does not match is E7014 naming the file; the folder itself follows the rules of the
output folders (``mind.output_dir``), so its record ``.mind-outputs.json`` is not part of it.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
from typing import Any, Mapping

from mind.diagnostics import error

__all__ = ["FORMAT", "MANIFEST", "PLAN", "CORE_IR", "E_ARTIFACT", "sha256", "manifest_bytes", "json_bytes",
           "read_checked", "Checked"]

FORMAT = "mind-artifact-v1"
MANIFEST = "manifest.json"
PLAN = "plan.json"
CORE_IR = "function.mir"
E_ARTIFACT = "E7014"
MAX_MANIFEST_BYTES = 1 << 20
MAX_FILE_BYTES = 1 << 30
_HELP = "rebuild it with `mind build`; an artifact is read only as `mind build` wrote it"


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def json_bytes(doc: Any) -> bytes:
    """Canonical JSON (sorted keys, fixed indentation, a final newline): equal documents, equal bytes."""
    return (json.dumps(doc, indent=1, sort_keys=True, ensure_ascii=True) + "\n").encode("ascii")


def manifest_bytes(files: Mapping[str, bytes], about: Mapping[str, Any]) -> bytes:
    """The manifest of an artifact holding ``files`` (name -> bytes), with ``about`` (what the files
    were made from) beside the hashes."""
    return json_bytes({**about, "format": FORMAT, "files": {n: sha256(files[n]) for n in sorted(files)}})


class Checked:
    """An artifact whose every file matched its manifest: ``manifest`` (the parsed document) and
    ``files`` (name -> the bytes that were hashed; nothing is read from the folder again)."""

    def __init__(self, path: str, manifest: dict[str, Any], files: dict[str, bytes]) -> None:
        self.path, self.manifest, self.files = path, manifest, files

    def json(self, name: str) -> Any:
        try:
            return json.loads(self.files[name])
        except (KeyError, ValueError, UnicodeDecodeError):
            raise _bad(self.path, f"its {name} is missing or not JSON") from None


def _bad(path: str, what: str) -> Exception:
    return error(E_ARTIFACT, f"the artifact {path} is not usable: {what}", help=_HELP)


def _read_regular(folder: str, name: str, limit: int) -> bytes:
    """The bytes of ``folder/name``: a regular file (never through a link), at most ``limit`` bytes."""
    path = os.path.join(folder, name)
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise _bad(folder, f"{name} is missing") from None
    except OSError as e:
        raise _bad(folder, f"{name} cannot be read ({e.strerror or e}; a link is never followed)") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise _bad(folder, f"{name} is not a regular file")
        if st.st_size > limit:
            raise _bad(folder, f"{name} is larger than {limit} bytes")
        chunks = []
        while data := os.read(fd, 1 << 20):
            chunks.append(data)
        return b"".join(chunks)
    finally:
        os.close(fd)


def read_checked(path: str, target: str | None = None) -> Checked:
    """Read the artifact folder ``path``: its manifest, then every file it names, each compared with
    its SHA-256.  E7001 when the folder does not exist; E7014 for anything else that is wrong (a
    changed, missing or extra byte, a manifest of another format or ``target``)."""
    if not os.path.isdir(path):
        raise error("E7001", f"no artifact folder {path}", help="build one with `mind build FILE --out DIR`")
    raw = _read_regular(path, MANIFEST, MAX_MANIFEST_BYTES)
    try:
        manifest = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        raise _bad(path, f"its {MANIFEST} is not JSON") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise _bad(path, f"its {MANIFEST} is not of the format {FORMAT}")
    if target is not None and manifest.get("target") != target:
        raise _bad(path, f"it was built for the target {manifest.get('target')!r}, not {target!r}")
    listed = manifest.get("files")
    if not isinstance(listed, dict) or not all(isinstance(v, str) for v in listed.values()):
        raise _bad(path, f"its {MANIFEST} lists no files")
    files: dict[str, bytes] = {}
    for name in sorted(listed):
        if not isinstance(name, str) or name in ("", ".", "..", MANIFEST) or "/" in name or "\\" in name \
                or "\0" in name:
            raise _bad(path, f"its {MANIFEST} names {name!r}, which is not a plain file name")
        data = _read_regular(path, name, MAX_FILE_BYTES)
        if sha256(data) != listed[name]:
            raise _bad(path, f"{name} does not match the SHA-256 its {MANIFEST} records (changed after the build)")
        files[name] = data
    return Checked(path, manifest, files)
