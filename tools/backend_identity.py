"""Byte-identity check of the CPU backend: SHA-256 of the MLIR, LLVM IR and linked objects it makes.

Why: a refactor of the backend must not change what it produces.  This tool records, for a corpus
of programs, the SHA-256 of

* the MLIR text of each function (``mlir``),
* its LLVM IR on one thread with the cost model and with every op scheduled (``llvm1``,
  ``llvm1-all``), and on two threads (``llvm2``; for a third of the random programs),
* the shared objects the kernel cache holds after compiling it on one and on two threads through
  ``mind.compile`` (``objects1``, ``objects2``; examples and benchmark programs only),

and compares them with a recorded run::

    python tools/backend_identity.py --write /tmp/backend-hashes.json   # before a change
    python tools/backend_identity.py --check /tmp/backend-hashes.json   # after: exit 1 on a difference

The corpus is the functions of ``examples/`` (symbols bound to fixed values), the programs of
``benchmarks/cpu.py``, and ``--random N`` programs drawn by the differential test's strategy
(``tests/backend_cpu/test_differential.py``) at small and tiled shapes.  The file records each
program's canonical Core IR text, and ``--check`` compiles that text: the check does not depend on
the frontend or on how hypothesis draws.  The hashes depend on the machine (host CPU, prebuilt GEMM
level, OpenMP runtime): compare runs on one machine only.
"""

from __future__ import annotations

import argparse
import glob
import hashlib
import json
import os
import sys
import tempfile
from typing import Any, Callable, Iterator

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SYMBOL_VALUE = 32
"""The value every symbolic dim of an example takes (the emitted code is specialized per shape)."""


def _sha(data: str | bytes) -> str:
    return hashlib.sha256(data.encode("utf-8") if isinstance(data, str) else data).hexdigest()


# ------------------------------------------------------------------------ the backend's interface
# (the one place that names the backend's functions: kept in step with the backend's API)

def _mlir(fn: Any, env: dict[str, int]) -> tuple[str, str]:
    from mind.compiler.backend.cpu.api import emit_cpu_mlir
    from mind.compiler.backend.cpu.options import CpuOptions
    return emit_cpu_mlir(fn, env, CpuOptions.resolve(threads=1).library)


def _llvm(text: str, name: str, threads: int, schedule: bool | str) -> str:
    from mind.compiler.backend.cpu.engine import mlir_to_llvm_ir
    from mind.compiler.backend.cpu.options import CpuOptions
    return mlir_to_llvm_ir(text, name, CpuOptions.resolve(threads=threads, schedule=schedule)).llvm_ir


def _objects(fn: Any, threads: int, args: list[Any]) -> list[str]:
    """SHA-256 of every shared object the kernel cache holds after one call of ``fn``."""
    import mind
    from mind.compiler.backend.cpu.engine import wait_for_cache_writes
    with tempfile.TemporaryDirectory() as root:
        os.chmod(root, 0o700)
        old = os.environ.get("MIND_CACHE_DIR")
        os.environ["MIND_CACHE_DIR"] = root
        try:
            mind.compile(_module_of(fn), fn=fn.name, threads=threads)(*args)
            wait_for_cache_writes()
        finally:
            if old is None:
                os.environ.pop("MIND_CACHE_DIR")
            else:
                os.environ["MIND_CACHE_DIR"] = old
        return sorted(_sha(open(p, "rb").read()) for p in glob.glob(os.path.join(root, "*", "*.so")))


# ----------------------------------------------------------------------------------- the corpus

def _module_of(fn: Any) -> Any:
    from mind.ir.core import Module
    return Module([fn])


def _text(fn: Any) -> str:
    from mind.ir.printer import print_function
    return print_function(fn) + "\n"


def _parse(text: str) -> Any:
    from mind.ir.parser import parse_module
    return parse_module(text, "<corpus>").functions[0]


def _examples() -> Iterator[tuple[str, str, bool]]:
    """(name, Core IR text, with objects?) of every function of ``examples/`` and the benchmarks."""
    from mind.compiler.frontend.api import compile_source
    from mind.ir.parser import parse_module
    files = sorted(glob.glob(os.path.join(ROOT, "examples", "*.m*")) + glob.glob(os.path.join(ROOT, "examples", "bench", "*.mind")))
    for path in files:
        with open(path, encoding="utf-8") as f:
            src = f.read()
        module = compile_source(src, path) if path.endswith(".mind") else parse_module(src, path)
        for fn in module.functions:
            yield f"{os.path.relpath(path, ROOT)}:{fn.name}", _text(fn), False
    sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
    import cpu as bench  # benchmarks/cpu.py
    for name in bench.ORDER:
        src, fn_name = bench.source_of(name)
        module = compile_source(src, f"<bench:{name}>")
        fn = next(f for f in module.functions if f.name == fn_name)
        yield f"bench:{name}", _text(fn), name != "fused_chain"  # (a 64 MiB input: objects of it are slow)


