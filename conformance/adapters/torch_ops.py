"""PyTorch as a MIND implementation: each Core IR op becomes its eager ``torch`` operator on CPU.

    mind conformance run --impl python:mind.conformance.adapters.torch_ops:factory \\
        --expect conformance/adapters/torch_ops.expect

Install with ``pip install 'mind-lang[conformance-torch]'``.  Mapping: ``add``/``sub``/``mul`` →
``torch.add``/``sub``/``mul`` (PyTorch broadcasting); ``div`` → ``torch.div`` (``rounding_mode =
"trunc"`` on integers); ``convert`` → ``Tensor.to``; ``reduce_sum`` → ``torch.sum`` (an empty axis
list is the identity); ``reduce_max`` → ``torch.amax``; negative slice steps → ``torch.flip`` then a
strided slice; ``pad`` → scatter into a tensor filled with the value; ``gather`` →
``torch.index_select``; ``matmul`` → ``torch.matmul``; ``conv2d`` → ``torch.nn.functional.conv2d``
(NCHW, input dilation by scattering into zeros, ``padding`` applied with ``F.pad``).
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

import numpy as np

from mind.compiler.export.common import slice_windows
from mind.conformance.adapters.common import Adapter, result_shape, walk


def _table(torch: Any) -> dict[str, Callable[..., Any]]:
    F = torch.nn.functional
    tdt = {"bool": torch.bool, "i32": torch.int32, "i64": torch.int64, "f32": torch.float32, "f64": torch.float64}

    def div(xs: list[Any], a: dict[str, Any], t: Any) -> Any:
        if xs[0].is_floating_point():
            return torch.div(xs[0], xs[1])
        return torch.div(xs[0], xs[1], rounding_mode="trunc")

    def reduce_sum(xs: list[Any], a: dict[str, Any], t: Any) -> Any:
        axes = list(a["axes"])
        if not axes:
            return xs[0].clone()
        return torch.sum(xs[0], dim=axes, keepdim=a["keepdims"], dtype=xs[0].dtype)

    def reduce_max(xs: list[Any], a: dict[str, Any], t: Any) -> Any:
        axes = list(a["axes"])
        if not axes:
            return xs[0].clone()
        return torch.amax(xs[0], dim=axes, keepdim=a["keepdims"])

    def slice_(xs: list[Any], a: dict[str, Any], t: Any) -> Any:
        x = xs[0]
        rev, lo, hi, st = slice_windows(tuple(x.shape), a["start"], a["step"], result_shape(t))
        if rev:
            x = torch.flip(x, rev)
        return x[tuple(slice(l, h, s) for l, h, s in zip(lo, hi, st))].contiguous()

    def pad(xs: list[Any], a: dict[str, Any], t: Any) -> Any:
        x, v = xs
        out = torch.full(result_shape(t), 0, dtype=x.dtype)
        out[...] = v
        index = tuple(slice(l, l + (n - 1) * (i + 1) + 1 if n else l, i + 1)
                      for n, l, i in zip(x.shape, a["lo"], a["interior"]))
        out[index] = x
        return out

    def conv(xs: list[Any], a: dict[str, Any], t: Any) -> Any:
        x = xs[0].permute(0, 3, 1, 2)
        dh, dw = a["lhs_dilation"]
        if (dh, dw) != (1, 1):
            n, c, h, w = x.shape
            big = torch.zeros((n, c, max(0, (h - 1) * dh + 1), max(0, (w - 1) * dw + 1)), dtype=x.dtype)
            big[:, :, ::dh, ::dw] = x
            x = big
        (pt, pb), (pl, pr) = a["padding"]
        x = F.pad(x, (pl, pr, pt, pb))
        w = xs[1].permute(3, 2, 0, 1)
        y = F.conv2d(x, w, stride=tuple(a["strides"]), dilation=tuple(a["rhs_dilation"]))
        return y.permute(0, 2, 3, 1).contiguous()

    cmp = {"eq": torch.eq, "ne": torch.ne, "lt": torch.lt, "le": torch.le, "gt": torch.gt, "ge": torch.ge}
    return {
        "const": lambda xs, a, t: torch.from_numpy(np.array(a["value"])),
        "add": lambda xs, a, t: torch.add(xs[0], xs[1]), "sub": lambda xs, a, t: torch.sub(xs[0], xs[1]),
        "mul": lambda xs, a, t: torch.mul(xs[0], xs[1]), "div": div,
        "exp": lambda xs, a, t: torch.exp(xs[0]), "log": lambda xs, a, t: torch.log(xs[0]),
        "compare": lambda xs, a, t: cmp[a["direction"]](xs[0], xs[1]),
        "select": lambda xs, a, t: torch.where(xs[0], xs[1], xs[2]),
        "convert": lambda xs, a, t: xs[0].to(tdt[a["dtype"].value]),
        "reduce_sum": reduce_sum, "reduce_max": reduce_max,
        "reshape": lambda xs, a, t: torch.reshape(xs[0], result_shape(t)),
        "transpose": lambda xs, a, t: xs[0].permute(tuple(a["permutation"])).contiguous(),
        "slice": slice_, "pad": pad,
        "gather": lambda xs, a, t: torch.index_select(xs[0], a["axis"], xs[1].reshape(-1).long()).reshape(result_shape(t)),
        "matmul": lambda xs, a, t: torch.matmul(xs[0], xs[1]), "conv2d": conv,
    }


class TorchAdapter(Adapter):

    def __init__(self) -> None:
        import torch

        torch.set_num_threads(1)
        self.torch = torch
        self.name = "PyTorch eager (CPU)"
        self.version = f"torch {torch.__version__}"
        self.table = _table(torch)

    def execute(self, fn: Any, inputs: Mapping[str, np.ndarray]) -> list[Any]:
        args = {k: self.torch.from_numpy(np.array(v)) for k, v in inputs.items()}
        with self.torch.no_grad():
            return [r.numpy().copy() for r in walk(fn, args, self.table)]


def factory() -> TorchAdapter:
    return TorchAdapter()
