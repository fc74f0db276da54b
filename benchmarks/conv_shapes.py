"""conv2d and its gradients on shapes the suite does not have, against torch eager in the same process.

    python benchmarks/conv_shapes.py [--threads N] [--only WORD]   # prints the table, writes
                                                                   # benchmarks/results/conv_shapes.json

Why: the method of a conv is a cost model's choice (direct register blocks of one or several images,
one conv per output phase of an input-dilated conv, the prebuilt GEMM for a conv that is a matmul;
``docs/backend-cpu.md``, Schedules), and the suite's convs cover a few shapes of it.  These are
others: a 5x5 conv, a 7x7 stride-2 stem of 3 channels (batch 1 and 32), 1x1 convs of 512 channels,
stride 2 with dilation 2, odd widths, and the gradients (input and filter, through ``grad``) of
such convs, whose programs are an input-dilated conv and a large-window conv of transposed operands;
and channel counts that are not multiples of a vector (output channels 3, 10, 31, 43, 65, 100 from 1,
3 or 13 input channels: the stems and odd layers of held-out programs, ``lowerings.block_channels``);
and 3x3 convs of 256 and 512 channels, whose filters (2.4 to 9.4 MB) do not fit L2
(``conv_schedule.packed_cost``).
f32; MIND compiled with ``threads=N`` and torch limited to N threads.  Each figure is the median of
repeated calls: CPU time of the process with one thread (what the call costs, less sensitive to
other processes on a shared machine than wall time), wall time with more.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Any, Callable

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [ROOT, os.path.join(ROOT, "benchmarks")]


def conv_grad(n: int, h: int, ci: int, co: int, k: int, stride: int = 1, padding: str = "valid",
              dilation: int = 1) -> Any:
    """The workload of the gradients of ``sum(conv2d(x, w) * g)`` with respect to x and w."""
    from suite import T, Workload, _gen, _normal, conv
    base = conv(n, h, ci, co, k, stride, padding, dilation)
    span = (k - 1) * dilation + 1
    oh = -(-h // stride) if padding == "same" else (h - span) // stride + 1
    xs, ws, gs = (n, h, h, ci), (k, k, ci, co), (n, oh, oh, co)
    attrs = f"strides=[{stride}, {stride}], padding=\"{padding}\", dilation=[{dilation}, {dilation}]"
    params = f"x: {T('f32', *xs)}, w: {T('f32', *ws)}, g: {T('f32', *gs)}"
    src = (f"fn loss({params}) -> f32 {{ sum(conv2d(x, w, {attrs}) * g, axes=[0, 1, 2, 3], keepdims=false) }}\n"
           f"fn f({params}) -> ({T('f32', *xs)}, {T('f32', *ws)}) {{ "
           f"let (dx, dw) = grad(loss(x, w, g), wrt=[x, w]); (dx, dw) }}")

    def peer(o: Any, x: Any, w: Any, g: Any) -> Any:
        return o.t.func.grad(lambda x, w: (o.conv2d(x, w, stride, padding, dilation) * g).sum(), argnums=(0, 1))(x, w)
    return Workload("grad_" + base.name, src, "f", _gen(_normal(*xs), _normal(*ws, scale=0.1), _normal(*gs)), peer,
                    flops=3 * base.flops, grad=True)


def workloads() -> list[Any]:
    from suite import conv
    return [conv(8, 32, 32, 64, 5, 1, "same"), conv(1, 224, 3, 64, 7, 2, "same"), conv(32, 64, 3, 32, 7, 2, "same"),
            conv(8, 14, 512, 512, 1), conv(32, 7, 512, 512, 1), conv(4, 33, 32, 64, 3, 2, "same", 2),
            conv(32, 27, 16, 32, 3, 1, "same"), conv(1, 31, 24, 48, 3, 1, "valid"),
            conv_grad(8, 32, 32, 64, 5, 1, "same"), conv_grad(8, 112, 3, 64, 7, 2, "same"),
            conv_grad(4, 33, 32, 64, 3, 2, "same", 2), conv_grad(8, 14, 512, 512, 1),
            conv_grad(32, 27, 16, 32, 3, 1, "same"), conv_grad(1, 31, 24, 48, 3, 2, "valid"),
            conv(2, 51, 3, 43, 7, 2, "same"), conv(3, 14, 13, 31, 5, 1, "same"), conv(1, 32, 3, 3, 3, 1, "same"),
            conv(8, 28, 1, 10, 5, 2, "valid"), conv(1, 56, 3, 31, 3, 2, "same"), conv(2, 40, 13, 43, 3, 1, "valid"),
            conv(1, 30, 13, 65, 5, 1, "same"), conv(8, 20, 3, 100, 3, 1, "same"), conv(2, 33, 13, 100, 7, 2, "same"),
            conv(2, 24, 13, 31, 1, 2, "valid"), conv(8, 16, 13, 43, 1, 1, "valid"),
            conv_grad(2, 51, 3, 43, 7, 2, "same"), conv_grad(3, 14, 13, 31, 5, 1, "same"),
            conv_grad(8, 20, 3, 100, 3, 1, "same"),
            conv(8, 28, 256, 512, 3, 2, "same"), conv(8, 14, 256, 256, 3, 1, "same"), conv(16, 7, 512, 512, 3, 1, "same")]


def _median(f: Callable[[], Any], clock: Callable[[], float], budget: float = 2.0, least: int = 5) -> float:
    f()
    times: list[float] = []
    end = time.perf_counter() + budget
    while len(times) < least or (time.perf_counter() < end and len(times) < 200):
        t = clock()
        f()
        times.append(clock() - t)
    return float(np.median(times))


def _flat(v: Any) -> list[np.ndarray]:
    return [np.asarray(a) for a in (v if isinstance(v, (tuple, list)) else (v,))]


def measure(threads: int, only: str) -> list[dict]:
    from suite import TorchOps  # before torch, whose import drops this script's folder from sys.path
    import torch

    import mind
    torch.set_num_threads(threads)
    ops = TorchOps()
    clock = time.process_time if threads == 1 else time.perf_counter
    rows = []
    for w in workloads():
        if only not in w.name:
            continue
        arrays = w.inputs(np.random.default_rng(0))
        fn = mind.compile(w.source, fn=w.fn, threads=threads)
        targs = [ops.asarray(a) for a in arrays]
        got, want = _flat(fn(*arrays)), _flat(w.peer(ops, *targs))
        err = max(float(np.abs(g - t).max() / (np.abs(t).max() or 1.0)) for g, t in zip(got, want))
        mind_s = _median(lambda: fn(*arrays), clock)
        torch_s = _median(lambda: w.peer(ops, *targs), clock)
        rows.append({"name": w.name, "threads": threads, "mind_ms": mind_s * 1e3, "torch_ms": torch_s * 1e3,
                     "x_torch": torch_s / mind_s, "gflops": w.flops / mind_s / 1e9, "rel_err": err})
        r = rows[-1]
        print(f"{r['name']:42s} {r['mind_ms']:9.3f} ms  torch {r['torch_ms']:9.3f} ms  x{r['x_torch']:5.2f}  "
              f"{r['gflops']:6.1f} GF/s  err {err:.1e}", flush=True)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--only", default="")
    args = ap.parse_args()
    rows = measure(args.threads, args.only)
    if not args.only:
        out = os.path.join(ROOT, "benchmarks", "results", f"conv_shapes-t{args.threads}.json")
        with open(out, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
