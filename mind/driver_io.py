"""Reading and writing the files a user names, with coded diagnostics instead of OS tracebacks.

Writes go through ``mind.disk.write_output`` (atomic, never through a link or onto anything but a
regular file, into a folder that exists) and output folders through ``mind.output_dir.OutputDir``
(one run's files); every refusal or OS failure is E7003 with what is in the way.
"""

from __future__ import annotations

import os
import stat
from contextlib import contextmanager
from typing import Any, Callable, Iterable, Iterator

from mind.diagnostics import Diagnostic, MindError, Span, error
from mind.disk import RefusedTarget, write_output


def read_source(path: str) -> str:
    """The UTF-8 text of ``path``; E7001 if it cannot be read or is not a regular file (a FIFO
    would block, a device may never end), E1001 if it is not UTF-8."""
    try:
        with _open_regular(path) as fh:
            data = fh.read()
    except NotRegular as exc:
        raise error("E7001", f"cannot read `{path}`: it is {exc}, not a regular file",
                    help="name a MIND source (.mind) or Core IR (.mir) file") from None
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


@contextmanager
def writing(path: str) -> Iterator[None]:
    """Report an OSError raised inside the block as E7003 about ``path`` (a refusal with its help)."""
    try:
        yield
    except RefusedTarget as exc:
        raise error("E7003", f"cannot write `{path}`: {exc}", help=exc.help) from None
    except OSError as exc:
        raise error("E7003", f"cannot write `{path}`: {exc.strerror or exc}") from None


def atomic_write(path: str, write: Callable[[Any], None], mode: str = "wb") -> None:
    """Create or replace the file ``path`` with what ``write(file)`` writes (``disk.write_output``);
    E7003 if it cannot be written or may not be replaced."""
    with writing(path):
        write_output(path, write, mode)


class OutputFolder:
    """``mind.output_dir.OutputDir`` with E7003 diagnostics: checked when made, so a bad folder is
    reported before the program runs."""

    def __init__(self, path: str, names: Iterable[str]) -> None:
        from mind.output_dir import OutputDir

        self.path = path
        with writing(path):
            self._dir = OutputDir(path, names)

    def write(self, name: str, write: Callable[[Any], None], mode: str = "wb") -> None:
        with writing(self.path):
            self._dir.write(name, write, mode)

    def finish(self) -> None:
        with writing(self.path):
            self._dir.finish()

NPY_MAX_HEADER = 10000
"""Largest ``.npy`` header read (NumPy's own default bound; ``numpy.save`` writes ~128 bytes)."""
_NPY_HELP = "save arrays with numpy.save (MIND reads .npy files of numbers or bools)"


def read_array(path: str) -> Any:
    """The array in the ``.npy`` file ``path``, read only after its header has been checked.

    Refused with E6011 (what is wrong): a file that is not a regular file (a FIFO would block), a
    ``.npz`` zip archive, a missing magic string, an unknown format version, a malformed or
    oversized header, Python objects or structured records, and data shorter than the header
    declares.  An array larger than the memory available is E6004 (see ``reference.memory``), so
    a header declaring terabytes costs nothing.  E7001 when the file cannot be opened."""
    try:
        fh = _open_regular(path)
    except FileNotFoundError:
        raise error("E7001", f"input file `{path}` not found") from None
    except NotRegular as exc:
        raise _bad_npy(path, f"is {exc}, not a .npy file") from None
    except OSError as exc:
        raise error("E7001", f"cannot read `{path}`: {exc.strerror or exc}",
                    help="check the path and its permissions") from None
    with fh:
        try:
            return _read_npy(fh, path, os.fstat(fh.fileno()).st_size)
        except OSError as exc:
            raise error("E7001", f"cannot read `{path}`: {exc.strerror or exc}") from None


class NotRegular(OSError):
    """``_open_regular`` found something other than a regular file; ``str`` says what."""


