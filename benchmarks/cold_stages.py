"""Where a cold compile's time goes, stage by stage, for suite workloads (each in a fresh process).

Why: ``suite.py`` reports one figure per cold compile (``mind_cold_fresh_s``); cutting it needs the
split.  Each workload runs in its own process, ``MIND_CACHE=off``, with MLIR, llvmlite and MIND
imported first (as ``suite.py``'s cold child does), and the backend's stage functions wrapped by
timers; the first call of the compiled function is timed whole (``total``).  Stages inside the
split codegen (``llvm parse``, ``llvm opt``, ``emit obj``) add up both threads' time when a large
module compiles in two parts on two cores.  ``first call`` is the kernel's first run
(its compute, page faults, OpenMP start-up); ``other`` is the total less the stages (the frontend,
the lazy imports, verification, signature reading, Python glue)::

    python benchmarks/cold_stages.py [--only WORD ...] [--repeat N] [--warm] [--all] [--holdout SEED]

prints one row per workload: the median over ``--repeat`` processes (default 5) of each stage, ms.
``--warm`` compiles a small program first in each process (untimed), so that the figures are the
workload's own work rather than the process's first use of MLIR and LLVM; ``--all`` takes every
suite workload and ends with each stage's share of their total; ``--holdout SEED`` takes the workloads
of ``suite.py --holdout SEED`` instead of the suite's (every one of them unless ``--only`` names some).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from typing import Any, Callable

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
DEFAULT = ("ew_chain_f32_2048x2048", "softmax_f32_4096x1000", "layer_norm_f32_4096x768",
           "matmul_f32_700x900x500", "conv3x3_s1_d1_same_4x112x112x16to32", "attention_f32_16x384x64",
           "mlp_train_f32_512x784x512", "cnn_train_f32_48x64x64_16_32")

# (stage name, module, attribute): the functions timed, in pipeline order
STAGES: tuple[tuple[str, str, str], ...] = (
    ("emit mlir", "mind.compiler.backend.cpu.api", "emit_mlir"),
    ("mlir parse", "mind.compiler.backend.cpu.lowering", "parse"),
    ("schedule build", "mind.compiler.backend.cpu.lowering", "cpu_schedule"),
    ("transform interp", "mind.compiler.backend.cpu.lowering", "apply_script"),
    ("translate", "mind.compiler.backend.cpu.lowering", "translate_to_llvm_ir"),
    ("link runtime", "mind.compiler.backend.cpu.lowering", "link_runtime"),
    ("bind openmp", "mind.compiler.backend.cpu.engine", "bind_runtime"),
    ("llvm split", "mind.compiler.backend.cpu.llvm_split", "split_module"),
    ("jit load", "mind.compiler.backend.cpu.codegen", "JitObject"),
    ("ld link", "mind.compiler.backend.cpu.codegen", "link_shared"),
    ("mlir context", "mind.compiler.backend.linalg.context", "new_context"),
)
UNLOCKED = (("llvm parse", "parse"), ("llvm opt", "run"), ("emit obj", "emit_object"))
COLUMNS = ("emit mlir", "mlir context", "mlir parse", "prefusion", "schedule build", "transform interp", "bufferize+lower", "translate",
           "link runtime", "bind openmp", "llvm split", "llvm parse", "llvm opt", "emit obj", "jit load", "ld link", "first call", "other", "total")


WARM_UP = "fn g(x: Tensor<f32, [64, 32]>) -> Tensor<f32, [64]> { sum(exp(x), axes=[1], keepdims=false) }"
"""What ``--warm`` compiles before the workload (a reduction of an ``exp``: the schedule, the transform
interpreter, the vector lowering and LLVM's code generation all run once)."""


def _workloads(holdout: int | None) -> list[Any]:
    sys.path.insert(0, HERE)
    import suite
    return suite.workloads() if holdout is None else suite.holdout(holdout)


def _child(name: str, warm: bool, holdout: int | None) -> dict[str, float]:
    import importlib
    import threading

    import llvmlite.binding  # noqa: F401
    import mlir.ir  # noqa: F401
    import mlir.passmanager  # noqa: F401
    import numpy as np

    import mind
    from mind.compiler.backend.cpu import codegen, lowering
    from mind.compiler.backend.cpu.api import compile_function  # noqa: F401
    from mind.compiler.frontend.cache import compile_cached  # noqa: F401
    w = next(w for w in _workloads(holdout) if w.name == name)
    import suite

    spent: dict[str, float] = {}
    lock = threading.Lock()

    def timed(label: Callable[..., str], fn: Callable[..., Any]) -> Callable[..., Any]:
        def wrapper(*a: Any, **k: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return fn(*a, **k)
            finally:
                with lock:
                    key = label(*a, **k)
                    spent[key] = spent.get(key, 0.0) + time.perf_counter() - t0
        return wrapper

    for stage, module, attr in STAGES:
        m = importlib.import_module(module)
        setattr(m, attr, timed(lambda *a, _s=stage, **k: _s, getattr(m, attr)))
    for stage, attr in UNLOCKED:
        setattr(codegen._Unlocked, attr, classmethod(timed(lambda *a, _s=stage, **k: _s,
                                                           getattr(codegen._Unlocked, attr).__func__)))
    from mind.compiler.backend.cpu import engine
    engine.Kernel.__call__ = timed(lambda *a, **k: "first call", engine.Kernel.__call__)
    pipeline_stage = {"fusion": "prefusion", "lower": "bufferize+lower"}
    lowering.run_pipeline = timed(lambda ctx, text, module, stage, diags: pipeline_stage.get(stage, stage),
                                  lowering.run_pipeline)

    if warm:
        mind.compile(WARM_UP, fn="g", cpu=suite.ISA)(np.ones((64, 32), np.float32))
        spent.clear()
    arrays = w.inputs(np.random.default_rng(0))
    t0 = time.perf_counter()
    mind.compile(w.source, fn=w.fn, cpu=suite.ISA)(*arrays)
    spent["total"] = time.perf_counter() - t0
    inner = sum(v for k, v in spent.items() if k != "total")
    spent["other"] = spent["total"] - inner
    return spent


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--only", nargs="*")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--warm", action="store_true", help="compile a small program first in each process")
    ap.add_argument("--all", action="store_true", help="every suite workload, then each stage's share")
    ap.add_argument("--holdout", type=int, help="the held-out workloads of this seed (suite.py --holdout)")
    ap.add_argument("--child")
    args = ap.parse_args()
    if args.child:
        print(json.dumps(_child(args.child, args.warm, args.holdout)))
        return
    known = [w.name for w in _workloads(args.holdout)]
    if args.all or (args.holdout is not None and not args.only):
        args.only = known
    elif not args.only:
        args.only = list(DEFAULT)
    unknown = [n for n in args.only if n not in known]
    if unknown:
        where = "the suite" if args.holdout is None else f"the held-out draw {args.holdout}"
        ap.error(f"no workload {', '.join(unknown)} in {where}; its workloads: {' '.join(known)}")
    env = dict(os.environ, MIND_CACHE="off", PYTHONPYCACHEPREFIX=os.path.join(ROOT, "build", "pycache"))
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # bytecode, as an install has (``suite.fresh_cold``)
    print(f"{'workload':40s}" + "".join(f"{c[:10]:>11s}" for c in COLUMNS))
    totals = dict.fromkeys(COLUMNS, 0.0)
    child = [sys.executable, os.path.abspath(__file__)] + (["--warm"] if args.warm else []) + \
        ([] if args.holdout is None else ["--holdout", str(args.holdout)]) + ["--child"]
    for name in args.only:
        runs = []
        for _ in range(args.repeat):
            r = subprocess.run(child + [name], capture_output=True, text=True, env=env, cwd=ROOT, timeout=600)
            if r.returncode != 0:
                sys.exit(f"{name}: {r.stderr.strip().splitlines()[-1:]}")
            runs.append(json.loads(r.stdout.strip().splitlines()[-1]))
        med = {c: statistics.median(run.get(c, 0.0) for run in runs) for c in COLUMNS}
        for c in COLUMNS:
            totals[c] += med[c]
        print(f"{name:40s}" + "".join(f"{1000 * med[c]:11.1f}" for c in COLUMNS), flush=True)
    if args.all or args.holdout is not None:
        print(f"{'share of the total':40s}" + "".join(f"{100 * totals[c] / totals['total']:10.1f}%"
                                                     for c in COLUMNS))


if __name__ == "__main__":
    main()
