"""Matmul speed across output widths N, against NumPy, one thread each, in one process.

    python benchmarks/matmul_shapes.py          # prints the table, writes benchmarks/results/matmul_shapes.json

Why: the register block of the matmul schedule (``transforms.choose_matmul_tiles``) depends on how N
divides into AVX-512 vectors; widths that are not 1 or 2 whole vectors once gave rows that LLVM
scalarized (9 GFLOP/s at N = 48).  A = 256 x 512, B = 512 x N, f32; MIND's kernel is compiled with
``threads=1`` and NumPy is limited to one BLAS thread (set before NumPy is imported).  Each figure is
the best of repeated calls writing into a preallocated output (MIND) or ``np.matmul(out=)``.
"""

from __future__ import annotations

import json
import os
import sys

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")

import numpy as np  # noqa: E402 - after the thread limits

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [ROOT, os.path.join(ROOT, "benchmarks"), os.path.join(ROOT, "tests", "backend_cpu")]

M, K = 256, 512
WIDTHS = (10, 16, 20, 24, 32, 40, 48, 64, 80, 96, 128)


def measure() -> list[dict]:
    import kernels
    from cpu import median_and_best

    from mind.compiler.backend.cpu.engine import compile_kernel
    from mind.compiler.backend.cpu.transforms import choose_matmul_tiles
    rows = []
    rng = np.random.default_rng(0)
    for n in WIDTHS:
        a = rng.standard_normal((M, K), dtype=np.float32)
        b = rng.standard_normal((K, n), dtype=np.float32)
        out, ref = np.empty((M, n), np.float32), np.empty((M, n), np.float32)
        kern = compile_kernel(kernels.matmul(M, K, n), "mm", threads=1, cache=False)
        kern(a, b, out=[out])
        np.matmul(a, b, out=ref)
        err = float(np.max(np.abs(out - ref)))
        flops = 2 * M * K * n
        _, mind_best = median_and_best(lambda: kern(a, b, out=[out]), budget=0.4)
        _, np_best = median_and_best(lambda: np.matmul(a, b, out=ref), budget=0.4)
        t = choose_matmul_tiles(M, n, K)
        rows.append({"n": n, "block": f"{t.reg_m}x{t.reg_n}", "scheduled": bool(kern.scheduled),
                     "mind_gflops": flops / mind_best / 1e9, "numpy_gflops": flops / np_best / 1e9,
                     "max_abs_diff": err})
    return rows


def render(rows: list[dict]) -> str:
    lines = [f"{'N':>4}  {'block':>6}  {'MIND GFLOP/s':>12}  {'numpy GFLOP/s':>13}  {'ratio':>5}",
             "-" * 48]
    for r in rows:
        lines.append(f"{r['n']:>4}  {r['block']:>6}  {r['mind_gflops']:>12.0f}  {r['numpy_gflops']:>13.0f}  "
                     f"{r['mind_gflops'] / r['numpy_gflops']:>5.2f}")
    return "\n".join(lines)


if __name__ == "__main__":
    result = measure()
    print(f"A {M}x{K} @ B {K}xN, f32, one thread each (best of repeated calls)")
    print(render(result))
    path = os.path.join(ROOT, "benchmarks", "results", "matmul_shapes.json")
    with open(path, "w") as f:
        json.dump({"m": M, "k": K, "rows": result}, f, indent=1)
