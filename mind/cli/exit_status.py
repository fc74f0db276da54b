"""The exit status of the ``mind`` command for each diagnostic code: one table, read by every
subcommand (through ``output.report_error`` and ``status_of``) and by ``tools/gen_docs.py``, which
prints it in ``docs/errors.md``.

0 success, 1 diagnostics about the program, 2 usage errors or input MIND cannot read (the command
line, files, arrays, the environment), 3 an internal error.  A code takes the status of its longest
key in ``STATUS`` (a code, else its category ``E<digit>``); several diagnostics exit with the
highest status among them, so an internal error is never hidden behind a program diagnostic.
"""

from __future__ import annotations

from typing import Iterable

SUCCESS = 0
PROGRAM = 1
USAGE = 2
INTERNAL = 3

#: What each status means, for ``mind --help`` and the docs.
MEANING: dict[int, str] = {
    SUCCESS: "success",
    PROGRAM: "diagnostics about the program",
    USAGE: "usage error or unreadable input",
    INTERNAL: "internal error",
}

#: A code or a category prefix -> the exit status of its diagnostics.
STATUS: dict[str, int] = {
    "E1": PROGRAM,
    "E1001": USAGE,  # the source is not UTF-8 text: it cannot be read
    "E2": PROGRAM,
    "E3": PROGRAM,
    "E4": PROGRAM,
    "E5": PROGRAM,
    "E6": PROGRAM,
    "E6002": USAGE,  # `--backend` names a backend this build does not have
    "E6009": USAGE,  # `--input` gives an array that does not fit the parameter
    "E6010": USAGE,  # a parameter has no `--input`
    "E6011": USAGE,  # an `--input` file is not a readable .npy array
    "E7": USAGE,  # files, command line, output folders, conformance files, the cache folder
    "E7009": INTERNAL,
    "E7011": SUCCESS,  # a warning (a damaged cache entry was rebuilt): the command goes on
    "E7012": PROGRAM,  # an audit bundle that does not hold what its manifest says (`mind audit --check`)
    "E7013": PROGRAM,  # an audit finding: a diagnostic about the program (`mind audit`)
}


def status_of(code: str) -> int:
    """The exit status of one diagnostic code."""
    status = STATUS.get(code)
    if status is None:
        status = STATUS[code[:2]]
    return status


def exit_status(codes: Iterable[str]) -> int:
    """The exit status of a failure with these diagnostics (the highest; 1 if there are none)."""
    return max((status_of(c) for c in codes), default=PROGRAM)
