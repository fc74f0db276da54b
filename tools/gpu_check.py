"""Run the cuda backend's kernels on a GPU machine that has no MLIR: prepare here, run there, compare here.

    python tools/gpu_check.py prepare DIR [--select GLOB] [--limit N] [--max-mib 60] [--jobs J]
    python tools/gpu_check.py prepare DIR --differential N [--seed S] [--jobs J]
    python tools/gpu_check.py run DIR --out RESULTS          # on the GPU machine: numpy + cuda-bindings
    python tools/gpu_check.py compare DIR RESULTS [--json] [--jobs J]   # here, or there (NumPy and mind alone)

``prepare`` builds, for each program of the conformance suite that runs (or those matching
``--select``), the ``mind build --target cuda`` artifact of its *probe* (every op's value returned,
``mind.bisect.probe_function``) and saves its inputs as ``.npy``: at most ``--max-mib`` in all, so
that the folder travels to the GPU machine in one call (64 MiB).  ``run`` loads each artifact with
``mind.runtime`` alone (it checks every hash first) and saves every returned value, or the
diagnostic.  ``compare`` judges each case's results as the conformance runner does
(``mind.conformance.verdict``) and, for a failing case, names the first op whose value leaves its
accuracy bound on the GPU's own operands (``mind.reference.bisect``).  It prints the counts; a case ``conformance/expectations/cuda.expect``
lists is counted ``xfailed`` when it fails and ``xpassed`` (a failure) when it passes.

``--differential N`` prepares, instead of the conformance suite, ``N`` random programs of the cpu
backend's differential test (``tests/backend_cpu/test_differential.py``: a quarter with tile-sized
dims), drawn with hypothesis under ``--seed``; every op's value is a result, and ``compare`` checks
each op against the reference applied to the GPU's own operands (``reference.accuracy.check_op``),
naming the first that diverges.  Every prepared folder also holds the ``interop`` artifact, with
which ``run`` checks the driver paths that conformance cases do not take (``gpu_interop.py``):
device arguments without a copy, results left on the device, the PTX path, coded errors.
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import os
import sys
from collections import Counter
from typing import Any

import numpy as np


def _sibling(name: str) -> Any:
    """A module of this folder (``gpu_interop``), loaded by path: the tools are scripts, not a package."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(name, os.path.join(os.path.dirname(os.path.abspath(__file__)), f"{name}.py"))
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


def _safe(case_id: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in case_id)


