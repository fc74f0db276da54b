"""How good the thread cost model's choices are: every suite (or held-out) workload timed on one and
on two threads, and the time each ``gain_over_regions`` factor would lose by its choices.

    python benchmarks/thread_choice.py [--isa host|x86-64-v3] [--holdout SEED ...] [--rounds N] [--out FILE.json]

Why: ``thread_cost.worth_threads`` sends a kernel to the threads when the estimated saving is at
least ``gain_over_regions`` times its parallel regions' cost; the factor is a margin for what an
estimate does not see, and too large a margin leaves kernels that two threads run faster on one
(``docs/backend-cpu.md``, Threads).  For each workload the script compiles the program twice
(``threads=1``, ``threads=2``, ``cache=False``), times the two in alternating batches of about
50 ms (``--rounds`` rounds, 20 ms apart, the best median kept), and records the model's estimate of
the one-thread time and its regions.  The table gives, for each factor, the geometric mean over the
workloads of chosen time / faster time and the worst choices; the JSON keeps every row.  The suite's
workloads come first, then each ``--holdout`` seed's.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from typing import Any, Callable

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import suite as S  # noqa: E402  (before numpy: the suite fixes the peers' ISA as they load)

import numpy as np  # noqa: E402

FACTORS = (5.0, 4.0, 3.0, 2.5, 2.0)


def _median_call(f: Callable[[], Any], calls: int) -> float:
    times = []
    for _ in range(calls):
        t0 = time.perf_counter()
        f()
        times.append(time.perf_counter() - t0)
    return float(np.median(times))


def measure(w: S.Workload, isa: str, rounds: int) -> dict[str, Any]:
    """One workload at one and two threads, with the cost model's view of it."""
    import mind
    from mind.compiler.backend.cpu.api import compile_function
    from mind.compiler.backend.cpu.thread_cost import kernel_cost, one_thread_seconds
    from mind.compiler.backend.cpu.vector_unit import vector_unit
    arrays = list(w.inputs(np.random.default_rng(0)))
    fn = mind.compile(w.source, fn=w.fn).function
    cost = kernel_cost(fn, {})
    runs = {t: compile_function(fn, cpu=isa, cache=False, threads=t) for t in (1, 2)}
    for run in runs.values():
        run(arrays)
    calls = max(5, min(300, int(0.05 / max(_median_call(lambda: runs[1](arrays), 3), 1e-6))))
    best = {1: math.inf, 2: math.inf}
    for _ in range(rounds):
        for t, run in runs.items():
            time.sleep(0.02)  # the other's workers stop spinning
            run(arrays)
            best[t] = min(best[t], _median_call(lambda: run(arrays), calls))
    return {"name": w.name, "isa": isa, "one_thread_s": best[1], "two_threads_s": best[2],
            "estimate_s": one_thread_seconds(cost, vector_unit(isa)), "regions": cost.regions}


def choices(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """For each factor: the geometric mean of chosen / faster time and the choices 8 % or more off."""
    from mind.compiler.backend.cpu.thread_cost import saving_pays
    out = []
    for factor in FACTORS:
        losses, worst = [], []
        for r in rows:
            two = saving_pays(r["estimate_s"], r["regions"], 2, factor)
            chosen = r["two_threads_s"] if two else r["one_thread_s"]
            loss = chosen / min(r["one_thread_s"], r["two_threads_s"])
            losses.append(loss)
            if loss >= 1.08:
                worst.append(f"{r['name']} ({r['isa']}, {'2' if two else '1'} thread{'s' if two else ''}): "
                             f"{loss:.2f}x")
        out.append({"factor": factor, "geomean_loss": math.exp(sum(map(math.log, losses)) / len(losses)),
                    "worst": worst})
    return out


def _positive(text: str) -> int:
    n = int(text) if text.isdigit() else 0
    if n < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive count")
    return n


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--isa", default="host", choices=("host", "x86-64-v3"),
                   help="the level MIND compiles for: the host's best, or AVX2 (as suite.py's --isa)")
    p.add_argument("--holdout", nargs="*", type=int, default=[], metavar="SEED",
                   help="held-out seeds whose workloads are measured too")
    p.add_argument("--rounds", type=_positive, default=4)
    p.add_argument("--out", default=None, help="the JSON file (default benchmarks/results/thread_choice-ISA.json)")
    a = p.parse_args()
    if a.isa == "host":
        from mind.compiler.backend.cpu.vector_unit import LEVEL_FLAGS, runs_isa
        a.isa = next((isa for isa in LEVEL_FLAGS if runs_isa(isa)), "x86-64")
    sets = [S.workloads()] + [S.holdout(seed) for seed in a.holdout]
    rows = []
    for ws in sets:
        for w in ws:
            rows.append(measure(w, a.isa, a.rounds))
            r = rows[-1]
            print(f"{w.name:42s} 1 thread {r['one_thread_s'] * 1e6:10.1f} µs  2 threads "
                  f"{r['two_threads_s'] * 1e6:10.1f} µs  estimate {r['estimate_s'] * 1e6:10.1f} µs  "
                  f"regions {r['regions']}", flush=True)
    summary = choices(rows)
    print(f"\n{'factor':>6}  time lost (geomean)  choices 8 % or more slower than the other")
    for s in summary:
        print(f"{s['factor']:6.1f}  {100 * (s['geomean_loss'] - 1):18.1f} %  {'; '.join(s['worst']) or '-'}")
    print(f"{len(rows)} workloads, code for {a.isa}, seeds {a.holdout or 'none'}")
    path = a.out or os.path.join(S.ROOT, "benchmarks", "results", f"thread_choice-{a.isa}.json")
    with open(path + ".tmp", "w") as f:
        json.dump({"isa": a.isa, "holdout": [str(seed) for seed in a.holdout], "rows": rows, "choices": summary}, f, indent=1)
        f.write("\n")
    os.replace(path + ".tmp", path)


if __name__ == "__main__":
    main()
