"""Compiled code: for each backend an audit is asked for, the build artifacts' hashes, a rebuild
in a second process compared byte for byte, and a differential run against the reference.

The backends are one table, ``BUILDS``: a function that builds one Core IR function, specialized
to concrete sizes, into its artifacts (file name -> bytes).  The ``cpu`` entry is ``mind build
--target cpu`` (``mind.compiler.build``: a portable shared object, its C header, the launch plan,
the Core IR and the manifest; ``docs/build.md``), byte-identical across processes for the same
input; a ``cuda`` entry is one more row.

The rebuild runs ``python -m mind.verify.audit.compiled BACKEND IR FN SIZES`` in a fresh process
(``PYTHONHASHSEED`` randomised) and compares each artifact's SHA-256 with the first build's.

The differential run calls the compiled function's *probe* (the function with every op's value
returned, ``mind.bisect.probe_function``) on seeded random inputs and on edge values (±0,
±1, ±inf, NaN, the subnormal minimum, the integer range ends), and checks every op against the
reference applied to the compiled operands (``reference.accuracy.check_op``), so errors never
accumulate: an op outside its accuracy bound is a finding at that op.  Per result it records the
largest error against the bound of the op that produces it, and the largest ULP distance to the
reference run of the whole function (informative: a composition has no bound in the spec).
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import tempfile
from typing import Any, Callable

import numpy as np

from mind.ir.core import Function, Module

__all__ = ["BUILDS", "compiled_section", "recheck", "choose_sizes"]

MAX_PROBE_VALUES = 1000  # a kernel takes at most 1024 pointers: larger functions check results only


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _build_cpu(fn: Function, env: dict[str, int]) -> dict[str, bytes]:
    """The portable artifact of ``mind build --target cpu`` (``mind.compiler.build``): the shared
    object, its C header, the launch plan, the Core IR and the manifest of their SHA-256s."""
    from mind.compiler.build import build_artifact

    return build_artifact(fn, "cpu", env)


#: backend -> build(function, sizes) -> {artifact name: bytes}
BUILDS: dict[str, Callable[[Function, dict[str, int]], dict[str, bytes]]] = {"cpu": _build_cpu}


def choose_sizes(fn: Function) -> dict[str, int] | None:
    """Sizes for the function's symbols: 3 for each where the premises allow it, else the
    decision procedure's allowed example; None when no sizes are allowed."""
    syms = fn.symbols()
    if not syms:
        return {}
    decider = fn.arith().decider
    for v in (3, 2, 4, 1):
        env = {s: v for s in syms}
        if decider is None or decider.allowed(env):
            return env
    example = decider.example() if decider is not None else None
    if example is None:
        return None
    return {s: example.get(s, 0) for s in syms}


def _rebuild_in_subprocess(backend: str, fn: Function, env: dict[str, int]) -> dict[str, str] | str:
    """SHA-256 of each artifact built by a fresh process, or why it failed."""
    with tempfile.TemporaryDirectory(prefix="mind-audit-rebuild-") as d:
        ir = os.path.join(d, "fn.mir")
        with open(ir, "w", encoding="utf-8") as fh:
            fh.write(Module([fn]).text())
        proc = subprocess.run([sys.executable, "-m", "mind.verify.audit.compiled", backend, ir, fn.name,
                               json.dumps(env, sort_keys=True)], capture_output=True, text=True, timeout=900,
                              env={**os.environ, "PYTHONHASHSEED": "random"})
    if proc.returncode != 0:
        return f"the rebuild failed (exit {proc.returncode}): {proc.stderr.strip()[-400:]}"
    return json.loads(proc.stdout)


# -- inputs ----------------------------------------------------------------------------------------

_FLOAT_EDGES = (0.0, -0.0, 1.0, -1.0, 0.5, -2.0, float("inf"), float("-inf"), float("nan"), 1e-30, 3.0)


def _edge_array(dtype: np.dtype, shape: tuple[int, ...], shift: int) -> np.ndarray:
    n = int(np.prod(shape, dtype=np.int64))
    if dtype.kind == "f":
        tiny = np.finfo(dtype).smallest_subnormal
        values = np.array(_FLOAT_EDGES + (float(tiny), float(np.finfo(dtype).max)), dtype=dtype)
    elif dtype.kind == "i":
        info = np.iinfo(dtype)
        values = np.array([0, 1, -1, 2, info.min, info.max, 7, -8], dtype=dtype)
    else:
        values = np.array([False, True], dtype=dtype)
    return np.resize(np.roll(values, shift), n).reshape(shape)


