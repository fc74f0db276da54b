"""A folder of outputs that holds exactly one run's files (``mind run --out DIR``, ``--probe DIR``).

Why a record: a folder that accumulates files from several runs (``result2.npy`` of a run with
three results beside ``result0.npy`` of a run with one) is read as one run's results, wrongly; and a
folder that MIND empties blindly is a folder where a mistyped path deletes a user's files.  So MIND
owns only what it wrote, and says so in ``.mind-outputs.json`` (``RECORD``): the names it wrote.

The rules (``OutputDir``):

* the folder may be absent (it is created, but not its parent: a missing parent is refused), or an
  existing folder (a symbolic link to one is refused, like every link MIND would write through);
* an existing folder must be empty or hold only the record, files the record lists and leftover
  temporary files of MIND's (``disk.TEMP_PREFIX``, from a killed process); anything else is refused,
  with its name, before the program runs;
* a run records the old names and its own, writes its files (each atomically, through
  ``disk.write_output``), removes the old files it did not rewrite and then records only its own.
  A run that dies half-way leaves a record that covers every file present, so the next run into
  the folder cleans up after it.

Every refusal is a ``disk.RefusedTarget`` (``driver_io`` reports it as E7003).
"""

from __future__ import annotations

import json
import os
import stat
from typing import Any, Callable, Iterable

from mind.disk import TEMP_PREFIX, RefusedTarget, describe_kind, require_regular, write_output

__all__ = ["OutputDir", "RECORD", "FORMAT"]

RECORD = ".mind-outputs.json"
FORMAT = "mind-outputs-v1"
MAX_RECORD_BYTES = 16 << 20  # a record lists file names: far below this for any real run
_FRESH_HELP = "name a new or empty folder (MIND removes only files it wrote itself)"


class OutputDir:
    """The output folder ``path``, about to receive the files ``names`` (plain file names).

    Constructing it checks the folder (``RefusedTarget`` when MIND may not write there), so a
    caller learns about a bad folder before running anything; ``write`` and ``finish`` check again,
    since the folder may change while the program runs."""

    def __init__(self, path: str, names: Iterable[str]) -> None:
        self.path = path
        self.names = sorted(set(names))
        for name in self.names:
            if not _plain_name(name):  # a caller's bug, not bad input
                raise ValueError(f"not a plain file name: {name!r}")
        self._claimed = False
        self._inspect()

    def write(self, name: str, write: Callable[[Any], None], mode: str = "wb") -> None:
        """Write one of the announced files atomically (the first write claims the folder)."""
        if name not in self.names:
            raise ValueError(f"{name!r} was not announced for {self.path!r}")
        if not self._claimed:
            self._claim()
        write_output(os.path.join(self.path, name), write, mode)

    def finish(self) -> None:
        """Remove the files of an earlier run that this run did not rewrite; record this run's."""
        old = self._claim() if not self._claimed else self._inspect()
        for name in sorted(set(old) - set(self.names)):
            _remove_regular(os.path.join(self.path, name))
        self._record(self.names)

    # -- the folder's state ---------------------------------------------------------------------

    def _claim(self) -> list[str]:
        """Create the folder if needed, remove stale temporary files, record old and new names."""
        old = self._inspect()
        if not os.path.lexists(self.path):
            os.mkdir(self.path)
        else:
            for name in os.listdir(self.path):
                if name.startswith(TEMP_PREFIX):
                    _remove_regular(os.path.join(self.path, name))
        self._record(sorted(set(old) | set(self.names)))
        self._claimed = True
        return old

    def _record(self, names: list[str]) -> None:
        text = json.dumps({"format": FORMAT, "files": names}, indent=1) + "\n"
        write_output(os.path.join(self.path, RECORD), lambda fh: fh.write(text), "w")

    def _inspect(self) -> list[str]:
        """The names an earlier run recorded; ``RefusedTarget`` when the folder is not MIND's to
        write (see the module docstring)."""
        path = self.path
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            parent = os.path.dirname(os.path.abspath(path))
            if not os.path.isdir(parent):
                raise RefusedTarget(f"the folder `{parent}` does not exist",
                                    "create it first (MIND creates the output folder, not its parents)") from None
            return []
        if not stat.S_ISDIR(st.st_mode):
            raise RefusedTarget(f"`{path}` is {describe_kind(st.st_mode)}, not a folder",
                                "name a folder (MIND does not write through symbolic links)")
        entries = os.listdir(path)
        recorded = self._read_record() if RECORD in entries else []
        allowed = set(recorded) | {RECORD}
        foreign = sorted(e for e in entries if e not in allowed and not e.startswith(TEMP_PREFIX))
        if foreign:
            shown = ", ".join(f"`{e}`" for e in foreign[:5]) + (f" and {len(foreign) - 5} more" if len(foreign) > 5 else "")
            raise RefusedTarget(f"`{path}` holds files MIND did not write there: {shown}", _FRESH_HELP)
        for name in entries:
            if name != RECORD:
                _require_regular(os.path.join(path, name))
        return recorded

    def _read_record(self) -> list[str]:
        file = os.path.join(self.path, RECORD)
        _require_regular(file)
        try:
            with open(file, "rb") as fh:
                data = fh.read(MAX_RECORD_BYTES + 1)
            doc = json.loads(data) if len(data) <= MAX_RECORD_BYTES else None
        except (OSError, ValueError):
            doc = None
        files = doc.get("files") if isinstance(doc, dict) and doc.get("format") == FORMAT else None
        if not isinstance(files, list) or not all(isinstance(n, str) and _plain_name(n) for n in files):
            raise RefusedTarget(f"`{file}` is not a record of outputs that MIND wrote", _FRESH_HELP)
        return files


def _plain_name(name: str) -> bool:
    """A file name without a folder part that is neither the record nor a temporary file."""
    return bool(name) and name not in (".", "..", RECORD) and "/" not in name and os.sep not in name \
        and "\0" not in name and not name.startswith(TEMP_PREFIX)


def _require_regular(path: str) -> None:
    require_regular(path, "remove it, or name another folder")


def _remove_regular(path: str) -> None:
    _require_regular(path)
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
