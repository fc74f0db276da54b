"""A transposed rhs read in place by the prebuilt GEMM (``strided_rhs``) against the transpose
materialized, paired in this one process, with torch eager timed in the same rounds.

    python benchmarks/transposed_rhs.py [--cpu x86-64-v3] [--rounds N] [--only WORD] [--out FILE.json]

Each program is compiled twice (``cache=False``): once as the emitter writes it when the GEMM does
not read a transposed rhs (``library_calls.transposed_rhs`` made to give no element type for that
compile: the transpose is a copy, then the row-major GEMM), once reading it in place.  The two are
timed in alternating batches of calls (about 10 ms each, the order swapped every round), and each
row prints the medians and the median of the per-round ratios new/old: on a shared machine the
pairs keep the ratio meaningful when the absolute times move.  Rows: the suite's attention
(``q @ k^T``) and MLP train steps (the input gradient ``g @ w^T``), ``matmul(a, transpose(b))``
batched and 2-D on odd shapes, f32 and f64; 1 and 2 threads.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from typing import Any, Callable

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import suite as S  # noqa: E402  (before numpy: the suite fixes the peers' ISA as they load)

import numpy as np  # noqa: E402


def _nt(batch: tuple[int, ...], m: int, k: int, n: int, dt: str = "f32") -> S.Workload:
    """``matmul(a, transpose(b))`` with ``b`` of ``[*batch, n, k]``."""
    a, b = (*batch, m, k), (*batch, n, k)
    perm = ", permutation=[0, 2, 1]" if batch else ""
    src = f"fn f(a: {S.T(dt, *a)}, b: {S.T(dt, *b)}) -> {S.T(dt, *batch, m, n)} {{ matmul(a, transpose(b{perm})) }}"
    return S.Workload(f"{'bmm' if batch else 'mm'}_nt_{dt}_{'x'.join(map(str, (*batch, m, k, n)))}", src, "f",
                      S._gen(S._normal(*a, dtype=dt), S._normal(*b, dtype=dt)),
                      lambda o, x, y: o.matmul(x, o.swap_last(y)))


WORKLOADS = [S.attention(4, 64, 64), S.attention(16, 384, 64), S.attention(3, 97, 40), S.attention(8, 200, 72),
             _nt((7,), 33, 65, 130), _nt((12,), 200, 77, 150), _nt((3,), 129, 300, 97, "f64"), _nt((2,), 257, 129, 511),
             _nt((), 37, 513, 301), _nt((), 500, 300, 700), _nt((), 8, 1024, 1000), _nt((), 1, 777, 999),
             _nt((), 333, 129, 65, "f64"), _nt((), 1024, 1024, 1024), _nt((), 999, 61, 1001),
             S.mlp(32, 256, 128, 10, True), S.mlp(512, 784, 512, 10, True), S.mlp(100, 300, 200, 30, True)]


def _per_call(f: Callable[[], Any], reps: int) -> float:
    t0 = time.perf_counter()
    for _ in range(reps):
        f()
    return (time.perf_counter() - t0) / reps


def _both(w: S.Workload, inputs: list[np.ndarray], options: dict[str, Any]) -> tuple[Any, Any]:
    """(materialized, in place): the program compiled with and without the transposed-rhs maps."""
    import mind
    from mind.compiler.backend.cpu import library_calls
    new = mind.compile(w.source, fn=w.fn, cache=False, **options)
    real = library_calls.transposed_rhs
    library_calls.transposed_rhs = lambda library: frozenset()
    try:
        old = mind.compile(w.source, fn=w.fn, cache=False, **options)
        materialized = old(*inputs)  # compiled at the first call: while the maps are withheld
    finally:
        library_calls.transposed_rhs = real
    for x, y in zip(*(r if isinstance(r, tuple) else (r,) for r in (materialized, new(*inputs)))):
        np.testing.assert_allclose(x, y, rtol=1e-4, atol=1e-4, err_msg=w.name)
    return old, new


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--cpu", default=None, help="the kernels' cpu option (x86-64-v3: AVX2 code)")
    p.add_argument("--rounds", type=int, default=15)
    p.add_argument("--only", default=None)
    p.add_argument("--out", default=None)
    args = p.parse_args()
    import torch
    ops = S.TorchOps()
    rows: dict[str, dict[str, list[float]]] = {}
    for threads in (1, 2):
        torch.set_num_threads(threads)
        for w in WORKLOADS:
            if args.only and args.only not in w.name:
                continue
            inputs = w.inputs(np.random.default_rng(0))
            old, new = _both(w, inputs, {"threads": threads, **({"cpu": args.cpu} if args.cpu else {})})
            peer_args = [ops.asarray(x) for x in inputs]
            calls = {"old": lambda: old(*inputs), "new": lambda: new(*inputs), "torch": lambda: w.peer(ops, *peer_args)}
            for f in calls.values():
                f()
            reps = max(1, min(300, int(0.01 / max(_per_call(calls["old"], 1), 1e-7))))
            times: dict[str, list[float]] = {k: [] for k in calls}
            for r in range(args.rounds):
                for k in (("old", "new", "torch") if r % 2 == 0 else ("new", "old", "torch")):
                    times[k].append(_per_call(calls[k], reps))
            rows[f"{w.name}@{threads}"] = times
            med = {k: statistics.median(v) * 1e6 for k, v in times.items()}
            ratio = statistics.median(n / o for n, o in zip(times["new"], times["old"]))
            print(f"{w.name:32s} threads {threads}: materialized {med['old']:10.1f} µs  "
                  f"in place {med['new']:10.1f} µs  new/old {ratio:.3f}  torch {med['torch']:10.1f} µs", flush=True)
    print(f"load average: {os.getloadavg()}")
    if args.out:
        with open(args.out, "w") as f:
            json.dump(rows, f)


if __name__ == "__main__":
    main()