def _draw_differential(n: int, seed: int) -> list[tuple[str, Any, dict[str, np.ndarray]]]:
    """``n`` programs of the cpu differential test's strategy, three quarters with small dims and a
    quarter with tile-sized ones, drawn reproducibly from ``seed``."""
    import importlib.util

    from hypothesis import HealthCheck, Phase, given, seed as hseed, settings

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    spec = importlib.util.spec_from_file_location(
        "mind_differential", os.path.join(root, "tests", "backend_cpu", "test_differential.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    from hypothesis import strategies as st

    drawn: list[tuple[str, Any, dict[str, np.ndarray]]] = []
    for kind, count, strategy in (("small", n - n // 4, module.programs()),
                                  ("tiled", n // 4, module.programs(st.sampled_from(module.TILED_DIMS)))):
        found: list[Any] = []

        @hseed(seed)
        @settings(max_examples=count, database=None, phases=[Phase.generate], deadline=None,
                  suppress_health_check=list(HealthCheck))
        @given(strategy)
        def collect(program: Any) -> None:
            found.append(program)

        if count:
            collect()
        drawn += [(f"differential/{kind}/{i:04d}", fn, inputs) for i, (fn, inputs) in enumerate(found)]
    return drawn


def _build(job: tuple[str, str, list[np.ndarray], bool]) -> tuple[str, dict[str, bytes] | str]:
    """One case's cuda artifact (its probe for a conformance case), or the diagnostic that stops it."""
    from mind.bisect import probe_function
    from mind.calling import bind_arguments
    from mind.compiler.build import build_artifact
    from mind.diagnostics import MindError
    from mind.ir.parser import parse_module

    case_id, text, inputs, probe = job
    fn = parse_module(text, case_id).functions[0]
    try:
        _, env = bind_arguments(fn, inputs)
        return case_id, build_artifact(probe_function(fn) if probe else fn, "cuda", env)
    except MindError as err:
        return case_id, f"{err.diagnostics[0].code}: {err.diagnostics[0].message}"


def _jobs(select: str | None, limit: int | None, differential: int | None,
          seed: int) -> list[tuple[str, str, list[np.ndarray], bool]]:
    """What ``prepare`` builds: (id, Core IR text, inputs in parameter order, build its probe)."""
    from mind.calling import bind_arguments
    from mind.ir.printer import print_function

    if differential is not None:
        out = []
        for case_id, fn, inputs in _draw_differential(differential, seed):
            arrays, _ = bind_arguments(fn, inputs)
            if fn.ops:
                out.append((case_id, print_function(fn), arrays, False))
        return out
    from mind.conformance.encoding import decode
    from mind.conformance.suite import load_suite
    from mind.ir.parser import parse_module

    suite, out = load_suite(), []
    for e in suite.entries:
        if e.status != "success" or (select and not fnmatch.fnmatch(e.id, select)):
            continue
        if limit is not None and len(out) >= limit:
            break
        case = suite.case(e)
        if parse_module(case["ir"], e.id).functions[0].ops:
            out.append((e.id, case["ir"], [decode(x) for x in case["inputs"]], True))
    return out


def _write_case(folder: str, name: str, files: dict[str, bytes], inputs: list[np.ndarray], text: str) -> None:
    d = os.path.join(folder, name)
    os.makedirs(os.path.join(d, "artifact"))
    for file, data in files.items():
        with open(os.path.join(d, "artifact", file), "xb") as fh:
            fh.write(data)
    for i, a in enumerate(inputs):
        np.save(os.path.join(d, f"in{i}.npy"), a, allow_pickle=False)
    with open(os.path.join(d, "program.mir"), "x", encoding="utf-8") as fh:
        fh.write(text)


def prepare(folder: str, select: str | None, limit: int | None, max_mib: float,
            differential: int | None = None, seed: int = 0, jobs: int = 1) -> int:
    from concurrent.futures import ProcessPoolExecutor
    import multiprocessing

    os.makedirs(folder, exist_ok=False)
    work = _jobs(select, limit, differential, seed)
    by_id = {job[0]: job for job in work}
    index, total, skipped = [], 0, {}
    if jobs > 1:  # spawned workers: no MLIR context crosses a fork
        with ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context("spawn")) as pool:
            built = list(pool.map(_build, work, chunksize=8))
    else:
        built = [_build(job) for job in work]
    for case_id, files in built:
        if isinstance(files, str):
            skipped[case_id] = files
            continue
        _, text, inputs, _ = by_id[case_id]
        size = sum(len(b) for b in files.values()) + sum(a.nbytes for a in inputs)
        if (total + size) / 2**20 > max_mib:
            skipped[case_id] = "over the size budget"
            continue
        total += size
        _write_case(folder, _safe(case_id), files, inputs, text)
        index.append({"id": case_id, "dir": _safe(case_id), "inputs": len(inputs),
                      "kind": "differential" if differential is not None else "conformance"})
    _sibling("gpu_interop").prepare(os.path.join(folder, "interop"))
    with open(os.path.join(folder, "index.json"), "w", encoding="utf-8") as fh:
        json.dump({"cases": index, "skipped": skipped, "bytes": total}, fh, indent=1, sort_keys=True)
    print(f"prepared {len(index)} cases ({total / 2**20:.1f} MiB), skipped {len(skipped)} (see index.json)")
    return 0


def run(folder: str, out: str) -> int:
    """Needs only numpy, cuda-bindings and mind.runtime (no MLIR), from a plain copy of the repository."""
    import mind.runtime
    from mind.diagnostics import MindError

    with open(os.path.join(folder, "index.json"), encoding="utf-8") as fh:
        index = json.load(fh)
    os.makedirs(out, exist_ok=False)
    status: dict[str, Any] = {}
    for c in index["cases"]:
        d = os.path.join(folder, c["dir"])
        try:
            f = mind.runtime.load(os.path.join(d, "artifact"))
            results = f.run([np.load(os.path.join(d, f"in{i}.npy")) for i in range(c["inputs"])])
        except MindError as err:
            status[c["id"]] = {"status": "error", "code": err.diagnostics[0].code,
                               "message": err.diagnostics[0].message}
            continue
        os.makedirs(os.path.join(out, c["dir"]))
        for i, r in enumerate(results):
            np.save(os.path.join(out, c["dir"], f"r{i}.npy"), np.asarray(r), allow_pickle=False)
        status[c["id"]] = {"status": "ok", "values": len(results)}
    with open(os.path.join(out, "status.json"), "w", encoding="utf-8") as fh:
        json.dump(status, fh, indent=1, sort_keys=True)
    print(f"ran {sum(s['status'] == 'ok' for s in status.values())} of {len(status)} cases")
    if os.path.isdir(os.path.join(folder, "interop")):
        checks = _sibling("gpu_interop").check(os.path.join(folder, "interop"))
        with open(os.path.join(out, "interop.json"), "w", encoding="utf-8") as fh:
            json.dump(checks, fh, indent=1, sort_keys=True)
        print(_interop_summary(checks))
    return 0


def _differential_divergence(case_dir: str, n_inputs: int, values: list[np.ndarray]) -> str | None:
    """The first op whose GPU value leaves its bound from the reference applied to the GPU's own
    operands (every op's value is a result of a differential program, in program order), or None."""
    from mind.ir.parser import parse_module
    from mind.reference.bisect import divergence

    with open(os.path.join(case_dir, "program.mir"), encoding="utf-8") as fh:
        fn = parse_module(fh.read(), case_dir).functions[0]
    arrays = [np.load(os.path.join(case_dir, f"in{i}.npy")) for i in range(n_inputs)]
    with np.errstate(all="ignore"):
        first = divergence(fn, arrays, {}, values)
    return None if first is None else str(first)


def _judge(job: tuple[str, str, dict[str, Any], dict[str, Any]]) -> tuple[str, dict[str, Any] | None]:
    """One case's verdict: ("passed" | "failed" | "error", the failure's record or None)."""
    from mind.calling import bind_arguments
    from mind.conformance.encoding import decode
    from mind.conformance.suite import load_suite
    from mind.conformance.verdict import Answer, judge
    from mind.ir.parser import parse_module
    from mind.reference.bisect import divergence

    folder, results, c, s = job
    if s["status"] != "ok":
        return "error", {"id": c["id"], "why": f"{s['code']}: {s['message']}"}
    values = [np.load(os.path.join(results, c["dir"], f"r{i}.npy")) for i in range(s["values"])]
    if c.get("kind") == "differential":
        why = _differential_divergence(os.path.join(folder, c["dir"]), c["inputs"], values)
        return ("passed", None) if why is None else ("failed", {"id": c["id"], "why": why})
    suite = load_suite()
    case = suite.case(suite.entry(c["id"]))
    fn = parse_module(case["ir"], c["id"]).functions[0]
    arrays, env = bind_arguments(fn, [decode(x) for x in case["inputs"]])
    by_value = {id(op.result): v for op, v in zip(fn.ops, values)}
    by_value.update({id(p): a for p, a in zip(fn.params, arrays)})
    verdict = judge(case, Answer("ok", [by_value[id(r)] for r in fn.results]))
    expected = _expectations().lookup(c["id"])
    if verdict.passed:
        if expected is not None:  # strict, as the conformance runner: a stale line must go
            return "xpassed", {"id": c["id"], "why": "passes: remove its line from conformance/expectations/cuda.expect"}
        return "passed", None
    if expected is not None:
        return "xfailed", None
    first = divergence(fn, arrays, env, values)
    return "failed", {"id": c["id"], "why": verdict.message, "first_divergence": str(first) if first else None}


_EXPECT: Any = None


def _expectations() -> Any:
    """The cuda backend's known departures (``conformance/expectations/cuda.expect``)."""
    global _EXPECT
    if _EXPECT is None:
        from mind.conformance import expectations
        from mind.conformance.suite import all_labels

        root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        _EXPECT = expectations.load(os.path.join(root, "conformance", "expectations", "cuda.expect"), set(all_labels()))
    return _EXPECT


def compare(folder: str, results: str, as_json: bool, jobs: int = 1) -> int:
    with open(os.path.join(folder, "index.json"), encoding="utf-8") as fh:
        index = json.load(fh)
    with open(os.path.join(results, "status.json"), encoding="utf-8") as fh:
        status = json.load(fh)
    work = [(folder, results, c, status.get(c["id"], {"status": "error", "code": "-", "message": "not run"}))
            for c in index["cases"]]
    if jobs > 1:  # the reference is NumPy alone: forked workers are safe
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        with ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context("fork")) as pool:
            verdicts = list(pool.map(_judge, work, chunksize=16))
    else:
        verdicts = [_judge(job) for job in work]
    counts = {"passed": 0, "failed": 0, "error": 0, "xfailed": 0, "xpassed": 0}
    failures = []
    for outcome, failure in verdicts:
        counts[outcome] += 1
        if failure is not None:
            failures.append(failure)
    interop = _read_json(os.path.join(results, "interop.json"), [])
    report = {"counts": counts, "skipped_when_prepared": len(index["skipped"]), "failures": failures,
              "not_built": dict(sorted(Counter(v.split(":")[0] for v in index["skipped"].values()).items())),
              "interop": interop}
    if as_json:
        print(json.dumps(report, indent=1, sort_keys=True))
    else:
        print(", ".join(f"{k} {v}" for k, v in counts.items()) + f"; not built: {len(index['skipped'])}")
        for f in failures[:50]:
            print(f"  {f['id']}: {f['why']}" + (f" ({f['first_divergence']})" if f.get("first_divergence") else ""))
        if interop:
            print(_interop_summary(interop))
            for c in interop:
                mark = "skip" if c.get("skipped") else "ok  " if c["ok"] else "FAIL"
                print(f"  {mark} {c['name']}: {c['detail']}")
    interop_ok = all(c["ok"] for c in interop)
    return 0 if counts["failed"] == counts["error"] == counts["xpassed"] == 0 and interop_ok else 1


def _interop_summary(checks: list[dict[str, Any]]) -> str:
    skipped = sum(bool(c.get("skipped")) for c in checks)
    passed = sum(c["ok"] and not c.get("skipped") for c in checks)
    return f"interop: {passed} of {len(checks)} checks pass, {skipped} skipped"


def _read_json(path: str, default: Any) -> Any:
    if not os.path.isfile(path):
        return default
    with open(path, encoding="utf-8") as fh:
        return json.load(fh)


def _positive(text: str) -> int:
    """A positive integer argument (argparse reports anything else as a usage error)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} is not positive")
    return value


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    a = sub.add_parser("prepare")
    a.add_argument("folder")
    a.add_argument("--select")
    a.add_argument("--limit", type=_positive)
    a.add_argument("--max-mib", type=float, default=60.0)
    a.add_argument("--differential", type=_positive, metavar="N", help="N random programs instead of the conformance suite")
    a.add_argument("--seed", type=int, default=0, help="the hypothesis seed of --differential")
    a.add_argument("--jobs", type=_positive, default=1, help="processes that build the artifacts")
    b = sub.add_parser("run")
    b.add_argument("folder")
    b.add_argument("--out", required=True)
    c = sub.add_parser("compare")
    c.add_argument("folder")
    c.add_argument("results")
    c.add_argument("--json", action="store_true")
    c.add_argument("--jobs", type=_positive, default=1, help="processes that judge the cases")
    args = p.parse_args(argv)
    # ``run`` and ``compare`` also work from a plain copy of the repository (the GPU machine's case)
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from mind.checkout import use_checkout
    use_checkout(sys.path[0])
    # the folders each step needs, checked first: a wrong path is a usage error, not a traceback
    if args.command == "prepare":
        if os.path.lexists(args.folder):
            p.error(f"{args.folder} exists: prepare writes a new folder")
        return prepare(args.folder, args.select, args.limit, args.max_mib, args.differential, args.seed, args.jobs)
    if not os.path.isfile(os.path.join(args.folder, "index.json")):
        p.error(f"{args.folder} is not a folder that `prepare` wrote (no index.json)")
    if args.command == "run":
        if os.path.lexists(args.out):
            p.error(f"{args.out} exists: run writes a new folder")
        return run(args.folder, args.out)
    if not os.path.isfile(os.path.join(args.results, "status.json")):
        p.error(f"{args.results} is not a folder that `run` wrote (no status.json)")
    return compare(args.folder, args.results, args.json, args.jobs)


if __name__ == "__main__":
    sys.exit(main())
