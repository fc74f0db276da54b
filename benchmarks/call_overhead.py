"""The cost of a call: a compiled MIND function on tiny arrays, against NumPy's and torch's eager ops.

    python benchmarks/call_overhead.py          # prints the table, writes benchmarks/results/call_overhead.json
    python benchmarks/call_overhead.py --quick  # fewer repetitions (does not write the results file)

On 4-element f32 arrays the kernels do almost nothing, so each figure is what a call costs around
its kernel: ``mind.compile(src, fn="f")(*args)`` checks its arguments, allocates its results and
calls the kernel through ctypes.  One row per number of arguments (1, 3, 8) and results (1, 2):

* ``args`` arguments of shape [4]; one result is their sum (``x + x`` for one argument), a second
  result their product (``x * x``); the peers compute the same with their eager ops (one op per
  ``+`` or ``*``, as a user writes it: ``a + b + c`` is two ops).
* ``symbolic``: ``x + x`` for ``x: Tensor<f32, [n]>``, called with a [4] array: the same call, through
  the lookup of the kernel specialized to n = 4.

Columns (median per call over ``rounds`` rounds of ``calls`` calls each, implementations interleaved
round by round in this one process; ``best``: the fastest round of MIND's).  The times are CPU time of
the calling thread, where every implementation runs these calls (4 elements start no thread): on a
shared machine, wall time also counts the time other processes held the cores, and after each of its
ops torch's idle pool threads spin on the cores MIND's next round needs.  The JSON also has each
median in wall time (``*_wall_s``).

* ``mind``: the callable of ``mind.compile``, results allocated by the call; ``mind out=``: writing into
  preallocated arrays (``out=``, checked on every call: dtype, shape, layout, no overlap).
* ``numpy``, ``torch``: the eager ops on arrays / tensors of the same size (torch's tensors made from
  the same arrays with ``torch.from_numpy``; a peer that is not installed is ``-``).
* ``x numpy``, ``x torch``: peer time / MIND time (> 1: MIND is faster).

The load average before and after the run is recorded: on a shared 2-core machine other processes
lengthen every figure.
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import sys
import time
from typing import Any, Callable

import numpy as np

import mind

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SIZE = 4
SHAPES = ((1, 1), (3, 1), (8, 1), (1, 2), (3, 2), (8, 2))
"""(arguments, results) of each row."""


def source(n_args: int, n_results: int) -> str:
    """The MIND function of a row: the arguments' sum, and for two results also their product."""
    t = f"Tensor<f32, [{SIZE}]>"
    names = ["x"] if n_args == 1 else [f"a{i}" for i in range(n_args)]
    params = ", ".join(f"{n}: {t}" for n in names)
    total = " + ".join(names * 2 if n_args == 1 else names)
    product = " * ".join(names * 2 if n_args == 1 else names)
    if n_results == 1:
        return f"fn f({params}) -> {t} {{ {total} }}"
    return f"fn f({params}) -> ({t}, {t}) {{ ({total}, {product}) }}"


def eager(n_args: int, n_results: int) -> Callable[..., Any]:
    """The same computation with eager ops (works for numpy arrays and torch tensors alike)."""
    def one(*xs: Any) -> Any:
        if n_args == 1:
            return xs[0] + xs[0]
        acc = xs[0] + xs[1]
        for x in xs[2:]:
            acc = acc + x
        return acc

    def two(*xs: Any) -> Any:
        if n_args == 1:
            return xs[0] + xs[0], xs[0] * xs[0]
        p = xs[0] * xs[1]
        for x in xs[2:]:
            p = p * x
        return one(*xs), p
    return one if n_results == 1 else two


def per_call(f: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any], calls: int) -> tuple[float, float]:
    """Seconds per call of ``calls`` calls of ``f(*args, **kwargs)``: CPU time of this thread, wall time."""
    wall, cpu = time.perf_counter(), time.thread_time()
    for _ in range(calls):
        f(*args, **kwargs)
    return (time.thread_time() - cpu) / calls, (time.perf_counter() - wall) / calls


