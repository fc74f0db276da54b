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
    one array, or a tuple of arrays for several results.  ``out=`` (an array, or a tuple with one
    per result, of exactly the result's dtype and shape) receives the results instead of new arrays
    (a wrong ``out`` raises E6009), unless the function has a parameter named ``out``.  ``backend`` names a ``mind.backends`` backend ("cpu",
    "reference").
    """
    from mind.backends import compile_for
    from mind.ir.core import Module
    from mind.reference.interpreter import select_function

    if isinstance(source_or_module, Module):
        module = source_or_module
    else:
        from mind.compiler.frontend.cache import compile_cached  # memory + disk cache of the frontend

        module = compile_cached(source_or_module, "<mind.compile>")
    function = select_function(module, fn)
    runner = compile_for(function, backend, **options)

    out_is_param = any(p.name == "out" for p in function.params)

    def call(*args: Any, out: Any = None, **kwargs: Any) -> Any:
        if out_is_param and out is not None:  # a parameter named `out` keeps its keyword
            kwargs["out"], out = out, None
        call_args = kwargs if kwargs and not args else list(args)
        if out is None:
            results = runner(call_args)
        else:
            from mind.backends import call_runner
            results = call_runner(runner, function, call_args, out)
        return results[0] if len(results) == 1 else tuple(results)

    call.function = function  # type: ignore[attr-defined]
    return call