def _random_array(rng: np.random.Generator, dtype: np.dtype, shape: tuple[int, ...]) -> np.ndarray:
    if dtype.kind == "f":
        return rng.standard_normal(shape).astype(dtype)
    if dtype.kind == "i":
        return rng.integers(-8, 9, size=shape).astype(dtype)
    return rng.integers(0, 2, size=shape).astype(bool)


def _inputs(fn: Function, env: dict[str, int], kind: str, seed: int) -> list[np.ndarray]:
    from mind.spec.dims import evaluate

    rng = np.random.default_rng(seed)
    out = []
    for i, p in enumerate(fn.params):
        shape = tuple(int(evaluate(d, env)) for d in p.type.shape)
        dtype = np.dtype(p.type.dtype.numpy)
        out.append(_random_array(rng, dtype, shape) if kind == "random" else _edge_array(dtype, shape, i))
    return out


# -- the differential run ----------------------------------------------------------------------------


def _ulp_max(a: np.ndarray, b: np.ndarray) -> int | None:
    from mind.spec.accuracy import ulp_distance
    from mind.spec.dtypes import from_numpy

    if a.dtype.kind != "f" or a.size == 0:
        return None
    return int(np.max(ulp_distance(a, b, from_numpy(a.dtype))))


def _op_error(op: Any, operands: list[np.ndarray], attrs: dict[str, Any], got: np.ndarray,
              want: np.ndarray) -> tuple[str, str, bool]:
    """(largest error, its bound, within) of one op's compiled result against the reference on
    the same operands."""
    from mind.reference.accuracy import accumulation, check_op
    from mind.spec import accuracy as acc
    from mind.spec.ops import OPS

    mismatch = check_op(op.op, operands, attrs, got, want)
    cls = acc.get(OPS[op.op].accuracy)
    if got.dtype.kind != "f" or got.size == 0:
        return ("0" if mismatch is None else "values differ"), "exact", mismatch is None
    dist = _ulp_max(got, want)
    if cls.kind in ("exact", "ulp"):
        bound = 0 if cls.kind == "exact" else cls.ulp[got.dtype.name.replace("float", "f")] + acc.REFERENCE_ULP
        return f"{dist} ULP", f"{bound} ULP", mismatch is None
    n, abs_sum = accumulation(op.op, operands, attrs)
    dt = "f32" if got.dtype == np.float32 else "f64"
    tol = 2.0 * np.broadcast_to(acc.sum_bound(int(n), abs_sum, dt), want.shape)
    with np.errstate(invalid="ignore", over="ignore"):
        err = np.abs(got.astype(np.float64) - want.astype(np.float64))
        finite = np.isfinite(err) & np.isfinite(tol)
        worst = int(np.argmax(np.where(finite, err - tol, -np.inf))) if np.any(finite) else 0
    e = float(err.reshape(-1)[worst]) if finite.any() else 0.0
    t = float(tol.reshape(-1)[worst]) if finite.any() else 0.0
    return f"{e!r}", f"{t!r} (2·(γ({n})·Σ|x| + {n}·η))", mismatch is None


def differential_run(backend: str, fn: Function, env: dict[str, int], kind: str, seed: int) -> dict[str, Any]:
    from mind.backends import compile_for
    from mind.bisect import probe_function
    from mind.calling import run_reference
    from mind.reference.bisect import reference_result

    args = _inputs(fn, env, kind, seed)
    with np.errstate(all="ignore"):
        reference = [np.asarray(r) for r in run_reference(fn, args)]
    probing = 0 < len(fn.ops) <= MAX_PROBE_VALUES
    target = probe_function(fn) if probing else fn
    got = [np.asarray(v) for v in compile_for(target, backend, threads=1)(list(args))]
    values = {id(p): a for p, a in zip(fn.params, args)}
    out_of_bound = []
    errors: dict[int, tuple[str, str, bool]] = {}
    if probing:
        for i, (op, value) in enumerate(zip(fn.ops, got)):
            operands = [values[id(v)] for v in op.operands]
            attrs, want = reference_result(op, operands, env)
            errors[id(op.result)] = e = _op_error(op, operands, attrs, value, want)
            if not e[2]:
                out_of_bound.append({"index": i, "value": op.result.name, "op": op.op, "max_error": e[0],
                                     "bound": e[1]})
            values[id(op.result)] = value
        results = [values[id(v)] for v in fn.results]
    else:
        results = got
    rows = []
    for i, (v, r, ref) in enumerate(zip(fn.results, results, reference)):
        e = errors.get(id(v))
        if e is None:  # a parameter returned as is, or no probe: compare with the reference run
            same = bool(np.array_equal(r, ref, equal_nan=r.dtype.kind == "f"))
            e = ("0" if same else "differs", "exact (no per-op probe)", same)
        rows.append({"index": i, "value": v.name, "max_error": e[0], "bound": e[1], "within_bound": e[2],
                     "end_to_end_max_ulp": _ulp_max(r, ref)})
    return {"inputs": kind, "seed": seed if kind == "random" else None, "ops_checked": len(errors),
            "ops_out_of_bound": out_of_bound, "results": rows}


