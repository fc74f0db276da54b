"""JAX as a MIND implementation: each Core IR op becomes its ``jax.lax`` primitive, the function is
``jax.jit``-compiled for the CPU (x64 enabled, so i64 and f64 stay what they are).

    mind conformance run --impl python:mind.conformance.adapters.jax_lax:factory \\
        --expect conformance/adapters/jax_lax.expect

Install with ``pip install 'mind-lang[conformance-jax]'``.  Mapping: broadcasting by
``broadcast_in_dim``; ``div`` → ``lax.div``; ``convert`` → ``lax.convert_element_type``;
reductions → ``lax.reduce`` with ``add``/``max`` (``or`` for bool); negative slice steps →
``lax.rev`` then ``lax.slice``; ``gather`` → ``jnp.take`` (JAX's own indexing rules);
``matmul`` → ``lax.dot_general`` at HIGHEST precision; ``conv2d`` → ``lax.conv_general_dilated``.
"""

from __future__ import annotations

import math
from typing import Any, Callable, Mapping

import numpy as np

from mind.compiler.export.common import slice_windows
from mind.conformance.adapters.common import Adapter, result_shape, walk


def _table(jax: Any) -> dict[str, Callable[..., Any]]:
    import jax.numpy as jnp
    from jax import lax

    def bc(x: Any, t: Any) -> Any:
        shape = result_shape(t)
        if tuple(x.shape) == shape:
            return x
        return lax.broadcast_in_dim(x, shape, tuple(range(len(shape) - x.ndim, len(shape))))

    def binary(f: Callable[[Any, Any], Any]) -> Callable[..., Any]:
        return lambda xs, a, t: f(bc(xs[0], t), bc(xs[1], t))

    def reduce(xs: list[Any], a: dict[str, Any], t: Any, kind: str) -> Any:
        x = xs[0]
        axes = tuple(a["axes"])
        if kind == "sum":
            r = lax.reduce(x, np.zeros((), x.dtype), lax.add, axes)
        elif x.dtype == np.bool_:
            r = lax.reduce(x, np.zeros((), x.dtype), lax.bitwise_or, axes)
        else:
            init = -math.inf if jnp.issubdtype(x.dtype, jnp.floating) else np.iinfo(x.dtype).min
            r = lax.reduce(x, np.asarray(init, x.dtype), lax.max, axes)
        return lax.reshape(r, result_shape(t))

    def slice_(xs: list[Any], a: dict[str, Any], t: Any) -> Any:
        x = xs[0]
        rev, lo, hi, st = slice_windows(tuple(x.shape), a["start"], a["step"], result_shape(t))
        if rev:
            x = lax.rev(x, rev)
        return lax.slice(x, lo, hi, st)

    def matmul(xs: list[Any], a: dict[str, Any], t: Any) -> Any:
        out = result_shape(t)
        nb = len(out) - 2
        lhs = bc(xs[0], _Shape(out[:-2] + tuple(xs[0].shape[-2:])))
        rhs = bc(xs[1], _Shape(out[:-2] + tuple(xs[1].shape[-2:])))
        dims = tuple(range(nb))
        return lax.dot_general(lhs, rhs, (((nb + 1,), (nb,)), (dims, dims)), precision=lax.Precision.HIGHEST)

    def conv(xs: list[Any], a: dict[str, Any], t: Any) -> Any:
        return lax.conv_general_dilated(xs[0], xs[1], tuple(a["strides"]), [tuple(p) for p in a["padding"]],
                                        tuple(a["lhs_dilation"]), tuple(a["rhs_dilation"]),
                                        ("NHWC", "HWIO", "NHWC"), precision=lax.Precision.HIGHEST)

    cmp = {"eq": lax.eq, "ne": lax.ne, "lt": lax.lt, "le": lax.le, "gt": lax.gt, "ge": lax.ge}
    return {
        "const": lambda xs, a, t: jnp.asarray(a["value"]),
        "add": binary(lax.add), "sub": binary(lax.sub), "mul": binary(lax.mul), "div": binary(lax.div),
        "exp": lambda xs, a, t: lax.exp(xs[0]), "log": lambda xs, a, t: lax.log(xs[0]),
        "compare": lambda xs, a, t: cmp[a["direction"]](bc(xs[0], t), bc(xs[1], t)),
        "select": lambda xs, a, t: lax.select(bc(xs[0], t), bc(xs[1], t), bc(xs[2], t)),
        "convert": lambda xs, a, t: lax.convert_element_type(xs[0], a["dtype"].numpy),
        "reduce_sum": lambda xs, a, t: reduce(xs, a, t, "sum"),
        "reduce_max": lambda xs, a, t: reduce(xs, a, t, "max"),
        "reshape": lambda xs, a, t: lax.reshape(xs[0], result_shape(t)),
        "transpose": lambda xs, a, t: lax.transpose(xs[0], tuple(a["permutation"])),
        "slice": slice_,
        "pad": lambda xs, a, t: lax.pad(xs[0], xs[1], [(l, h, i) for l, h, i in zip(a["lo"], a["hi"], a["interior"])]),
        "gather": lambda xs, a, t: jnp.take(xs[0], xs[1], axis=a["axis"]),
        "matmul": matmul, "conv2d": conv,
    }


class _Shape:
    def __init__(self, shape: tuple[int, ...]):
        self.shape = shape


class JaxAdapter(Adapter):

    def __init__(self) -> None:
        import jax

        jax.config.update("jax_enable_x64", True)
        jax.config.update("jax_platforms", "cpu")
        self.jax = jax
        self.name = "JAX jax.lax (XLA CPU)"
        self.version = f"jax {jax.__version__}"
        self.table = _table(jax)

    def execute(self, fn: Any, inputs: Mapping[str, np.ndarray]) -> list[Any]:
        names = [p.name for p in fn.params]
        jitted = self.jax.jit(lambda *xs: walk(fn, dict(zip(names, xs)), self.table))
        return list(jitted(*[inputs[n] for n in names]))


def factory() -> JaxAdapter:
    return JaxAdapter()
