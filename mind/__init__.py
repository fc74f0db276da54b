"""MIND: a formally specified tensor language.

Importing ``mind`` is cheap: MLIR, sympy and z3 are imported only by the parts that need them.
This package's ``compile`` is the one front door of the Python API, a layer above the compiler (it
runs the frontend) like the CLI (``docs/architecture.md``).

    >>> import mind
    >>> f = mind.compile("fn main(x: Tensor<f32, [2]>) -> Tensor<f32, [2]> { relu(x) }", backend="reference")
    >>> f(np.array([-1.0, 2.0], np.float32))
"""

from __future__ import annotations

from typing import Any, Callable

from mind.version import __version__

__all__ = ["__version__", "compile"]


def compile(source_or_module: Any, backend: str = "cpu", *, fn: str | None = None,
            **options: Any) -> Callable[..., Any]:
    """Compile a program and return a callable on NumPy arrays.

    ``source_or_module``: MIND source text, Core IR text (``func @...``), a Core IR ``Module`` or a
    ``Function``; ``fn`` chooses the function of a module (default ``main``, or the only one).
    ``backend`` names a ``mind.backends`` backend ("cpu", "reference"); ``options`` are that
    backend's (the cpu backend's: ``docs/backend-cpu.md``), resolved once, here.

    The callable takes the function's parameters positionally (NumPy arrays, or objects with
    ``__dlpack__``) or by name as keywords, and returns one array, or a tuple of arrays for several
    results.  ``out=`` (an array, or a tuple with one per result, of exactly the result's dtype and
    shape) receives the results instead of new arrays (a wrong ``out`` raises E6009), unless the
    function has a parameter named ``out``.
    """
    import numpy as np

    from mind.backends import call_runner, compile_for

    function = _function_of(source_or_module, fn)
    runner = compile_for(function, backend, **options)
    single = len(function.results) == 1
    out_is_param = any(p.name == "out" for p in function.params)

    ndarray = np.ndarray

    def call(*args: Any, out: Any = None, **kwargs: Any) -> Any:
        if out_is_param and out is not None:  # a parameter named `out` keeps its keyword
            kwargs["out"], out = out, None
        if kwargs:
            if args:
                raise TypeError("pass arguments either positionally or by name")
            given: Any = kwargs
        else:
            given = args
            for a in args:  # NumPy arrays, the common case, pass as they are
                if type(a) is not ndarray:
                    given = [_from_dlpack(a, np) for a in args]
                    break
        results = runner(given) if out is None else call_runner(runner, function, given, out)
        return results[0] if single else tuple(results)

    call.function = function  # type: ignore[attr-defined]
    call.__name__ = function.name
    return call


def _function_of(source_or_module: Any, fn: str | None) -> Any:
    from mind.calling import select_function
    from mind.ir.core import Function, Module

    if isinstance(source_or_module, Function):
        return source_or_module
    if isinstance(source_or_module, Module):
        return select_function(source_or_module, fn)
    if isinstance(source_or_module, str) and source_or_module.lstrip().startswith("func "):
        from mind.ir.parser import parse_module
        from mind.ir.verify import verify_module

        module = parse_module(source_or_module, "<mind.compile>")
        verify_module(module)
        return select_function(module, fn)
    if isinstance(source_or_module, (str, bytes)):
        from mind.compiler.frontend.cache import compile_cached  # memory + disk cache of the frontend

        return select_function(compile_cached(source_or_module, "<mind.compile>"), fn)
    raise TypeError(f"cannot compile a {type(source_or_module).__name__}: give MIND source, Core IR text, "
                    "a Module or a Function")


def _on_gpu(a: Any) -> bool:
    if hasattr(a, "__cuda_array_interface__"):
        return True
    try:
        return a.__dlpack_device__()[0] == 2  # kDLCUDA
    except Exception:  # noqa: BLE001 - no (usable) DLPack device: not a GPU array
        return False


def _from_dlpack(a: Any, np: Any) -> Any:
    """A NumPy view of a DLPack tensor (torch, jax, cupy on the host); anything else as it is, and so
    is an array on a GPU (``__cuda_array_interface__``, a CUDA DLPack device), which the cuda backend
    uses where it is."""
    if type(a) is not np.ndarray and hasattr(a, "__dlpack__") and not _on_gpu(a):
        try:
            return np.from_dlpack(a)
        except Exception:  # noqa: BLE001 - fall back to the array protocol
            return np.asarray(a)
    return a