def _function_entry(backend: str, fn: Function, seed: int, files: dict[str, bytes]) -> tuple[dict[str, Any], list[str]]:
    """The record of one function on one backend, and the problems it raises."""
    env = choose_sizes(fn)
    if env is None:
        return {"function": fn.name, "skipped": "no sizes satisfy the function's premises"}, []
    artifacts = BUILDS[backend](fn, env)
    again = _rebuild_in_subprocess(backend, fn, env)
    problems = []
    rows = []
    for name, data in sorted(artifacts.items()):
        file = f"{backend}-{fn.name}-{name}"
        files[file] = data
        same = isinstance(again, dict) and again.get(name) == _sha(data)
        rows.append({"file": file, "sha256": _sha(data), "bytes": len(data), "rebuild_identical": same})
        if not same:
            problems.append(f"{file}: the rebuild in a second process "
                            + (again if isinstance(again, str) else f"gave SHA-256 {again.get(name)}"))
    runs = [differential_run(backend, fn, env, kind, seed) for kind in ("random", "edge")]
    return {"function": fn.name, "sizes": env, "artifacts": rows, "runs": runs}, problems


def compiled_section(module: Module, options: Any, findings: Any, files: dict[str, bytes]) -> list[dict[str, Any]]:
    out = []
    for backend in options.backends:
        fns = []
        for fn in module.functions:
            entry, problems = _function_entry(backend, fn, options.seed, files)
            fns.append(entry)
            for p in problems:
                findings.add("compiled", "error", "compiled.rebuild", p)
            for run in entry.get("runs", []):
                for o in run["ops_out_of_bound"]:
                    op = fn.ops[o["index"]]
                    findings.add("compiled", "error", f"{o['op']}.accuracy" if o["op"] in _INEXACT else f"{o['op']}.semantics",
                                 f"{backend}, {run['inputs']} inputs: `%{o['value']} = {o['op']}(...)` in @{fn.name} "
                                 f"is outside its accuracy bound: largest error {o['max_error']}, bound {o['bound']}",
                                 (op.span or fn.span).to_json() if (op.span or fn.span) else None)
        out.append({"backend": backend, "functions": fns})
    return out


_INEXACT = ("exp", "log", "reduce_sum", "matmul", "conv2d")


def recheck(doc: dict[str, Any], files: dict[str, bytes], checked: dict[str, int]) -> list[tuple[str, str]]:
    """``--check``: every differential run repeated on the bundle's canonical IR; (file, problem)."""
    from mind.ir.parser import parse_module

    module = parse_module(files[doc["subject"]["ir_file"]].decode("utf-8"), doc["subject"]["ir_file"])
    fns = {f.name: f for f in module.functions}
    problems = []
    for b in doc["compiled"]:
        for entry in b["functions"]:
            fn = fns.get(entry["function"])
            if fn is None or "runs" not in entry:
                continue
            for run in entry["runs"]:
                again = differential_run(b["backend"], fn, entry["sizes"], run["inputs"],
                                         run["seed"] if run["seed"] is not None else 0)
                checked["differential runs repeated"] = checked.get("differential runs repeated", 0) + 1
                for old, new in zip(run["results"], again["results"]):
                    if not new["within_bound"]:
                        problems.append(("audit.json", f"{b['backend']} @{fn.name} result {new['index']} "
                                                       f"({run['inputs']} inputs) is now outside its bound: "
                                                       f"{new['max_error']} > {new['bound']}"))
                    elif new["max_error"] != old["max_error"]:
                        problems.append(("audit.json", f"{b['backend']} @{fn.name} result {new['index']} "
                                                       f"({run['inputs']} inputs): largest error now "
                                                       f"{new['max_error']}, the bundle records {old['max_error']}"))
    return problems


def _main(argv: list[str]) -> int:
    """The rebuild process: build one function and print each artifact's SHA-256 as JSON."""
    from mind.ir.parser import parse_module

    backend, path, name, sizes = argv
    with open(path, encoding="utf-8") as fh:
        module = parse_module(fh.read(), path)
    fn = next(f for f in module.functions if f.name == name)
    artifacts = BUILDS[backend](fn, json.loads(sizes))
    sys.stdout.write(json.dumps({n: _sha(d) for n, d in sorted(artifacts.items())}))
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
