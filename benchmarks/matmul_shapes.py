"""Matmul speed across output widths N, against NumPy, one thread each, in one process.

    python benchmarks/matmul_shapes.py          # prints the table, writes benchmarks/results/matmul_shapes.json

Why: the register block of the matmul schedule (``transforms.choose_matmul_tiles``) depends on how N
divides into AVX-512 vectors; widths that are not 1 or 2 whole vectors once gave rows that LLVM
scalarized (9 GFLOP/s at N = 48).  The prebuilt GEMM (``kernel_library``, the default where the host
runs it) handles the last columns of any N with masked loads instead.  A = 256 x 512, B = 512 x N,
f32; MIND's kernels (``matmul="schedule"`` and ``"library"``) are compiled with ``threads=1`` and NumPy
is limited to one BLAS thread (set before NumPy is imported).  Each figure is the best of repeated
calls writing into a preallocated output (MIND) or ``np.matmul(out=)``.
"""

from __future__ import annotations

import json
import os
import sys

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")

import numpy as np  # noqa: E402 - after the thread limits
from mind.compiler.backend.cpu.options import CpuOptions

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
        np.matmul(a, b, out=ref)
        flops = 2 * M * K * n
        _, np_best = median_and_best(lambda: np.matmul(a, b, out=ref), budget=0.4)
        t = choose_matmul_tiles(M, n, K)
        row = {"n": n, "block": f"{t.reg_m}x{t.reg_n}", "numpy_gflops": flops / np_best / 1e9}
        for policy in ("schedule", "library"):
            kern = compile_kernel(kernels.matmul(M, K, n), "mm", CpuOptions.resolve(threads=1, cache=False, matmul=policy))
            kern(a, b, out=[out])
            _, best = median_and_best(lambda: kern(a, b, out=[out]), budget=0.4)
            row[f"{policy}_gflops"] = flops / best / 1e9
            row[f"{policy}_max_abs_diff"] = float(np.max(np.abs(out - ref)))
            row[f"{policy}_kernel"] = kern.matmul_library or ("scheduled" if kern.scheduled else "loops")
        rows.append(row)
    return rows


def render(rows: list[dict]) -> str:
    lines = [f"{'N':>4}  {'block':>6}  {'schedule':>8}  {'library':>8}  {'numpy':>6}  {'sched/np':>8}  "
             f"{'lib/np':>6}   (GFLOP/s; library: {rows[0]['library_kernel'] if rows else ''})",
             "-" * 62]
    for r in rows:
        lines.append(f"{r['n']:>4}  {r['block']:>6}  {r['schedule_gflops']:>8.0f}  {r['library_gflops']:>8.0f}  "
                     f"{r['numpy_gflops']:>6.0f}  {r['schedule_gflops'] / r['numpy_gflops']:>8.2f}  "
                     f"{r['library_gflops'] / r['numpy_gflops']:>6.2f}")
    return "\n".join(lines)


if __name__ == "__main__":
    result = measure()
    print(f"A {M}x{K} @ B {K}xN, f32, one thread each (best of repeated calls)")
    print(render(result))
    path = os.path.join(ROOT, "benchmarks", "results", "matmul_shapes.json")
    with open(path, "w") as f:
        json.dump({"m": M, "k": K, "rows": result}, f, indent=1)
