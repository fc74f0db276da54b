"""Backends that execute a Core IR function: each maps a function to a callable on NumPy arrays.

``reference`` is the NumPy interpreter that defines the semantics; compiled backends register
here under their name so the CLI and the Python API choose among them in one place.  A registry is
not an import: each entry names its implementation by a string and is loaded on request, which is
how this layer reaches implementations above it (the compiler's backends, and the compiler's
autodiff transform that ``mind verify --autodiff`` checks against finite differences).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

import numpy as np

from mind.diagnostics import error
from mind.runtime.memref import shares_memory
from mind.ir.core import Function

if TYPE_CHECKING:
    from mind.reference.interpreter import Probe

Runner = Callable[[Sequence[Any] | Mapping[str, Any]], list[Any]]

# name -> "module:function" taking (Function, **options) and returning a Runner
BACKENDS: dict[str, str] = {
    "reference": "mind.backends:reference_runner",
    "cpu": "mind.compiler.backend.cpu.api:compile_function",
    "cuda": "mind.compiler.backend.cuda.api:compile_function",
}
DEFAULT_BACKEND = "cpu"

# name -> "module:function" that raises E6002 when this machine cannot run the backend (it has no
# device for it); a backend without an entry runs wherever MIND does
DEVICE_CHECKS: dict[str, str] = {
    "cuda": "mind.runtime.cuda:device",
}

# name -> "module:function" of a transform of Core IR functions (Function -> Function)
TRANSFORMS: dict[str, str] = {
    "grad": "mind.compiler.autodiff:grad_function",
}


def _load(kind: str, name: str, target: str) -> Any:
    module_name, attr = target.split(":")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name and module_name.startswith(exc.name):
            raise error("E6002", f"{kind} `{name}` is not available in this build") from None
        raise
    return getattr(module, attr)


def compile_for(fn: Function, backend: str = DEFAULT_BACKEND, **options: Any) -> Runner:
    """A runner of ``fn`` on ``backend``; each backend resolves its ``options`` once, here."""
    target = BACKENDS.get(backend)
    if target is None:
        raise error("E6002", f"unknown backend `{backend}`", help="backends: " + ", ".join(BACKENDS))
    return _load("backend", backend, target)(fn, **options)


def require(backend: str) -> None:
    """E6002, saying why, when ``backend`` is not registered or this machine cannot run it: a caller
    about to run many programs (the conformance runner) asks once, before the first."""
    if backend not in BACKENDS:
        raise error("E6002", f"unknown backend `{backend}`", help="backends: " + ", ".join(BACKENDS))
    check = DEVICE_CHECKS.get(backend)
    if check is not None:
        _load("backend", backend, check)()


def transform(name: str) -> Callable[..., Function]:
    """The registered transform ``name`` (``TRANSFORMS``), loaded on first use."""
    return _load("transform", name, TRANSFORMS[name])


def reference_runner(fn: Function, *, probe: "Probe | None" = None, **_options: Any) -> Runner:
    """The ``reference`` backend: ``runner(args)`` binds the arguments and runs the interpreter;
    ``probe`` (see ``mind.reference.interpreter``) sees every value.  It has no other option (the
    compiled backends' options are accepted and mean nothing here)."""
    from mind.calling import run_reference

    def run(args: Sequence[Any] | Mapping[str, Any]) -> list[Any]:
        return run_reference(fn, args, probe=probe)
    return run


def check_out(name: str, out: Any, specs: Sequence[Any], ins: Sequence[np.ndarray]) -> list[np.ndarray]:
    """Validate preallocated result arrays (E6009, never copied or converted)."""
    outs = list(out) if isinstance(out, (list, tuple)) else [out]
    if len(outs) != len(specs):
        raise error("E6009", f"@{name} has {len(specs)} result(s), got {len(outs)} out array(s)")
    for i, (o, spec) in enumerate(zip(outs, specs)):
        what = f"out[{i}]" if len(specs) > 1 else "out"
        if not isinstance(o, np.ndarray):
            raise error("E6009", f"{what} of @{name} must be a numpy array, got {type(o).__name__}")
        if o.dtype != np.dtype(spec.dtype) or o.shape != tuple(spec.shape):
            raise error("E6009", f"{what} of @{name} must have dtype {np.dtype(spec.dtype)} and shape "
                                 f"{tuple(spec.shape)}, got {o.dtype} {o.shape}")
        if not (o.flags.c_contiguous and o.flags.writeable):
            raise error("E6009", f"{what} of @{name} must be C-contiguous and writeable")
        if shares_memory(o, list(ins) + outs[:i]):
            raise error("E6009", f"{what} of @{name} overlaps an argument or another result")
    return outs


def call_runner(runner: Any, function: Function, args: Any, out: Any = None) -> list[Any]:
    """``runner(args)``, writing into ``out`` (an array, or a tuple with one per result) if given:
    in place for runners that support it (``supports_out``), else validated and copied."""
    if out is None:
        return runner(args)
    if getattr(runner, "supports_out", False):
        return runner(args, out=out)
    res = runner(args)
    outs = check_out(function.name, out, [_Spec(np.asarray(r).dtype, np.shape(r)) for r in res], [])
    for o, r in zip(outs, res):
        np.copyto(o, r)
    return outs


class _Spec:
    def __init__(self, dtype: Any, shape: tuple[int, ...]) -> None:
        self.dtype, self.shape = dtype, shape
