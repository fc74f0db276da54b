"""Compile-time reverse-mode autodiff over Core IR (gradients are ordinary IR in the 19 ops).

* ``grad_function(fn, loss_index=0, wrt=None) -> Function``: outputs of ``fn`` then the gradients.
* ``grad(fn, wrt=[...]) -> Function``: the same, the public Python API.
* ``grad_values(builder, loss, wrt) -> list[Value]``: the in-builder form for the frontend.
* ``inline_function(builder, fn, args) -> list[Value]``: emit a function's body into a builder.

The VJP rules live with their ops (``OpDef.vjp`` in ``mind.spec.ops``).
"""

from __future__ import annotations

from mind.compiler.autodiff.transform import grad, grad_function, grad_values, inline_function

__all__ = ["grad", "grad_function", "grad_values", "inline_function"]