def measure(name: str, impls: dict[str, tuple[Callable[..., Any], tuple[Any, ...], dict[str, Any]]],
            rounds: int, calls: int) -> dict[str, Any]:
    """Every implementation of a row, interleaved round by round; medians (and MIND's best)."""
    times: dict[str, list[tuple[float, float]]] = {k: [] for k in impls}
    for f, args, kwargs in impls.values():
        for _ in range(max(calls // 10, 50)):  # warm up (first calls, caches, the output pool)
            f(*args, **kwargs)
    for _ in range(rounds):
        for k, (f, args, kwargs) in impls.items():
            times[k].append(per_call(f, args, kwargs, calls))
    row: dict[str, Any] = {"name": name}
    for k, ts in times.items():
        row[f"{k}_s"] = statistics.median(cpu for cpu, _ in ts)
        row[f"{k}_wall_s"] = statistics.median(wall for _, wall in ts)
    row["mind_best_s"] = min(cpu for cpu, _ in times["mind"])
    return row


def rows(rounds: int, calls: int) -> list[dict[str, Any]]:
    try:
        import torch
    except ImportError:
        torch = None
    rng = np.random.default_rng(0)
    result = []
    cases = [(f"{a} arg{'s' * (a > 1)}, {r} result{'s' * (r > 1)}", source(a, r), a, r) for a, r in SHAPES]
    cases.append(("symbolic [n], 1 arg, 1 result", "fn f(x: Tensor<f32, [n]>) -> Tensor<f32, [n]> { x + x }", 1, 1))
    for name, src, n_args, n_results in cases:
        xs = tuple(rng.standard_normal(SIZE).astype(np.float32) for _ in range(n_args))
        f = mind.compile(src, fn="f")
        ref = eager(n_args, n_results)
        got = f(*xs)
        want = ref(*xs)
        for g, w in zip(got if n_results > 1 else (got,), want if n_results > 1 else (want,)):
            np.testing.assert_allclose(g, w, rtol=1e-6)
        outs = tuple(np.empty(SIZE, np.float32) for _ in range(n_results))
        impls = {"mind": (f, xs, {}), "mind_out": (f, xs, {"out": outs if n_results > 1 else outs[0]}),
                 "numpy": (ref, xs, {})}
        if torch is not None:
            impls["torch"] = (ref, tuple(torch.from_numpy(x) for x in xs), {})
        result.append(dict(measure(name, impls, rounds, calls), args=n_args, results=n_results))
        print(f"  measured {name}", file=sys.stderr, flush=True)
    return result


def _us(v: float | None) -> str:
    return "-" if v is None else f"{v * 1e6:.2f}"


def render(result: dict[str, Any]) -> str:
    cols = ["call (f32[4] each)", "mind µs", "best", "mind out= µs", "numpy µs", "torch µs", "x numpy", "x torch"]
    lines = []
    for r in result["rows"]:
        ratio = [f"{r[k] / r['mind_s']:.2f}" if r.get(k) else "-" for k in ("numpy_s", "torch_s")]
        lines.append([r["name"], _us(r["mind_s"]), _us(r["mind_best_s"]), _us(r["mind_out_s"]), _us(r["numpy_s"]),
                      _us(r.get("torch_s")), *ratio])
    widths = [max(len(x) for x in col) for col in zip(cols, *lines)]
    fmt = "  ".join("{:<%d}" % w for w in widths)
    out = [fmt.format(*cols), fmt.format(*["-" * w for w in widths])] + [fmt.format(*ln) for ln in lines]
    m = result["machine"]
    out.append(f"\nCPU time per call; {m['rounds']} rounds of {m['calls']} calls; Python {m['python']}, "
               f"numpy {m['numpy']}, torch {m.get('torch', '-')}; {m['cpus']} CPUs; load average before/after "
               f"{m['loadavg_before']} / {m['loadavg_after']}")
    return "\n".join(out)


def _load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def main(argv: list[str]) -> None:
    quick = "--quick" in argv
    rounds, calls = (5, 2000) if quick else (15, 5000)
    machine: dict[str, Any] = {"cpus": os.cpu_count(), "python": platform.python_version(), "numpy": np.__version__,
                               "rounds": rounds, "calls": calls, "loadavg_before": _load()}
    try:
        import torch
        machine["torch"] = torch.__version__
    except ImportError:
        pass
    result: dict[str, Any] = {"machine": machine, "rows": rows(rounds, calls)}
    machine["loadavg_after"] = _load()
    text = render(result)
    print(text)
    result["table"] = text
    if not quick:
        path = os.path.join(ROOT, "benchmarks", "results", "call_overhead.json")
        with open(path + ".tmp", "w") as f:
            json.dump(result, f, indent=1)
            f.write("\n")
        os.replace(path + ".tmp", path)


if __name__ == "__main__":
    main(sys.argv[1:])
