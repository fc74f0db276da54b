"""Printing results and diagnostics for people (text) and programs (``--json``)."""

from __future__ import annotations

import json
import sys
from typing import Any

from mind.cli.exit_status import exit_status
from mind.diagnostics import Diagnostic, MindError, render, render_all, to_json

_WARNINGS: list[Diagnostic] = []
"""The coded warnings of this command (cache entries rebuilt, ...), each once, in order."""


def json_value(arr: Any) -> Any:
    """Array values as JSON: nested lists, with NaN and infinities as the strings "nan", "inf", "-inf"."""
    import numpy as np

    a = np.asarray(arr)
    if a.dtype.kind == "f":
        def enc(x: Any) -> Any:
            if isinstance(x, list):
                return [enc(i) for i in x]
            if x != x:
                return "nan"
            if x in (float("inf"), float("-inf")):
                return "inf" if x > 0 else "-inf"
            return x
        return enc(a.tolist())
    return a.tolist()


def format_result(index: int, arr: Any, dtype_name: str) -> str:
    import numpy as np

    shape = ", ".join(str(d) for d in np.shape(arr))
    with np.printoptions(threshold=1000, edgeitems=4, linewidth=100):
        body = np.array2string(np.asarray(arr), separator=" ") if np.ndim(arr) else repr(np.asarray(arr)[()].item())
    return f"result{index}: {dtype_name}[{shape}]\n{body}"


def emit_json(payload: dict[str, Any]) -> None:
    """Print ``payload``, with the command's warnings (``warnings``: diagnostics) when there are any."""
    if _WARNINGS:
        payload = dict(payload, warnings=to_json(_WARNINGS))
    sys.stdout.write(json.dumps(payload, indent=2, sort_keys=True, allow_nan=False) + "\n")


def report_warning(diag: Diagnostic, as_json: bool) -> None:
    """Record a coded warning once; people see it on stderr at once, ``--json`` in its output."""
    if diag in _WARNINGS:
        return
    _WARNINGS.append(diag)
    if not as_json:
        sys.stderr.write(render(diag, color=sys.stderr.isatty()) + "\n")


def forget_warnings() -> None:
    _WARNINGS.clear()


def report_error(exc: MindError, as_json: bool) -> int:
    """Print every diagnostic; returns the exit status their codes give (``exit_status.STATUS``)."""
    if as_json:
        emit_json({"ok": False, "diagnostics": to_json(exc.diagnostics)})
    else:
        color = sys.stderr.isatty()
        sys.stderr.write(render_all(exc.diagnostics, exc.sources, color=color) + "\n")
    return exit_status(exc.codes)
