"""Running the `mind` command on fuzzed input: in-process, in a fresh folder, with a time bound.

``run_sandboxed`` fails the test on a Python traceback, an internal error (E7009), an exit status
other than 0/1/2, a run longer than ``TIME_LIMIT`` seconds, or a file written anywhere in the
folder but the output paths the command was given.  (The tests' conftest imports this folder's
modules by name.)
"""

from __future__ import annotations

import contextlib
import io
import os
import signal
import tempfile
from typing import Callable, Sequence

from mind.cli.main import main

TIME_LIMIT = 60


class Hang(BaseException):
    """Raised by the alarm: a BaseException, so `mind`'s own handler cannot turn it into E7009."""


@contextlib.contextmanager
def time_bound(seconds: int):
    def ring(signum, frame):
        raise Hang(f"still running after {seconds} s")
    old = signal.signal(signal.SIGALRM, ring)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def run_sandboxed(files: dict[str, bytes], argv: Callable[[str], Sequence[str]], outputs: Sequence[str] = ()) -> tuple[int, str, str]:
    """Write ``files`` into a fresh folder, run ``mind *argv(folder)`` there and check the rules
    above; ``outputs``: the names (in the folder) the command may create or change."""
    with tempfile.TemporaryDirectory(prefix="mind-fuzz-") as d:
        for name, data in files.items():
            with open(os.path.join(d, name), "wb") as fh:
                fh.write(data)
        before = _snapshot(d, outputs)
        out, err = io.StringIO(), io.StringIO()
        with time_bound(TIME_LIMIT), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            status = main(list(argv(d)))
        text = out.getvalue() + err.getvalue()
        # (an internal error as rendered or as JSON: the bare code may be a name in the fuzzed source)
        assert "Traceback" not in text and "[E7009]" not in text and '"E7009"' not in text, text[-3000:]
        assert status in (0, 1, 2), (status, text[-3000:])
        assert _snapshot(d, outputs) == before, "a file was written outside the output paths"
        return status, out.getvalue(), err.getvalue()


def _snapshot(folder: str, outputs: Sequence[str]) -> dict[str, tuple[int, int]]:
    seen = {}
    for root, dirs, names in os.walk(folder):
        rel = os.path.relpath(root, folder)
        if rel.split(os.sep)[0] in outputs:
            continue
        for name in names:
            if rel == "." and name in outputs:
                continue
            st = os.lstat(os.path.join(root, name))
            seen[os.path.join(rel, name)] = (st.st_size, st.st_mtime_ns)
    return seen
