"""The reference backend as a ``mind.backends`` runner."""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from mind.ir.core import Function
from mind.reference.interpreter import Probe, run_function


def compile_function(fn: Function, *, probe: Probe | None = None, **_options: Any):
    """A runner for ``fn``; ``probe`` (see ``interpreter.run_function``) sees every value."""
    def run(args: Sequence[Any] | Mapping[str, Any]) -> list[Any]:
        return run_function(fn, args, probe=probe)
    return run
