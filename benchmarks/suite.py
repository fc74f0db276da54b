"""The workload suite: MIND's CPU backend on everyday programs vs numpy, torch eager, torch.compile, jax.jit.

    python benchmarks/suite.py                   # every workload; writes benchmarks/results/suite.json
    python benchmarks/suite.py --quick           # shorter timing budget (does not write the results file)
    python benchmarks/suite.py --only softmax    # the workloads whose name contains a word (no file)
    python benchmarks/suite.py --name suite-baseline   # writes benchmarks/results/suite-baseline.json
    python benchmarks/suite.py --isa x86-64-v3   # AVX2 code everywhere; writes suite-x86-64-v3.json
    python benchmarks/suite.py --holdout random  # held-out programs at shapes drawn from a new seed
                                                 # (printed; --holdout SEED repeats a draw); writes suite-holdout.json

Each *kind* of program (elementwise chains, elementwise ops with operands broadcast per row or per
channel, row and column reductions, softmax / log-softmax, layer and RMS norm, attention, 2-D and
batched matmul, conv2d by stride, dilation, padding and channels, transposes, pads, gather, an MLP
and a small CNN forward and train step; f32 and f64) runs at two sizes: ``S``, whose operands fit in
one core's L2 (2 MiB here), and ``L``, whose operands do not. The shapes are chosen as a user would
write them (odd and aligned), not for MIND.

Everything runs in this one process, at the same thread count (the CPU count: numpy's OpenBLAS,
torch's intra-op pool and XLA use every core by default; MIND chooses its own threads, at most the CPU
count).  Per workload: MIND's cold compile (an empty ``MIND_CACHE_DIR``, MLIR and LLVM already
imported, source -> first result) and ``jax.jit``'s cold first call (tracing + XLA compile + run, jax
already imported), both in this process (``cold``, ``jax cold``: each after the previous workloads'
compiles, so both compilers are warmed up) and in fresh processes (``cold new``, ``jax new``: a
user's first run of a new program, imports excluded, as ``benchmarks/cpu.py``'s *cold*); then the
median per-call time of each implementation (outputs allocated by the call, as a user calls them),
sampled in rounds that take the implementations in turn (``interleaved_medians``), so that a shared
machine's changing load falls on all of them alike.  Each result is checked against numpy's (or torch's, for the train steps).

The machine's limits are measured in the same run: the streaming copy bandwidth (the best of numpy's
and torch's copy of 64 MiB: read + write bytes per second) and the GEMM peak (the best of numpy, torch
and MIND on a 1024^3 f32 matmul).  Each workload's achieved rate is its compulsory traffic (every
input read once, every output written once) per second for the memory-bound ones, or its flops per
second for the compute-bound ones, as a share of the matching limit.  The table says which ISA the
host has (``cpu.host.cpu_flags``), the ISA the run targets, and the load average before and after.

``--isa x86-64-v3`` measures an AVX2 host on an AVX-512 one: MIND compiles with ``cpu="x86-64-v3"``
(AVX2 tiles, the x86-64-v3 GEMM) and every peer is held to AVX2 by its own switch (``ISA_ENV``), set
before numpy or any peer is imported.  ``--isa host`` (the default) lets each use the host's best.

Ratios are peer time / MIND time (> 1: MIND is faster); the last rows give their geometric means.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from typing import Any, Callable

ISA_ENV: dict[str, dict[str, str]] = {
    "host": {},
    "x86-64-v3": {
        "OPENBLAS_CORETYPE": "Haswell",         # numpy's OpenBLAS: its AVX2 kernels
        "ATEN_CPU_CAPABILITY": "avx2",          # torch's vectorized ATen kernels
        "ONEDNN_MAX_CPU_ISA": "AVX2",           # torch's oneDNN (convolutions)
        "MKL_ENABLE_INSTRUCTIONS": "AVX2",      # torch's MKL (GEMM)
        "XLA_FLAGS": "--xla_cpu_max_isa=AVX2",  # jax's XLA
    },
}
"""The environment that holds the peers to one ISA (``--isa``): read by the libraries as they load."""


def _arguments(argv: list[str]) -> argparse.Namespace:
    """The command line (the module docstring's); read when the file runs as a script, before numpy
    loads, since ``--isa`` sets the peers' environment."""
    p = argparse.ArgumentParser(prog="benchmarks/suite.py", description=__doc__.split("\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog=__doc__.split("\n\n")[1])
    p.add_argument("--quick", action="store_true", help="a shorter timing budget; writes no results file")
    p.add_argument("--only", metavar="WORD", help="the workloads whose name contains WORD; writes no results file")
    p.add_argument("--name", help="the results file's name (benchmarks/results/NAME.json)")
    p.add_argument("--isa", default="host", choices=list(ISA_ENV), help="the ISA MIND and every peer are held to")
    p.add_argument("--holdout", metavar="SEED", help="held-out programs drawn from SEED (a non-negative integer, "
                   "or 'random' for a new one, printed)")
    p.add_argument("--child-cold", nargs=2, metavar=("WORKLOAD", "IMPL"), help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.holdout == "random":
        a.holdout = str(int.from_bytes(os.urandom(3), "little"))
    if a.holdout is not None and not a.holdout.isdigit():
        p.error("--holdout: a non-negative integer seed, or 'random'")
    return a


ARGS = _arguments(sys.argv[1:]) if __name__ == "__main__" else _arguments([])
ISA: str = ARGS.isa
HOLDOUT: str | None = ARGS.holdout
"""The seed of the held-out set (``--holdout SEED``; ``random`` draws one), or None for the suite."""
os.environ.update(ISA_ENV[ISA])  # before numpy: OpenBLAS picks its kernels when it loads

import numpy as np  # noqa: E402 - after the ISA's environment

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

L2_BYTES = 2 << 20
EPS = 1e-5


def T(dt: str, *shape: int) -> str:
    return f"Tensor<{dt}, [{', '.join(map(str, shape))}]>"


@dataclass(frozen=True)
class Workload:
    """One program at one size: its MIND source (function ``fn``), its inputs, the same computation
    for the peers (``peer(ops, *args)`` through an ``Ops`` adapter), and its work: ``flops`` for a
    compute-bound program, else None (memory-bound: the compulsory traffic is measured from the arrays)."""

    name: str
    source: str
    fn: str
    inputs: Callable[[np.random.Generator], list[np.ndarray]]
    peer: Callable[..., Any]
    flops: float | None = None
    grad: bool = False  # a train step: numpy has no autodiff


# ------------------------------------------------------------------------------------ peer adapters

class NumpyOps:
    """The ops the peers' programs use, written with numpy (composites where numpy has no kernel)."""

    name = "numpy"

    def asarray(self, a: np.ndarray) -> Any:
        return a

    def relu(self, x): return np.maximum(x, 0)
    def sigmoid(self, x): return 1 / (1 + np.exp(-x))
    def exp(self, x): return np.exp(x)
    def sqrt(self, x): return np.sqrt(x)
    def sum(self, x, axis, keepdims=False): return x.sum(axis=axis, keepdims=keepdims)
    def mean(self, x, axis, keepdims=False): return x.mean(axis=axis, keepdims=keepdims)
    def max(self, x, axis, keepdims=False): return x.max(axis=axis, keepdims=keepdims)
    def matmul(self, a, b): return a @ b
    def swap_last(self, x): return np.swapaxes(x, -1, -2)
    def transpose(self, x): return np.ascontiguousarray(x.T)
    def pad(self, x, pads): return np.pad(x, pads)
    def take(self, x, idx): return np.take(x, idx, axis=0)
    def tanh(self, x): return np.tanh(x)
    def log(self, x): return np.log(x)
    def permute(self, x, perm): return np.ascontiguousarray(np.transpose(x, perm))
    def every_other(self, x): return np.ascontiguousarray(x[..., ::2])

    def softmax(self, x):
        e = np.exp(x - x.max(axis=-1, keepdims=True))
        return e / e.sum(axis=-1, keepdims=True)

    def log_softmax(self, x):
        m = x - x.max(axis=-1, keepdims=True)
        return m - np.log(np.exp(m).sum(axis=-1, keepdims=True))

    def conv2d(self, x, w, stride=1, padding="valid", dilation=1):
        from numpy.lib.stride_tricks import sliding_window_view
        kh, kw = w.shape[:2]
        if padding == "same":
            x = np.pad(x, [(0, 0), *(_same_pads(x.shape[1 + i], (kh, kw)[i], stride, dilation) for i in (0, 1)),
                           (0, 0)])
        span = ((kh - 1) * dilation + 1, (kw - 1) * dilation + 1)
        win = sliding_window_view(x, span, axis=(1, 2))[:, ::stride, ::stride, :, ::dilation, ::dilation]
        return np.einsum("nyxcij,ijco->nyxo", win, w, optimize=True)

    def value_and_grad(self, f, n):
        return None


def _same_pads(size: int, k: int, stride: int, dilation: int) -> tuple[int, int]:
    out = -(-size // stride)
    total = max((out - 1) * stride + (k - 1) * dilation + 1 - size, 0)
    return total // 2, total - total // 2


class TorchOps:
    name = "torch"

    def __init__(self) -> None:
        import torch
        self.t = torch
        self.F = torch.nn.functional

    def asarray(self, a: np.ndarray) -> Any:
        return self.t.from_numpy(np.ascontiguousarray(a))

    def relu(self, x): return self.t.relu(x)
    def sigmoid(self, x): return self.t.sigmoid(x)
    def exp(self, x): return self.t.exp(x)
    def sqrt(self, x): return self.t.sqrt(x)
    def sum(self, x, axis, keepdims=False): return x.sum(dim=axis, keepdim=keepdims)
    def mean(self, x, axis, keepdims=False): return x.mean(dim=axis, keepdim=keepdims)
    def max(self, x, axis, keepdims=False): return x.amax(dim=axis, keepdim=keepdims)
    def matmul(self, a, b): return a @ b
    def swap_last(self, x): return x.transpose(-1, -2)
    def transpose(self, x): return x.t().contiguous()
    def pad(self, x, pads): return self.F.pad(x, [p for pair in reversed(pads) for p in pair])
    def take(self, x, idx): return self.F.embedding(idx.long() if idx.dtype != self.t.int64 else idx, x)
    def softmax(self, x): return self.t.softmax(x, dim=-1)
    def log_softmax(self, x): return self.t.log_softmax(x, dim=-1)
    def tanh(self, x): return self.t.tanh(x)
    def log(self, x): return self.t.log(x)
    def permute(self, x, perm): return x.permute(*perm).contiguous()
    def every_other(self, x): return x[..., ::2].contiguous()

    def conv2d(self, x, w, stride=1, padding="valid", dilation=1):
        # NHWC / HWIO as MIND's: a channels-last NCHW view of x, the weight permuted (a view)
        x = x.permute(0, 3, 1, 2)
        if padding == "same":  # torch's "same" refuses strides: MIND's (and XLA's) pads, explicitly
            (top, bottom), (left, right) = (_same_pads(x.shape[2 + i], w.shape[i], stride, dilation) for i in (0, 1))
            x, padding = self.F.pad(x, [left, right, top, bottom]), "valid"
        y = self.F.conv2d(x, w.permute(3, 2, 0, 1), stride=stride, padding=padding, dilation=dilation)
        return y.permute(0, 2, 3, 1)

    def value_and_grad(self, f, n):
        return self.t.func.grad_and_value(f, argnums=tuple(range(n)))


class JaxOps:
    name = "jax"

    def __init__(self) -> None:
        import jax
        import jax.numpy as jnp
        self.jax, self.np = jax, jnp

    def asarray(self, a: np.ndarray) -> Any:
        return self.jax.device_put(a)

    def relu(self, x): return self.jax.nn.relu(x)
    def sigmoid(self, x): return self.jax.nn.sigmoid(x)
    def exp(self, x): return self.np.exp(x)
    def sqrt(self, x): return self.np.sqrt(x)
    def sum(self, x, axis, keepdims=False): return x.sum(axis=axis, keepdims=keepdims)
    def mean(self, x, axis, keepdims=False): return x.mean(axis=axis, keepdims=keepdims)
    def max(self, x, axis, keepdims=False): return x.max(axis=axis, keepdims=keepdims)
    def matmul(self, a, b): return a @ b
    def swap_last(self, x): return self.np.swapaxes(x, -1, -2)
    def transpose(self, x): return x.T
    def pad(self, x, pads): return self.np.pad(x, pads)
    def take(self, x, idx): return self.np.take(x, idx, axis=0)
    def softmax(self, x): return self.jax.nn.softmax(x, axis=-1)
    def log_softmax(self, x): return self.jax.nn.log_softmax(x, axis=-1)
    def tanh(self, x): return self.np.tanh(x)
    def log(self, x): return self.np.log(x)
    def permute(self, x, perm): return self.np.transpose(x, perm)
    def every_other(self, x): return x[..., ::2]

    def conv2d(self, x, w, stride=1, padding="valid", dilation=1):
        return self.jax.lax.conv_general_dilated(x, w, (stride, stride), padding.upper(),
                                                 rhs_dilation=(dilation, dilation),
                                                 dimension_numbers=("NHWC", "HWIO", "NHWC"))

    def value_and_grad(self, f, n):
        vg = self.jax.value_and_grad(f, argnums=tuple(range(n)))

        def swapped(*args):
            v, g = vg(*args)
            return g, v
        return swapped


# ------------------------------------------------------------------------------------ the programs

def _normal(*shape: int, dtype: Any = np.float32, scale: float = 1.0):
    dtype = {"f32": np.float32, "f64": np.float64}.get(dtype, dtype)
    return lambda rng: (rng.standard_normal(shape) * scale).astype(dtype)


def _gen(*makers):
    return lambda rng: [m(rng) for m in makers]


def elementwise(dt: str, r: int, c: int) -> Workload:
    return Workload(f"ew_chain_{dt}_{r}x{c}",
                    f"fn f(x: {T(dt, r, c)}) -> {T(dt, r, c)} {{ sigmoid(relu(x) * 2.0 + 1.0) }}", "f",
                    _gen(_normal(r, c, dtype=dt)), lambda o, x: o.sigmoid(o.relu(x) * 2.0 + 1.0))


def reduction(kind: str, dt: str, r: int, c: int) -> Workload:
    axis = {"row_sum": 1, "col_max": 0, "sum_all": None}[kind]
    op = "max" if kind == "col_max" else "sum"
    out = {1: T(dt, r), 0: T(dt, c), None: dt}[axis]
    axes = "[0, 1]" if axis is None else f"[{axis}]"
    src = f"fn f(x: {T(dt, r, c)}) -> {out} {{ {op}(x, axes={axes}, keepdims=false) }}"
    ax = (0, 1) if axis is None else axis
    return Workload(f"{kind}_{dt}_{r}x{c}", src, "f", _gen(_normal(r, c, dtype=dt)),
                    lambda o, x: getattr(o, op)(x, ax))


def softmax(kind: str, dt: str, r: int, c: int) -> Workload:
    return Workload(f"{kind}_{dt}_{r}x{c}", f"fn f(x: {T(dt, r, c)}) -> {T(dt, r, c)} {{ {kind}(x, axis=-1) }}",
                    "f", _gen(_normal(r, c, dtype=dt)), lambda o, x: getattr(o, kind)(x))


LAYER_NORM = """fn f(x: {x}, g: {v}, b: {v}) -> {x} {{
  let m = mean(x, axes=[1], keepdims=true);
  let d = x - m;
  let v = mean(d * d, axes=[1], keepdims=true);
  d / sqrt(v + {eps}) * g + b
}}"""
RMS_NORM = """fn f(x: {x}, g: {v}) -> {x} {{
  x / sqrt(mean(x * x, axes=[1], keepdims=true) + {eps}) * g
}}"""


def _layer_norm(o, x, g, b):
    d = x - o.mean(x, 1, keepdims=True)
    return d / o.sqrt(o.mean(d * d, 1, keepdims=True) + EPS) * g + b


def layer_norm(r: int, c: int) -> Workload:
    return Workload(f"layer_norm_f32_{r}x{c}", LAYER_NORM.format(x=T("f32", r, c), v=T("f32", c), eps=EPS), "f",
                    _gen(_normal(r, c), _normal(c), _normal(c)), _layer_norm)


def rms_norm(r: int, c: int) -> Workload:
    return Workload(f"rms_norm_f32_{r}x{c}", RMS_NORM.format(x=T("f32", r, c), v=T("f32", c), eps=EPS), "f",
                    _gen(_normal(r, c), _normal(c)),
                    lambda o, x, g: x / o.sqrt(o.mean(x * x, 1, keepdims=True) + EPS) * g)


def attention(bh: int, s: int, d: int) -> Workload:
    t = T("f32", bh, s, d)
    scale = 1.0 / math.sqrt(d)
    src = (f"fn f(q: {t}, k: {t}, v: {t}) -> {t} {{\n"
           f"  let s = matmul(q, transpose(k, permutation=[0, 2, 1])) * {scale!r};\n"
           f"  matmul(softmax(s, axis=-1), v)\n}}")
    return Workload(f"attention_f32_{bh}x{s}x{d}", src, "f", _gen(*[_normal(bh, s, d)] * 3),
                    lambda o, q, k, v: o.matmul(o.softmax(o.matmul(q, o.swap_last(k)) * scale), v),
                    flops=4.0 * bh * s * s * d)


def matmul(dt: str, m: int, k: int, n: int, batch: tuple[int, ...] = (), rhs_batch: bool = True) -> Workload:
    a, b = (*batch, m, k), ((*batch, k, n) if rhs_batch else (k, n))
    out = (*batch, m, n)
    tag = ("bmm" if rhs_batch else "bmm_bcast") if batch else "matmul"
    name = f"{tag}_{dt}_{'x'.join(map(str, (*batch, m, k, n)))}"
    return Workload(name, f"fn f(a: {T(dt, *a)}, b: {T(dt, *b)}) -> {T(dt, *out)} {{ matmul(a, b) }}", "f",
                    _gen(_normal(*a, dtype=dt), _normal(*b, dtype=dt)), lambda o, x, y: o.matmul(x, y),
                    flops=2.0 * math.prod(batch) * m * k * n)


def conv(n: int, h: int, ci: int, co: int, k: int, stride: int = 1, padding: str = "valid",
         dilation: int = 1) -> Workload:
    span = (k - 1) * dilation + 1
    oh = -(-h // stride) if padding == "same" else (h - span) // stride + 1
    xs, ws, ys = (n, h, h, ci), (k, k, ci, co), (n, oh, oh, co)
    src = (f"fn f(x: {T('f32', *xs)}, w: {T('f32', *ws)}) -> {T('f32', *ys)} {{ "
           f"conv2d(x, w, strides=[{stride}, {stride}], padding=\"{padding}\", dilation=[{dilation}, {dilation}]) }}")
    name = f"conv{k}x{k}_s{stride}_d{dilation}_{padding}_{n}x{h}x{h}x{ci}to{co}"
    return Workload(name, src, "f", _gen(_normal(*xs), _normal(*ws, scale=0.1)),
                    lambda o, x, w: o.conv2d(x, w, stride, padding, dilation),
                    flops=2.0 * n * oh * oh * co * k * k * ci)


BROADCASTS = {
    "row_affine": ("(x - m) * s", lambda shape: shape[:-1] + (1,)),
    "channel_affine": ("x * m + s", lambda shape: shape[1:-1] + (1,)),
}
"""Elementwise ops with two operands broadcast along a unit dim: a per-row shift and scale (m and s
of [R, 1], statistics kept by the caller) and a per-channel one over [N, C, HW] (m and s of [C, 1],
a batch norm at inference)."""


def broadcast(kind: str, *shape: int) -> Workload:
    expr, operand_shape = BROADCASTS[kind]
    v = operand_shape(shape)
    src = f"fn f(x: {T('f32', *shape)}, m: {T('f32', *v)}, s: {T('f32', *v)}) -> {T('f32', *shape)} {{ {expr} }}"
    peer = (lambda o, x, m, s: (x - m) * s) if kind == "row_affine" else (lambda o, x, m, s: x * m + s)
    return Workload(f"{kind}_f32_{'x'.join(map(str, shape))}", src, "f",
                    _gen(_normal(*shape), _normal(*v), _normal(*v)), peer)


def transpose(r: int, c: int) -> Workload:
    return Workload(f"transpose_f32_{r}x{c}", f"fn f(x: {T('f32', r, c)}) -> {T('f32', c, r)} {{ transpose(x) }}",
                    "f", _gen(_normal(r, c)), lambda o, x: o.transpose(x))


def pad(r: int, c: int, p: int) -> Workload:
    src = (f"fn f(x: {T('f32', r, c)}) -> {T('f32', r + 2 * p, c + 2 * p)} {{ "
           f"pad(x, pads=[[{p}, {p}], [{p}, {p}]]) }}")
    return Workload(f"pad_f32_{r}x{c}_by{p}", src, "f", _gen(_normal(r, c)), lambda o, x: o.pad(x, [(p, p), (p, p)]))


def gather(rows: int, dim: int, n: int) -> Workload:
    src = f"fn f(t: {T('f32', rows, dim)}, i: {T('i32', n)}) -> {T('f32', n, dim)} {{ gather(t, i, axis=0) }}"
    return Workload(f"embedding_f32_{rows}x{dim}_take{n}", src, "f",
                    _gen(_normal(rows, dim), lambda rng: rng.integers(0, rows, n).astype(np.int32)),
                    lambda o, t, i: o.take(t, i))


MLP_FWD = """fn f(x: {x}, w1: {w1}, b1: {b1}, w2: {w2}, b2: {b2}) -> {y} {{
  matmul(relu(matmul(x, w1) + b1), w2) + b2
}}"""
from programs import MLP_TRAIN  # noqa: E402 - shared with benchmarks/cuda.py


def _onehot(b: int, classes: int):
    def make(rng):
        y = np.zeros((b, classes), np.float32)
        y[np.arange(b), rng.integers(0, classes, b)] = 1
        return y
    return make


def _train(o, loss, params, *data):
    step = o.value_and_grad(lambda *p: loss(o, *data, *p), len(params))
    grads, value = step(*params)
    return (value, *(p - 0.01 * g for p, g in zip(params, grads)))


def _mlp_loss(o, x, y, w1, b1, w2, b2):
    hp = o.matmul(x, w1) + b1
    d = hp - o.mean(hp, 1, keepdims=True)
    h = o.relu(d / o.sqrt(o.mean(d * d, 1, keepdims=True) + EPS))
    return o.mean(-o.sum(y * o.log_softmax(o.matmul(h, w2) + b2), 1), 0)


def mlp(b: int, d: int, hidden: int, classes: int, train: bool) -> Workload:
    shapes = {"x": T("f32", b, d), "w1": T("f32", d, hidden), "b1": T("f32", hidden), "w2": T("f32", hidden, classes),
              "b2": T("f32", classes), "y": T("f32", b, classes), "eps": EPS}
    params = [_normal(d, hidden, scale=d ** -0.5), _normal(hidden), _normal(hidden, classes, scale=hidden ** -0.5),
              _normal(classes)]
    fl = 2.0 * b * (d * hidden + hidden * classes)
    if train:
        return Workload(f"mlp_train_f32_{b}x{d}x{hidden}", MLP_TRAIN.format(**shapes), "train_step",
                        _gen(_normal(b, d), _onehot(b, classes), *params),
                        lambda o, x, y, *p: _train(o, _mlp_loss, p, x, y), flops=3 * fl, grad=True)
    return Workload(f"mlp_fwd_f32_{b}x{d}x{hidden}", MLP_FWD.format(**shapes), "f", _gen(_normal(b, d), *params),
                    lambda o, x, w1, b1, w2, b2: o.matmul(o.relu(o.matmul(x, w1) + b1), w2) + b2, flops=fl)


CNN_BODY = """  let h1 = relu(conv2d(x, k1, padding="same") + c1);
  let h2 = relu(conv2d(h1, k2, strides=[2, 2], padding="same") + c2);
  let logits = matmul(mean(h2, axes=[1, 2], keepdims=false), w) + b;"""
CNN_FWD = "fn f(x: {x}, k1: {k1}, c1: {c1}, k2: {k2}, c2: {c2}, w: {w}, b: {b}) -> {l} {{\n" + CNN_BODY + "\n  logits\n}}"
CNN_TRAIN = ("fn loss(x: {x}, y: {l}, k1: {k1}, c1: {c1}, k2: {k2}, c2: {c2}, w: {w}, b: {b}) -> f32 {{\n" + CNN_BODY +
             "\n  mean(-sum(y * log_softmax(logits, axis=-1), axes=[1], keepdims=false), axes=[0], keepdims=false)\n}}\n"
             "fn train_step(x: {x}, y: {l}, k1: {k1}, c1: {c1}, k2: {k2}, c2: {c2}, w: {w}, b: {b})"
             " -> (f32, {k1}, {c1}, {k2}, {c2}, {w}, {b}) {{\n"
             "  let l = loss(x, y, k1, c1, k2, c2, w, b);\n"
             "  let (g1, gc1, g2, gc2, gw, gb) = grad(l, wrt=[k1, c1, k2, c2, w, b]);\n"
             "  (l, k1 - 0.01 * g1, c1 - 0.01 * gc1, k2 - 0.01 * g2, c2 - 0.01 * gc2, w - 0.01 * gw, b - 0.01 * gb)\n}}")


def _cnn_logits(o, x, k1, c1, k2, c2, w, b):
    h1 = o.relu(o.conv2d(x, k1, 1, "same") + c1)
    h2 = o.relu(o.conv2d(h1, k2, 2, "same") + c2)
    return o.matmul(o.mean(h2, (1, 2)), w) + b


def _cnn_loss(o, x, y, *p):
    return o.mean(-o.sum(y * o.log_softmax(_cnn_logits(o, x, *p)), 1), 0)


def cnn(n: int, h: int, c1: int, c2: int, train: bool, classes: int = 10) -> Workload:
    shapes = {"x": T("f32", n, h, h, 3), "k1": T("f32", 3, 3, 3, c1), "c1": T("f32", c1), "k2": T("f32", 3, 3, c1, c2),
              "c2": T("f32", c2), "w": T("f32", c2, classes), "b": T("f32", classes), "l": T("f32", n, classes)}
    params = [_normal(3, 3, 3, c1, scale=0.2), _normal(c1, scale=0.1), _normal(3, 3, c1, c2, scale=(9 * c1) ** -0.5),
              _normal(c2, scale=0.1), _normal(c2, classes, scale=c2 ** -0.5), _normal(classes)]
    fl = 2.0 * n * h * h * (9 * 3 * c1 + 9 * c1 * c2 / 4)
    if train:
        return Workload(f"cnn_train_f32_{n}x{h}x{h}_{c1}_{c2}", CNN_TRAIN.format(**shapes), "train_step",
                        _gen(_normal(n, h, h, 3), _onehot(n, classes), *params),
                        lambda o, x, y, *p: _train(o, _cnn_loss, p, x, y), flops=3 * fl, grad=True)
    return Workload(f"cnn_fwd_f32_{n}x{h}x{h}_{c1}_{c2}", CNN_FWD.format(**shapes), "f",
                    _gen(_normal(n, h, h, 3), *params), lambda o, *a: _cnn_logits(o, *a), flops=fl)


def workloads() -> list[Workload]:
    """Every workload: each kind at a size that fits in L2 (first) and one that does not."""
    return [
        elementwise("f32", 256, 512), elementwise("f32", 2048, 2048),
        elementwise("f64", 128, 512), elementwise("f64", 1500, 1500),
        reduction("row_sum", "f32", 256, 500), reduction("row_sum", "f32", 4096, 1024),
        reduction("col_max", "f32", 300, 512), reduction("col_max", "f32", 4096, 1000),
        reduction("sum_all", "f64", 480, 270), reduction("sum_all", "f64", 2048, 2048),
        softmax("softmax", "f32", 256, 512), softmax("softmax", "f32", 4096, 1000),
        softmax("log_softmax", "f32", 128, 1000), softmax("log_softmax", "f32", 8192, 512),
        softmax("softmax", "f64", 128, 384), softmax("softmax", "f64", 2048, 1024),
        layer_norm(256, 512), layer_norm(4096, 768),
        rms_norm(200, 640), rms_norm(4096, 1024),
        attention(4, 64, 64), attention(16, 384, 64),
        matmul("f32", 256, 256, 256), matmul("f32", 1024, 1024, 1024),
        matmul("f32", 200, 300, 250), matmul("f32", 700, 900, 500),
        matmul("f64", 128, 192, 128), matmul("f64", 500, 500, 500),
        matmul("f32", 64, 96, 80, batch=(8,)), matmul("f32", 256, 128, 256, batch=(32,)),
        matmul("f32", 128, 64, 128, batch=(16,), rhs_batch=False), matmul("f32", 512, 256, 256, batch=(16,), rhs_batch=False),
        conv(1, 32, 8, 16, 3, 1, "same"), conv(4, 112, 16, 32, 3, 1, "same"),
        conv(1, 16, 64, 128, 3, 2, "valid"), conv(8, 56, 64, 128, 3, 2, "valid"),
        conv(1, 32, 16, 16, 3, 1, "same", 2), conv(4, 64, 32, 32, 3, 1, "same", 2),
        conv(1, 28, 64, 64, 1), conv(8, 56, 64, 256, 1),
        broadcast("row_affine", 256, 500), broadcast("row_affine", 4096, 1000),
        broadcast("channel_affine", 4, 32, 1000), broadcast("channel_affine", 16, 64, 1024),
        transpose(256, 512), transpose(2048, 2048),
        pad(256, 500, 1), pad(2000, 2000, 3),
        gather(1000, 64, 512), gather(50000, 256, 8192),
        mlp(32, 784, 256, 10, False), mlp(1024, 784, 1024, 10, False),
        mlp(32, 256, 128, 10, True), mlp(512, 784, 512, 10, True),
        cnn(2, 16, 8, 16, False), cnn(48, 64, 16, 32, False),
        cnn(2, 16, 8, 16, True), cnn(48, 64, 16, 32, True),
    ]


# ------------------------------------------------------------------------------------ held-out programs

class Shapes:
    """Shapes drawn for the held-out set: sizes log-uniform between two element counts, so that one seed
    gives operands from L1-sized to DRAM-sized, with odd extents as often as aligned ones."""

    def __init__(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)

    def extent(self, lo: int, hi: int) -> int:
        """An extent in [lo, hi], log-uniform; half of the time rounded to a multiple of 16."""
        v = int(round(math.exp(self.rng.uniform(math.log(lo), math.log(hi)))))
        if self.rng.random() < 0.5 and v >= 32:
            v = v // 16 * 16
        return max(lo, min(hi, v))

    def matrix(self, lo: int = 1 << 14, hi: int = 1 << 23, min_cols: int = 8) -> tuple[int, int]:
        """Rows and columns of a matrix of lo..hi elements."""
        total = self.extent(lo, hi)
        cols = self.extent(min_cols, max(min_cols, min(4096, total // 8)))
        return max(1, total // cols), cols

    def cube(self, lo: int = 1 << 14, hi: int = 1 << 23) -> tuple[int, int, int]:
        """Three extents of a tensor of lo..hi elements."""
        total = self.extent(lo, hi)
        c = self.extent(3, min(2048, max(3, total // 64)))
        b = self.extent(2, max(2, min(1024, total // c // 2)))
        return max(1, total // (b * c)), b, c


GELU = "0.5 * x * (1.0 + tanh(0.7978845608 * (x + 0.044715 * x * x * x)))"
LAYER_NORM_GAINLESS = """fn f(x: {x}) -> {x} {{
  let d = x - mean(x, axes=[1], keepdims=true);
  d / sqrt(mean(d * d, axes=[1], keepdims=true) + {eps})
}}"""


def _gelu(o, x):
    return 0.5 * x * (1.0 + o.tanh(0.7978845608 * (x + 0.044715 * x * x * x)))


def _logsumexp(o, x):
    m = o.max(x, 1, keepdims=True)
    return m + o.log(o.sum(o.exp(x - m), 1, keepdims=True))


def selected() -> list[Workload]:
    """The workloads of this run: the suite, or the held-out set of ``--holdout``'s seed."""
    return workloads() if HOLDOUT is None else holdout(int(HOLDOUT))


def holdout(seed: int) -> list[Workload]:
    """Programs the suite does not have, at shapes drawn from ``seed`` (``--holdout SEED``): the
    compiler is measured on what it was not tuned on.  Each kind is written as a user would (the
    builtins), and its shape is new for every seed."""
    sh = Shapes(seed)
    out: list[Workload] = []
    r, c = sh.matrix()
    out.append(Workload(f"gelu_f32_{r}x{c}", f"fn f(x: {T('f32', r, c)}) -> {T('f32', r, c)} {{ {GELU} }}", "f",
                        _gen(_normal(r, c)), _gelu))
    a, b, c = sh.cube()
    out.append(Workload(f"mean_mid_f32_{a}x{b}x{c}",
                        f"fn f(x: {T('f32', a, b, c)}) -> {T('f32', a, c)} {{ mean(x, axes=[1], keepdims=false) }}",
                        "f", _gen(_normal(a, b, c)), lambda o, x: o.mean(x, 1)))
    a, b, c = sh.cube()
    out.append(Workload(f"max_last_f64_{a}x{b}x{c}",
                        f"fn f(x: {T('f64', a, b, c)}) -> {T('f64', a, b)} {{ max(x, axes=[2], keepdims=false) }}",
                        "f", _gen(_normal(a, b, c, dtype="f64")), lambda o, x: o.max(x, 2)))
    r, c = sh.matrix()
    out.append(Workload(f"col_sum_f32_{r}x{c}",
                        f"fn f(x: {T('f32', r, c)}) -> {T('f32', c)} {{ sum(x, axes=[0], keepdims=false) }}",
                        "f", _gen(_normal(r, c)), lambda o, x: o.sum(x, 0)))
    a, b, c = sh.cube()
    out.append(Workload(f"softmax3d_f32_{a}x{b}x{c}",
                        f"fn f(x: {T('f32', a, b, c)}) -> {T('f32', a, b, c)} {{ softmax(x, axis=-1) }}", "f",
                        _gen(_normal(a, b, c)), lambda o, x: o.softmax(x)))
    r, c = sh.matrix(min_cols=32)
    out.append(Workload(f"logsumexp_f32_{r}x{c}",
                        f"fn f(x: {T('f32', r, c)}) -> {T('f32', r, 1)} {{\n"
                        f"  let m = max(x, axes=[1], keepdims=true);\n"
                        f"  m + log(sum(exp(x - m), axes=[1], keepdims=true))\n}}", "f",
                        _gen(_normal(r, c)), _logsumexp))
    r, c = sh.matrix(min_cols=32)
    out.append(Workload(f"layer_norm_f64_{r}x{c}", LAYER_NORM_GAINLESS.format(x=T("f64", r, c), eps=EPS), "f",
                        _gen(_normal(r, c, dtype="f64")),
                        lambda o, x: (x - o.mean(x, 1, True)) / o.sqrt(
                            o.mean((x - o.mean(x, 1, True)) ** 2, 1, True) + EPS)))
    m, k, n = sh.extent(16, 1024), sh.extent(16, 1024), sh.extent(16, 1024)
    out.append(Workload(f"matmul_tn_f32_{m}x{k}x{n}",
                        f"fn f(a: {T('f32', k, m)}, b: {T('f32', k, n)}) -> {T('f32', m, n)} "
                        f"{{ matmul(transpose(a), b) }}", "f", _gen(_normal(k, m), _normal(k, n)),
                        lambda o, x, y: o.matmul(o.swap_last(x), y), flops=2.0 * m * k * n))
    m, k, n = sh.extent(16, 700), sh.extent(16, 700), sh.extent(16, 700)
    out.append(matmul("f64", m, k, n))
    bh, s, d = sh.extent(1, 16), sh.extent(17, 400), sh.extent(16, 128)
    out.append(attention(bh, s, d))
    out.append(matmul("f32", sh.extent(16, 300), sh.extent(16, 300), sh.extent(16, 300),
                      batch=(sh.extent(2, 48),)))
    out.append(conv(sh.extent(1, 16), sh.extent(31, 129), 3, sh.extent(8, 64), 7, 2, "same"))
    out.append(conv(sh.extent(1, 8), sh.extent(7, 33), sh.extent(64, 512), sh.extent(64, 512), 1))
    out.append(conv(sh.extent(1, 8), sh.extent(17, 65), sh.extent(8, 64), sh.extent(8, 64), 3, 2, "valid", 2))
    out.append(conv(sh.extent(1, 8), sh.extent(9, 65), sh.extent(4, 48), sh.extent(4, 48), 5, 1, "same"))
    r, c = sh.matrix(min_cols=16)
    c += c % 2
    out.append(Workload(f"every_other_f32_{r}x{c}",
                        f"fn f(x: {T('f32', r, c)}) -> {T('f32', r, c // 2)} {{ slice_stride(x, 1, 0, {c}, 2) }}",
                        "f", _gen(_normal(r, c)), lambda o, x: o.every_other(x)))
    a, b, c = sh.cube()
    out.append(Workload(f"transpose021_f32_{a}x{b}x{c}",
                        f"fn f(x: {T('f32', a, b, c)}) -> {T('f32', a, c, b)} "
                        f"{{ transpose(x, permutation=[0, 2, 1]) }}", "f", _gen(_normal(a, b, c)),
                        lambda o, x: o.permute(x, (0, 2, 1))))
    a, b, c = sh.cube()
    pads = [[0, 0], [1, 2], [3, 0]]
    out.append(Workload(f"pad3d_f32_{a}x{b}x{c}",
                        f"fn f(x: {T('f32', a, b, c)}) -> {T('f32', a, b + 3, c + 3)} {{ pad(x, pads={pads}) }}",
                        "f", _gen(_normal(a, b, c)), lambda o, x: o.pad(x, [tuple(p) for p in pads])))
    out.append(gather(sh.extent(100, 100000), sh.extent(8, 300), sh.extent(16, 8192)))
    out.append(mlp(sh.extent(8, 512), sh.extent(16, 1024), sh.extent(16, 1024), sh.extent(2, 100), True))
    # drawn last, so that a seed's earlier programs are those it drew before these were added
    out.append(broadcast("row_affine", *sh.matrix()))
    out.append(broadcast("channel_affine", *sh.cube()))
    return out


# ------------------------------------------------------------------------------------ measuring

def sample_median(f: Callable[[], Any], budget: float, min_reps: int = 5) -> float:
    f()
    times: list[float] = []
    start = time.perf_counter()
    while len(times) < min_reps or (time.perf_counter() - start < budget and len(times) < 5000):
        t0 = time.perf_counter()
        f()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


ROUNDS = 5
"""Rounds of ``interleaved_medians``: each implementation is timed in every round, in turn."""

SETTLE_S = 0.05
"""The pause before each implementation's turn, and one untimed call: the thread pools of the one
before (OpenBLAS's, torch's, XLA's, MIND's OpenMP) spin-wait for work a while after their last call,
and on a machine with few cores they would take the next one's cores."""


def interleaved_medians(calls: dict[str, Callable[[], Any]], budget: float, rounds: int = ROUNDS) -> dict[str, float]:
    """The median per-call time of each of ``calls``, sampled in ``rounds`` rounds that take each in
    turn (``budget / rounds`` seconds each, at least one call), so that every implementation sees the
    same spells of a shared machine's load: a ratio of two medians then compares like with like
    rather than a quiet minute with a busy one."""
    times: dict[str, list[float]] = {name: [] for name in calls}
    for f in calls.values():
        f()
    for _ in range(rounds):
        for name, f in calls.items():
            time.sleep(SETTLE_S)
            f()
            start = time.perf_counter()
            while True:
                t0 = time.perf_counter()
                f()
                end = time.perf_counter()
                times[name].append(end - t0)
                if end - start >= budget / rounds or len(times[name]) >= 5000:
                    break
    return {name: statistics.median(ts) for name, ts in times.items()}


def _flat(result: Any) -> list[np.ndarray]:
    items = result if isinstance(result, (tuple, list)) else (result,)
    return [np.asarray(r.detach().numpy() if hasattr(r, "detach") else r) for r in items]


def _rel_err(got: list[np.ndarray], want: list[np.ndarray]) -> float:
    worst = 0.0
    for g, w in zip(got, want):
        g64, w64 = np.asarray(g, np.float64), np.asarray(w, np.float64)
        scale = max(float(np.max(np.abs(w64))) if w64.size else 0.0, 1e-30)
        worst = max(worst, float(np.max(np.abs(g64 - w64))) / scale if w64.size else 0.0)
    return worst


def machine_limits(budget: float, peers: dict[str, Any]) -> dict[str, float]:
    """The streaming copy bandwidth (GB/s) and the GEMM peak (GFLOP/s) of this machine, now."""
    src = np.random.default_rng(1).standard_normal(8 << 20)  # 64 MiB of f64
    dst = np.empty_like(src)
    copy = {"numpy": 2 * src.nbytes / sample_median(lambda: np.copyto(dst, src), budget) / 1e9}
    a = np.random.default_rng(2).standard_normal((1024, 1024)).astype(np.float32)
    gemm = {"numpy": 2 * 1024 ** 3 / sample_median(lambda: a @ a, budget) / 1e9}
    if "torch" in peers:
        torch = peers["torch"].t
        ts, td, ta = torch.from_numpy(src), torch.from_numpy(dst), torch.from_numpy(a)
        copy["torch"] = 2 * src.nbytes / sample_median(lambda: td.copy_(ts), budget) / 1e9
        gemm["torch"] = 2 * 1024 ** 3 / sample_median(lambda: ta @ ta, budget) / 1e9
    return {"copy_gbs": max(copy.values()), "copy_by": max(copy, key=copy.get),
            "gemm_gflops": max(gemm.values()), "gemm_by": max(gemm, key=gemm.get)}


def child_cold(name: str, impl: str) -> dict[str, float]:
    """In a fresh process: the first call of workload ``name`` through ``impl`` ("mind": an empty
    ``MIND_CACHE_DIR``, MLIR and LLVM imported first; "jax": ``jax`` imported first), compile included:
    what a user's first run of a new program costs after the imports (``benchmarks/cpu.py``'s *cold*
    and *jax cold*)."""
    w = next(w for w in selected() if w.name == name)
    arrays = w.inputs(np.random.default_rng(0))
    if impl == "mind":
        import llvmlite.binding  # noqa: F401
        import mlir.ir  # noqa: F401
        import mlir.passmanager  # noqa: F401

        import mind
        from mind.compiler.backend.cpu.api import compile_function  # noqa: F401 - imports, as cpu.py's
        from mind.compiler.frontend.cache import compile_cached  # noqa: F401
        t0 = time.perf_counter()
        mind.compile(w.source, fn=w.fn, cpu=ISA)(*arrays)
        return {"cold_s": time.perf_counter() - t0}
    o = JaxOps()
    o.jax.config.update("jax_enable_x64", True)
    t0 = time.perf_counter()  # numpy arguments: the first call starts XLA's CPU client, as cpu.py's
    o.jax.block_until_ready(o.jax.jit(lambda *a: w.peer(o, *a))(*arrays))
    return {"cold_s": time.perf_counter() - t0}


def fresh_cold(name: str, impl: str, cache: str) -> float | None:
    import subprocess
    env = dict(os.environ, MIND_CACHE_DIR=tempfile.mkdtemp(prefix="cold-", dir=cache),
               PYTHONPYCACHEPREFIX=os.path.join(cache, "pycache"))  # bytecode, as an install has
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    seed = [] if HOLDOUT is None else ["--holdout", HOLDOUT]
    r = subprocess.run([sys.executable, os.path.abspath(__file__), "--child-cold", name, impl, "--isa", ISA, *seed],
                       capture_output=True,
                       text=True, env=env, cwd=ROOT, timeout=600)
    return json.loads(r.stdout.strip().splitlines()[-1])["cold_s"] if r.returncode == 0 else None


def measure(w: Workload, peers: dict[str, Any], budget: float) -> dict[str, Any]:
    import mind
    rng = np.random.default_rng(0)
    arrays = w.inputs(rng)
    row: dict[str, Any] = {"name": w.name}
    row["bytes"] = int(sum(a.nbytes for a in arrays))
    want = None
    ref_ops = NumpyOps() if not w.grad else peers.get("torch")
    if ref_ops is not None:
        want = _flat(w.peer(ref_ops, *[ref_ops.asarray(a) for a in arrays]))
    t0 = time.perf_counter()
    fn = mind.compile(w.source, fn=w.fn, cpu=ISA)
    got = _flat(fn(*arrays))
    row["mind_cold_s"] = time.perf_counter() - t0
    row["bytes"] += int(sum(g.nbytes for g in got))
    if want is not None:
        row["rel_err"] = _rel_err(got, want)
    calls: dict[str, Callable[[], Any]] = {"mind_s": lambda: fn(*arrays)}
    if not w.grad:
        calls["numpy_s"] = lambda: w.peer(NumpyOps(), *arrays)
    if "torch" in peers:
        to = peers["torch"]
        targs = [to.asarray(a) for a in arrays]
        grad_mode = to.t.enable_grad if w.grad else to.t.no_grad
        calls["torch_s"] = grad_mode()(lambda: w.peer(to, *targs))
        try:
            to.t._dynamo.reset()  # one code object serves every workload: no recompile limit reached
            compiled = grad_mode()(to.t.compile(lambda *a: w.peer(to, *a)))
            t0 = time.perf_counter()
            compiled(*targs)
            row["torch_compile_first_s"] = time.perf_counter() - t0
            calls["torch_compile_s"] = lambda: compiled(*targs)
        except Exception as e:  # noqa: BLE001 - a peer's failure is a table entry
            row["torch_compile_error"] = f"{type(e).__name__}: {str(e)[:100]}"
    if "jax" in peers:
        jo = peers["jax"]
        jargs = [jo.asarray(a) for a in arrays]
        jf = jo.jax.jit(lambda *a: w.peer(jo, *a))
        t0 = time.perf_counter()
        jo.jax.block_until_ready(jf(*jargs))
        row["jax_cold_s"] = time.perf_counter() - t0
        calls["jax_s"] = lambda: jo.jax.block_until_ready(jf(*jargs))
    row.update(interleaved_medians(calls, budget * len(calls)))
    cache = os.environ["MIND_CACHE_DIR"]
    row["mind_cold_fresh_s"] = fresh_cold(w.name, "mind", cache)
    if "jax" in peers:
        row["jax_cold_fresh_s"] = fresh_cold(w.name, "jax", cache)
    row["flops"] = w.flops
    return row


def isa_of_host() -> str:
    from mind.compiler.backend.cpu.host import cpu_flags
    flags = cpu_flags()
    if "avx512f" in flags:
        return "x86-64-v4 (AVX-512)"
    return "x86-64-v3 (AVX2)" if "avx2" in flags else "x86-64 (SSE2)"


def _load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def run(only: str | None, budget: float) -> dict[str, Any]:
    peers: dict[str, Any] = {}
    try:
        peers["torch"] = TorchOps()
        peers["torch"].t.set_num_threads(os.cpu_count() or 1)
    except ImportError:
        pass
    try:
        peers["jax"] = JaxOps()
        peers["jax"].jax.config.update("jax_enable_x64", True)
    except ImportError:
        pass
    import mlir.ir  # noqa: F401 - the tool libraries are imported before the cold compiles, as jax is
    import llvmlite.binding  # noqa: F401
    result: dict[str, Any] = {"machine": {"cpus": os.cpu_count(), "isa": isa_of_host(), "target_isa": ISA,
                                          "isa_env": ISA_ENV[ISA], "numpy": np.__version__,
                                          "loadavg_before": _load()}}
    for name, o in peers.items():
        result["machine"][name] = getattr(o, "t", getattr(o, "jax", None)).__version__
    result["limits"] = machine_limits(budget, peers)
    first = selected()[0].name
    fresh_cold(first, "mind", os.environ["MIND_CACHE_DIR"])  # writes the bytecode
    fresh_cold(first, "jax", os.environ["MIND_CACHE_DIR"])
    if HOLDOUT is not None:
        result["machine"]["holdout_seed"] = int(HOLDOUT)
    rows = []
    for w in selected():
        if only and only not in w.name:
            continue
        try:
            rows.append(measure(w, peers, budget))
        except Exception as e:  # noqa: BLE001 - one failed workload is a table entry, not a lost run
            rows.append({"name": w.name, "error": f"{type(e).__name__}: {str(e)[:160]}"})
        print(f"  measured {w.name}", file=sys.stderr, flush=True)
    result["rows"] = rows
    result["machine"]["loadavg_after"] = _load()
    return result


PEERS = (("numpy", "numpy_s"), ("torch", "torch_s"), ("t.compile", "torch_compile_s"), ("jax.jit", "jax_s"))


def _ms(v: float | None) -> str:
    if v is None:
        return "-"
    return f"{v * 1e6:.0f}µs" if v < 1e-3 else (f"{v * 1e3:.2f}ms" if v < 0.1 else f"{v * 1e3:.0f}ms")


def render(result: dict[str, Any]) -> str:
    lim = result["limits"]
    cols = ["workload", "fits L2", "MIND", *[p for p, _ in PEERS], *[f"x{p}" for p, _ in PEERS],
            "achieved", "% limit", "cold", "jax cold", "cold new", "jax new", "rel err"]
    lines, ratios = [], {p: [] for p, _ in PEERS}
    for r in result["rows"]:
        if "error" in r:
            lines.append([r["name"] + " (error: " + r["error"][:90] + ")"] + [""] * (len(cols) - 1))
            continue
        speed = []
        for p, key in PEERS:
            if r.get(key):
                ratios[p].append(r[key] / r["mind_s"])
                speed.append(f"{r[key] / r['mind_s']:.2f}")
            else:
                speed.append("-")
        if r.get("flops"):
            rate, share = r["flops"] / r["mind_s"] / 1e9, r["flops"] / r["mind_s"] / 1e9 / lim["gemm_gflops"]
            achieved = f"{rate:.1f} GF/s"
        else:
            rate, share = r["bytes"] / r["mind_s"] / 1e9, r["bytes"] / r["mind_s"] / 1e9 / lim["copy_gbs"]
            achieved = f"{rate:.1f} GB/s"
        lines.append([r["name"], "yes" if r["bytes"] <= L2_BYTES else "no", _ms(r["mind_s"]),
                      *[_ms(r.get(k)) for _, k in PEERS], *speed, achieved, f"{100 * share:.0f}%",
                      _ms(r["mind_cold_s"]), _ms(r.get("jax_cold_s")), _ms(r.get("mind_cold_fresh_s")),
                      _ms(r.get("jax_cold_fresh_s")),
                      f"{r['rel_err']:.1e}" if "rel_err" in r else "-"])
    widths = [max(len(x) for x in col) for col in zip(cols, *lines)]
    fmt = "  ".join("{:<%d}" % w for w in widths)
    out = [fmt.format(*cols), fmt.format(*["-" * w for w in widths])] + [fmt.format(*ln) for ln in lines]
    out.append("")
    for p, _ in PEERS:
        rs = ratios[p]
        if rs:
            slower = sum(x < 1 for x in rs)
            out.append(f"geometric mean vs {p}: {math.exp(statistics.fmean(map(math.log, rs))):.2f}x over {len(rs)} "
                       f"workloads ({slower} slower than {p})")
    for a, b, what in (("mind_cold_s", "jax_cold_s", "in this process"), ("mind_cold_fresh_s", "jax_cold_fresh_s",
                                                                         "in fresh processes")):
        pairs = [(r[a], r[b]) for r in result["rows"] if r.get(a) and r.get(b)]
        if pairs:
            out.append(f"cold first call {what}: MIND below jax.jit's on {sum(x < y for x, y in pairs)} of "
                       f"{len(pairs)} workloads")
    m = result["machine"]
    out.append(f"limits: copy {lim['copy_gbs']:.1f} GB/s ({lim['copy_by']}), GEMM {lim['gemm_gflops']:.0f} GFLOP/s "
               f"({lim['gemm_by']}); ISA {m['isa']}, code for {m.get('target_isa', 'host')}; {m['cpus']} CPUs; load average before/after "
               f"{m['loadavg_before']} / {m['loadavg_after']}" +
               (f"; held-out programs, seed {m['holdout_seed']}" if "holdout_seed" in m else ""))
    return "\n".join(out)


def main(args: argparse.Namespace) -> None:
    name = args.name or "suite" + ("" if HOLDOUT is None else "-holdout") + ("" if ISA == "host" else f"-{ISA}")
    with tempfile.TemporaryDirectory(prefix="mind-suite-cache-") as cache:
        os.environ["MIND_CACHE_DIR"] = cache  # every compile cold
        result = run(args.only, budget=0.15 if args.quick else 0.5)
    text = render(result)
    print(text)
    result["table"] = text
    if not args.quick and args.only is None:
        path = os.path.join(ROOT, "benchmarks", "results", f"{os.path.basename(name)}.json")
        with open(path + ".tmp", "w") as f:
            json.dump(result, f, indent=1)
            f.write("\n")
        os.replace(path + ".tmp", path)


if __name__ == "__main__":
    if ARGS.child_cold:
        print(json.dumps(child_cold(*ARGS.child_cold)))
    else:
        main(ARGS)
