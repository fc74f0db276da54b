"""The reference backend as a ``mind.backends`` runner."""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from mind.ir.core import Function
from mind.reference.interpreter import run_function


def compile_function(fn: Function, *, probe_dir: str | None = None, **_options: Any):
    def run(args: Sequence[Any] | Mapping[str, Any]) -> list[Any]:
        return run_function(fn, args, probe_dir=probe_dir)
    return run