def _open_regular(path: str) -> Any:
    """``open(path, "rb")``, refusing (``NotRegular``) anything but a regular file before reading:
    opened without blocking (a FIFO with no writer would block ``open`` itself), then checked."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        from mind.disk import describe_kind
        raise NotRegular(describe_kind(st.st_mode))
    return os.fdopen(fd, "rb")


def _bad_npy(path: str, what: str, help: str = _NPY_HELP) -> MindError:
    return error("E6011", f"cannot read `{path}` as a NumPy .npy array: it {what}", help=help)


def _read_npy(fh: Any, path: str, size: int) -> Any:
    import io
    import warnings

    import numpy as np
    from numpy.lib import format as npy

    head = fh.read(12 + NPY_MAX_HEADER)
    if head[:2] == b"PK":
        raise _bad_npy(path, "is a zip archive (a .npz file), not a single array",
                       "save one array with numpy.save, e.g. numpy.save('x.npy', numpy.load('f.npz')['x'])")
    if not head.startswith(npy.MAGIC_PREFIX) or len(head) < 10:
        raise _bad_npy(path, "does not start with the .npy magic string \\x93NUMPY")
    major, minor = head[6], head[7]
    if major not in (1, 2, 3) or minor != 0:
        raise _bad_npy(path, f"has format version {major}.{minor}; MIND reads versions 1.0, 2.0 and 3.0")
    width = 2 if major == 1 else 4
    header_len = int.from_bytes(head[8:8 + width], "little")
    offset = 8 + width + header_len
    if header_len > NPY_MAX_HEADER:
        raise _bad_npy(path, f"declares a header of {header_len} bytes (the limit is {NPY_MAX_HEADER})")
    if offset > len(head):
        raise _bad_npy(path, f"ends inside its header ({size} bytes, the header needs {offset})")
    reader = npy.read_array_header_1_0 if major == 1 else npy.read_array_header_2_0
    try:
        with warnings.catch_warnings():  # (Python's warnings about the header's text, e.g. bad escapes)
            warnings.simplefilter("ignore")
            shape, fortran, dtype = reader(io.BytesIO(head[8:offset]), max_header_size=NPY_MAX_HEADER)
    except Exception as exc:  # noqa: BLE001 - NumPy parses the header's text with Python's tokenizer and
        # literal_eval, which fail in many ways (ValueError, SyntaxError, tokenize.TokenError, ...)
        raise _bad_npy(path, f"has a malformed header ({type(exc).__name__}: {exc})") from None
    if dtype.hasobject:
        raise _bad_npy(path, "holds Python objects (dtype object), which MIND never unpickles")
    if dtype.fields is not None or dtype.subdtype is not None:
        raise _bad_npy(path, f"holds structured records (dtype {dtype}), not numbers")
    if any(d < 0 for d in shape):
        raise _bad_npy(path, f"declares a negative dimension (shape {tuple(shape)})")
    count = 1
    for d in shape:
        count *= d
    need = count * dtype.itemsize
    if need > size - offset:
        raise _bad_npy(path, f"declares {need} bytes of data (shape {tuple(shape)}, dtype {dtype}) but holds "
                             f"{size - offset}", "the file is truncated or its header was altered")
    _check_room(path, need)
    fh.seek(offset)
    try:
        data = np.fromfile(fh, dtype=dtype, count=count)
    except MemoryError:
        _check_room(path, need, failed=True)
        raise
    if data.size != count:
        raise _bad_npy(path, f"holds {data.size} of the {count} elements its header declares")
    arr = data.reshape(shape[::-1]).transpose() if fortran else data.reshape(shape)
    if not arr.dtype.isnative:
        arr = arr.astype(arr.dtype.newbyteorder("="))
    return arr


def _check_room(path: str, need: int, failed: bool = False) -> None:
    """E6004 when an array of ``need`` bytes does not fit in the memory available."""
    from mind.reference.memory import CHECK_FROM, available_memory, format_bytes

    if need < CHECK_FROM and not failed:
        return
    avail = available_memory()
    if failed or (avail is not None and need > avail.bytes):
        have = f"{format_bytes(avail.bytes)} are available ({avail.source})" if avail and not failed else \
            "the allocation failed"
        raise error("E6004", f"the array in `{path}` takes {format_bytes(need)} of memory; {have}",
                    help="pass a smaller array, or run on a machine with more memory")
