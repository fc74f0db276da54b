"""MIND: a formally specified tensor language.

Importing ``mind`` is cheap: MLIR, sympy and z3 are imported only by the parts that need them.

    >>> import mind
    >>> f = mind.compile("fn main(x: Tensor<f32, [2]>) -> Tensor<f32, [2]> { relu(x) }", backend="reference")
    >>> f(np.array([-1.0, 2.0], np.float32))
"""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"

__all__ = ["__version__", "compile"]


def compile(source_or_module: Any, backend: str = "cpu", *, fn: str | None = None, **options: Any):
    """Compile MIND source text (or a Core IR ``Module``) and return a callable on NumPy arrays.

    The callable takes the function's parameters positionally (or by name as keywords) and returns
    one array, or a tuple of arrays for several results.  ``backend`` names a ``mind.backends``
    backend ("cpu", "reference").
    """
    from mind.backends import compile_for
    from mind.ir.core import Module
    from mind.reference.interpreter import select_function

    if isinstance(source_or_module, Module):
        module = source_or_module
    else:
        from mind.compiler.frontend.api import compile_source

        module = compile_source(source_or_module, "<mind.compile>")
    function = select_function(module, fn)
    runner = compile_for(function, backend, **options)

    def call(*args: Any, **kwargs: Any) -> Any:
        results = runner(kwargs if kwargs and not args else list(args))
        return results[0] if len(results) == 1 else tuple(results)

    call.function = function  # type: ignore[attr-defined]
    return call
