"""Reading and writing the files a user names, with coded diagnostics instead of OS tracebacks.

Writes are atomic (temporary file + ``os.replace``), so a failure never leaves a file half-written.
"""

from __future__ import annotations

from typing import Any, Callable

from mind.diagnostics import Diagnostic, MindError, Span, error
from mind.disk import replace_file


def read_source(path: str) -> str:
    """The UTF-8 text of ``path``; E7001 if it cannot be read, E1001 if it is not UTF-8."""
    try:
        with open(path, "rb") as fh:
            data = fh.read()
    except OSError as exc:
        raise error("E7001", f"cannot read `{path}`: {exc.strerror or exc}",
                    help="check the path and its permissions") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        text = data[: exc.start].decode("utf-8", errors="replace")
        line = text.count("\n") + 1
        col = len(text) - (text.rfind("\n") + 1) + 1
        raise MindError([Diagnostic("E1001", f"invalid UTF-8 byte 0x{data[exc.start]:02x}",
                                    Span(path, line, col, line, col + 1),
                                    help="MIND source and IR text are UTF-8")]) from None


def atomic_write(path: str, write: Callable[[Any], None], mode: str = "wb") -> None:
    """Write through a temporary file in the same directory, then rename over ``path``
    (``disk.replace_file``); E7003 if that fails."""
    try:
        replace_file(path, write, mode)
    except OSError as exc:
        raise error("E7003", f"cannot write `{path}`: {exc.strerror or exc}") from None