"""Frontend compile-time benchmark: parse + check + lower + canonicalize, in-process, no caching.

    python benchmarks/frontend.py [--repeat N] [--no-json]

For each program of examples/bench/ prints the median (thread CPU) time of: parse, elaborate (check + lower),
canonicalize, the total, compilations/second, the minimum sample of the total, and the ratio to the published Rust numbers.
Also times the source-hash cache (compiler/frontend/cache.py) separately.
Writes benchmarks/results/frontend.json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RUST_US = {"scalar_math": 1.77, "small_matmul": 2.8, "medium_matmul": 2.9, "large_matmul": 2.95,
           "tensor_ops": 4.75, "reductions": 2.92, "reshape_ops": 2.80, "medium_mlp": 6.15,
           "large_network": 15.49}


def _median_us(fn, budget_s: float = 0.3, repeat: int = 7) -> float:
    return _stats_us(fn, budget_s, repeat)[0]


def _stats_us(fn, budget_s: float = 0.3, repeat: int = 7) -> tuple[float, float]:
    """(median, min) over ``repeat`` samples of the per-call time, in µs (CPU time of this thread,
    which a noisy machine disturbs less than wall time)."""
    fn()
    t0 = time.perf_counter()
    fn()
    one = max(time.perf_counter() - t0, 1e-7)
    number = max(1, min(10_000, int(budget_s / repeat / one)))
    samples = []
    clock = time.thread_time_ns
    for _ in range(repeat):
        t0 = clock()
        for _ in range(number):
            fn()
        samples.append((clock() - t0) / number / 1e3)
    return statistics.median(samples), min(samples)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--no-json", action="store_true")
    ap.add_argument("--budget", type=float, default=0.3, help="seconds per measurement")
    args = ap.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    from mind.compiler.frontend.api import compile_source
    from mind.compiler.frontend.cache import compile_cached, clear
    from mind.compiler.frontend.elaborate import elaborate
    from mind.compiler.frontend.parser import parse
    from mind.compiler.passes import canonicalize
    from mind.ir.core import Module

    rows = []
    for path in sorted((ROOT / "examples" / "bench").glob("*.mind")):
        name, src = path.stem, path.read_text()
        ast = parse(src, name)
        mod = elaborate(ast)
        t_parse = _median_us(lambda: parse(src, name), args.budget)
        t_elab = _median_us(lambda: elaborate(ast), args.budget)
        t_canon = _median_us(lambda: [canonicalize(f) for f in mod.functions], args.budget)
        t_total, t_total_min = _stats_us(lambda: compile_source(src, name), args.budget)
        clear()
        compile_cached(src, name, disk=False)
        t_cached = _median_us(lambda: compile_cached(src, name, disk=False), args.budget)
        rust = RUST_US.get(name)
        rows.append({"program": name, "parse_us": t_parse, "elaborate_us": t_elab,
                     "canonicalize_us": t_canon, "total_us": t_total, "total_min_us": t_total_min,
                     "compilations_per_s": 1e6 / t_total, "cached_us": t_cached,
                     "rust_us": rust, "ratio_to_rust": (t_total / rust) if rust else None,
                     "ops_after": sum(len(f.ops) for f in Module([canonicalize(f) for f in mod.functions]).functions)})
    hdr = f"{'program':15s} {'parse':>8s} {'elab':>8s} {'canon':>8s} {'total':>8s} {'min':>8s} {'comp/s':>9s} {'cached':>7s} {'rust':>6s} {'ratio':>6s}"
    print(hdr)
    print("-" * len(hdr))
    for r in rows:
        ratio = f"{r['ratio_to_rust']:6.1f}" if r["ratio_to_rust"] else "     -"
        rust = f"{r['rust_us']:6.2f}" if r["rust_us"] else "     -"
        print(f"{r['program']:15s} {r['parse_us']:8.1f} {r['elaborate_us']:8.1f} {r['canonicalize_us']:8.1f} "
              f"{r['total_us']:8.1f} {r['total_min_us']:8.1f} {r['compilations_per_s']:9.0f} {r['cached_us']:7.2f} {rust} {ratio}")
    print("times in µs (median of thread CPU time; min = fastest sample of total); "
          "total = compile_source (parse + check + lower + canonicalize), no cache")
    if not args.no_json:
        out = ROOT / "benchmarks" / "results" / "frontend.json"
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps({"python": platform.python_version(), "machine": platform.machine(),
                                   "cpus": os.cpu_count(), "rows": rows}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
