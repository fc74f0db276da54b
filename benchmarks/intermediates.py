"""Programs whose kernels hold large intermediates, MIND against torch eager in the same process.

Why: a kernel's intermediates are heap blocks it allocates and frees on every call; what each call
pays for fresh pages shows here (``mind.runtime.heap``; ``docs/backend-cpu.md``, Measurements).
The suite's programs with the largest intermediates, and two that are not in it: a 3-layer MLP
train step of batch 2048 and a GELU chain whose intermediates are not fused (a column mean
between its GELUs).  Times are medians of the process's CPU time per call (``time.process_time``),
so other processes on a loaded machine count less.  ``--no-heap-cache`` runs the same build with
the cache holding nothing; compare by running both, alternately, one program per process (what
ran before in a process changes glibc's thresholds, and so what a later program pays).

    python benchmarks/intermediates.py [--threads N] [--reps R] [--only WORD] [--no-heap-cache]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import suite  # noqa: E402
from suite import EPS, T, TorchOps, Workload, _gelu, _gen, _normal, _onehot, _train  # noqa: E402

SUITE = ("cnn_train_f32_48x64x64_16_32", "mlp_train_f32_32x256x128", "mlp_train_f32_512x784x512",
         "layer_norm_f32_4096x768", "softmax_f32_4096x1000", "attention_f32_16x384x64")

MLP3_TRAIN = """fn loss(x: {x}, y: {y}, w1: {w1}, w2: {w2}, w3: {w3}) -> f32 {{
  let h1 = relu(matmul(x, w1));
  let h2 = relu(matmul(h1, w2));
  mean(-sum(y * log_softmax(matmul(h2, w3), axis=-1), axes=[1], keepdims=false), axes=[0], keepdims=false)
}}
fn train_step(x: {x}, y: {y}, w1: {w1}, w2: {w2}, w3: {w3}) -> (f32, {w1}, {w2}, {w3}) {{
  let l = loss(x, y, w1, w2, w3);
  let (g1, g2, g3) = grad(l, wrt=[w1, w2, w3]);
  (l, w1 - 0.01 * g1, w2 - 0.01 * g2, w3 - 0.01 * g3)
}}"""

GELU = "0.5 * {v} * (1.0 + tanh(0.7978845608 * ({v} + 0.044715 * {v} * {v} * {v})))"
GELU_CHAIN = ("fn f(x: {x}) -> {x} {{\n  let a = " + GELU.format(v="x") + ";\n"
              "  let b = a - mean(a, axes=[0], keepdims=true);\n  let c = " + GELU.format(v="b") + ";\n"
              "  c - mean(c, axes=[0], keepdims=true)\n}}")


def _mlp3_loss(o, x, y, w1, w2, w3):
    h2 = o.relu(o.matmul(o.relu(o.matmul(x, w1)), w2))
    return o.mean(-o.sum(y * o.log_softmax(o.matmul(h2, w3)), 1), 0)


def mlp3_train(b: int, d: int, hidden: int, classes: int) -> Workload:
    shapes = {"x": T("f32", b, d), "y": T("f32", b, classes), "w1": T("f32", d, hidden),
              "w2": T("f32", hidden, hidden), "w3": T("f32", hidden, classes)}
    params = [_normal(d, hidden, scale=d ** -0.5), _normal(hidden, hidden, scale=hidden ** -0.5),
              _normal(hidden, classes, scale=hidden ** -0.5)]
    return Workload(f"mlp3_train_f32_{b}x{d}x{hidden}", MLP3_TRAIN.format(**shapes), "train_step",
                    _gen(_normal(b, d), _onehot(b, classes), *params),
                    lambda o, x, y, *p: _train(o, _mlp3_loss, p, x, y), grad=True)


def gelu_chain(r: int, c: int) -> Workload:
    def peer(o, x):
        a = _gelu(o, x)
        g = _gelu(o, a - o.mean(a, 0, keepdims=True))
        return g - o.mean(g, 0, keepdims=True)
    return Workload(f"gelu_chain_f32_{r}x{c}", GELU_CHAIN.format(x=T("f32", r, c)), "f", _gen(_normal(r, c)), peer)


def programs() -> list[Workload]:
    by_name = {w.name: w for w in suite.workloads()}
    return [by_name[n] for n in SUITE] + [mlp3_train(2048, 784, 512, 10), gelu_chain(4096, 1024), gelu_chain(8192, 1024)]


def cpu_ms(f) -> float:
    """The process's CPU time of one call of ``f``, in milliseconds."""
    t0 = time.process_time()
    f()
    return 1e3 * (time.process_time() - t0)


def cpu_median(f, reps: int) -> float:
    f()
    return statistics.median([cpu_ms(f) for _ in range(reps)])


def main(argv: list[str]) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--reps", type=int, default=15)
    p.add_argument("--only", default=None)
    p.add_argument("--no-heap-cache", action="store_true", help="kernels' freed blocks go to free (the A side)")
    args = p.parse_args(argv)
    import torch

    import mind
    if args.no_heap_cache:
        from mind.runtime import heap
        heap.set_limit(0)
    torch.set_num_threads(args.threads)
    ops = TorchOps()
    for w in programs():
        if args.only and args.only not in w.name:
            continue
        inputs = w.inputs(np.random.default_rng(0))
        f = mind.compile(w.source, fn=w.fn, threads=args.threads)
        tin = [ops.asarray(a) for a in inputs]

        def peer():
            with torch.enable_grad() if w.grad else torch.no_grad():
                return w.peer(ops, *tin)
        mind_ms = cpu_median(lambda: f(*inputs), args.reps)
        torch_ms = cpu_median(peer, args.reps)
        print(f"{w.name:36s} threads={args.threads} mind {mind_ms:8.2f} ms  torch {torch_ms:8.2f} ms", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
