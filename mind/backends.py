"""Backends that execute a Core IR function: each maps a function to a callable on NumPy arrays.

``reference`` is the NumPy interpreter that defines the semantics; compiled backends register
here under their name so the CLI and the Python API choose among them in one place.
"""

from __future__ import annotations

import importlib
from typing import Any, Callable, Mapping, Sequence

from mind.diagnostics import error
from mind.ir.core import Function

Runner = Callable[[Sequence[Any] | Mapping[str, Any]], list[Any]]

# name -> "module:function" taking (Function, **options) and returning a Runner
BACKENDS: dict[str, str] = {
    "reference": "mind.reference.api:compile_function",
    "cpu": "mind.compiler.backend.cpu.api:compile_function",
}
DEFAULT_BACKEND = "cpu"


def compile_for(fn: Function, backend: str = DEFAULT_BACKEND, **options: Any) -> Runner:
    target = BACKENDS.get(backend)
    if target is None:
        raise error("E6002", f"unknown backend `{backend}`", help="backends: " + ", ".join(BACKENDS))
    module_name, attr = target.split(":")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name and module_name.startswith(exc.name):
            raise error("E6002", f"backend `{backend}` is not available in this build") from None
        raise
    return getattr(module, attr)(fn, **options)