def _random(count: int) -> Iterator[tuple[str, str, bool]]:
    """``count`` programs of the differential test's strategy, half at small and half at tiled shapes."""
    from hypothesis import HealthCheck, given, settings, strategies as st
    sys.path.insert(0, os.path.join(ROOT, "tests", "backend_cpu"))
    import test_differential as diff
    found: list[str] = []
    for label, dims in (("small", st.integers(1, 4)), ("tiled", st.sampled_from([1, 2, 3, 5, 8, 16, 17, 32, 48, 64]))):
        @settings(max_examples=count // 2, derandomize=True, database=None, deadline=None,
                  suppress_health_check=list(HealthCheck))
        @given(diff.programs(dims))
        def draw(prog: Any) -> None:
            found.append(_text(prog[0]))
        draw()
    for i, text in enumerate(dict.fromkeys(found)):
        yield f"random:{i}", text, False


def _inputs(fn: Any, env: dict[str, int]) -> list[Any]:
    import numpy as np

    from mind.spec.dims import substitute
    rng = np.random.default_rng(0)
    shapes = [[int(substitute(d, env)) for d in p.type.shape] for p in fn.params]
    return [(rng.standard_normal(s) * 0.1).astype(p.type.dtype.numpy) if p.type.dtype.is_float
            else np.ones(s, p.type.dtype.numpy) for p, s in zip(fn.params, shapes)]


def _attempt(what: Callable[[], Any]) -> Any:
    from mind.diagnostics import MindError
    try:
        return what()
    except MindError as e:
        return "error " + " ".join(e.codes)


def hashes(text: str, objects: bool, two_threads: bool) -> dict[str, Any]:
    fn = _parse(text)
    env = {s: SYMBOL_VALUE for s in fn.symbols()}
    emitted = _attempt(lambda: _mlir(fn, env))
    if isinstance(emitted, str):
        return {"mlir": emitted}
    mlir, name = emitted
    out: dict[str, Any] = {"mlir": _sha(mlir)}
    runs = [("llvm1", 1, True), ("llvm1-all", 1, "all")] + ([("llvm2", 2, True)] if two_threads else [])
    for key, threads, schedule in runs:
        out[key] = _attempt(lambda: _sha(_llvm(mlir, name, threads, schedule)))
    if objects:
        for threads in (1, 2):
            out[f"objects{threads}"] = _attempt(lambda: _objects(fn, threads, _inputs(fn, env)))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    mode = ap.add_mutually_exclusive_group(required=True)
    mode.add_argument("--write", metavar="FILE", help="record the corpus and its hashes")
    mode.add_argument("--check", metavar="FILE", help="recompute the hashes of a recorded corpus and compare")
    ap.add_argument("--random", type=int, default=300, help="random programs in a new corpus (default 300)")
    args = ap.parse_args(argv)
    os.environ.pop("MIND_CPU_SCHEDULE", None)  # the options the hashes are recorded for are given explicitly
    if args.write:
        corpus = [{"name": n, "ir": t, "objects": o} for n, t, o in [*_examples(), *_random(args.random)]]
    else:
        with open(args.check, encoding="utf-8") as f:
            corpus = json.load(f)["programs"]
    differences = 0
    for i, entry in enumerate(corpus):
        got = hashes(entry["ir"], entry["objects"], two_threads=not entry["name"].startswith("random:") or i % 3 == 0)
        if args.write:
            entry["hashes"] = got
        elif got != entry["hashes"]:
            differences += 1
            changed = sorted(k for k in set(got) | set(entry["hashes"]) if got.get(k) != entry["hashes"].get(k))
            print(f"DIFFERS {entry['name']}: {', '.join(changed)}")
    if args.write:
        with open(args.write, "w", encoding="utf-8") as f:
            json.dump({"programs": corpus}, f, indent=0, sort_keys=True)
        print(f"recorded {len(corpus)} programs in {args.write}")
        return 0
    print(f"{len(corpus) - differences} of {len(corpus)} programs identical")
    return 1 if differences else 0


if __name__ == "__main__":
    sys.exit(main())
