"""MIND's files on disk: the one way
every file is written (the caches', and the outputs a user names through ``driver_io``), and the
fingerprint that invalidates cache entries when the code that made them changes.

Why atomic writes: several processes may fill the same cache at once, and a process may die half-way;
a reader must see a whole file or none, so every file is written beside its place and renamed into it
(``os.replace`` is atomic on POSIX).

Outputs a user names (``write_output``) follow stricter rules than cache entries: the target is
replaced only when it is absent or a regular file (never a symbolic link, a folder, a FIFO, a
device or a socket, so nothing is ever written *through* a link or into a special file), and its
folder must already exist (a typo in a path is reported, not silently created).  Refusals are
``RefusedTarget`` errors that say what is in the way.
"""

from __future__ import annotations

import itertools
import os
import stat
import threading
from typing import Any, Callable

__all__ = ["atomic_write", "replace_file", "sources_fingerprint", "write_output",
           "check_output_target", "require_regular", "RefusedTarget", "describe_kind", "TEMP_PREFIX"]

TEMP_PREFIX = ".mind-tmp-"
"""Names of the temporary files ``replace_file`` and ``write_output`` write beside their target
(the process, thread and a counter follow).  A folder of outputs treats leftovers with this prefix
(from a killed process) as its own and removes them."""

_COUNTER = itertools.count()


def sources_fingerprint(folders: "list[tuple[str, str]]") -> str:
    """SHA-256 over (label, file name, size, modification time) of the ``.py`` files of each
    ``(label, folder)``: what a cache key needs to miss after any edit of the code that made the
    entry, at the cost of one ``stat`` per file (~0.3 ms for 60 files; hashing their contents costs
    several times that on every warm start).  It is the rule Python's own bytecode cache follows;
    it differs between checkouts of the same code, which only costs a recompilation."""
    import hashlib
    h = hashlib.sha256()
    for label, folder in folders:
        try:
            with os.scandir(folder) as it:
                entries = sorted((e.name, e.stat()) for e in it if e.name.endswith(".py") and e.is_file())
        except OSError:
            entries = []
        for name, st in entries:
            h.update(f"{label}/{name}:{st.st_size}:{st.st_mtime_ns}\n".encode())
    return h.hexdigest()


def atomic_write(path: str, data: bytes) -> None:
    """Write ``data`` to ``path`` (its folder created if needed) so that readers never see a part."""
    replace_file(path, lambda f: f.write(data))


def replace_file(path: str, write: Callable[[Any], None], mode: str = "wb") -> None:
    """Create or replace ``path`` with what ``write(file)`` writes, atomically, creating its folder
    if needed (cache entries); OSError on failure, with nothing left behind."""
    d = os.path.dirname(os.path.abspath(path))
    os.makedirs(d, exist_ok=True)
    _write_beside(d, path, write, mode)


class RefusedTarget(OSError):
    """An output that MIND will not write: ``str(err)`` says what is in the way; ``help`` how to
    get past it."""

    def __init__(self, message: str, help: str) -> None:
        super().__init__(message)
        self.help = help

    def __str__(self) -> str:
        return str(self.args[0])


_KINDS = ((stat.S_ISREG, "a regular file"), (stat.S_ISLNK, "a symbolic link"), (stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO"),
          (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
          (stat.S_ISSOCK, "a socket"))


def describe_kind(mode: int) -> str:
    """What a file is, in words ("a regular file", "a symbolic link", "a FIFO", ...)."""
    for test, words in _KINDS:
        if test(mode):
            return words
    return "an unknown kind of file"


def check_output_target(path: str) -> None:
    """Raise ``RefusedTarget`` unless ``path`` may be replaced by an output: its folder exists and
    ``path`` is absent or a regular file (``lstat``: a symbolic link is refused, not followed)."""
    d = os.path.dirname(os.path.abspath(path))
    try:
        st = os.stat(d)
    except FileNotFoundError:
        raise RefusedTarget(f"the folder `{d}` does not exist",
                            "create the folder first (MIND does not create missing folders)") from None
    if not stat.S_ISDIR(st.st_mode):
        raise RefusedTarget(f"`{d}` is {describe_kind(st.st_mode)}, not a folder", "name a path in a folder")
    require_regular(path, "name a new file, or remove what is there")


def require_regular(path: str, help: str) -> None:
    """Raise ``RefusedTarget`` (with ``help``) unless ``path`` is absent or a regular file; a
    symbolic link is refused, not followed (``lstat``)."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    if not stat.S_ISREG(st.st_mode):
        raise RefusedTarget(f"`{path}` is {describe_kind(st.st_mode)}; MIND writes and replaces only regular files",
                            help)


def write_output(path: str, write: Callable[[Any], None], mode: str = "wb") -> None:
    """Create or replace the output file ``path`` (named by a user) with what ``write(file)``
    writes, atomically and under the rules of ``check_output_target``; ``RefusedTarget`` or
    another OSError on failure, with nothing left behind."""
    check_output_target(path)
    _write_beside(os.path.dirname(os.path.abspath(path)), path, write, mode)


def _write_beside(d: str, path: str, write: Callable[[Any], None], mode: str) -> None:
    """Write a temporary file in folder ``d`` and rename it onto ``path``.

    The temporary file is named after the process, thread and a counter and created exclusively,
    never following a link (``O_EXCL | O_NOFOLLOW``), not by ``tempfile``, whose import costs ~3 ms
    on the cold path that writes the frontend's entry.  ``os.replace`` replaces a directory entry:
    it never writes through a link that appears at ``path`` meanwhile."""
    tmp = os.path.join(d, f"{TEMP_PREFIX}{os.getpid()}-{threading.get_ident()}-{next(_COUNTER)}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o644)
    try:
        with os.fdopen(fd, mode) as f:
            write(f)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
