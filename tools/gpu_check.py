"""Run the cuda backend's kernels on a GPU machine that has no MLIR: prepare here, run there, compare here.

    python tools/gpu_check.py prepare DIR [--select GLOB] [--limit N] [--max-mib 60]
    python tools/gpu_check.py run DIR --out RESULTS          # on the GPU machine: numpy + cuda-bindings
    python tools/gpu_check.py compare DIR RESULTS [--json]

``prepare`` builds, for each program of the conformance suite that runs (or those matching
``--select``), the ``mind build --target cuda`` artifact of its *probe* (every op's value returned,
``mind.bisect.probe_function``) and saves its inputs as ``.npy``: at most ``--max-mib`` in all, so
that the folder travels to the GPU machine in one call (64 MiB).  ``run`` loads each artifact with
``mind.runtime`` alone (it checks every hash first) and saves every returned value, or the
diagnostic.  ``compare`` judges each case's results as the conformance runner does
(``mind.conformance.verdict``) and, for a failing case, names the first op whose value leaves its
accuracy bound on the GPU's own operands (``mind.reference.bisect``).  It prints the counts.
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import os
import sys
from typing import Any

import numpy as np


def _safe(case_id: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in case_id)


def prepare(folder: str, select: str | None, limit: int | None, max_mib: float) -> int:
    from mind.bisect import probe_function
    from mind.calling import bind_arguments
    from mind.compiler.build import build_artifact
    from mind.conformance.encoding import decode
    from mind.conformance.suite import load_suite
    from mind.diagnostics import MindError
    from mind.ir.parser import parse_module

    os.makedirs(folder, exist_ok=False)
    suite, index, total, skipped = load_suite(), [], 0, {}
    for e in suite.entries:
        if e.status != "success" or (select and not fnmatch.fnmatch(e.id, select)):
            continue
        if limit is not None and len(index) >= limit:
            break
        case = suite.case(e)
        fn = parse_module(case["ir"], e.id).functions[0]
        inputs = [decode(x) for x in case["inputs"]]
        try:
            _, env = bind_arguments(fn, inputs)
            if not fn.ops:
                continue
            files = build_artifact(probe_function(fn), "cuda", env)
        except MindError as err:
            skipped[e.id] = f"{err.diagnostics[0].code}: {err.diagnostics[0].message}"
            continue
        size = sum(len(b) for b in files.values()) + sum(a.nbytes for a in inputs)
        if (total + size) / 2**20 > max_mib:
            skipped[e.id] = "over the size budget"
            continue
        total += size
        d = os.path.join(folder, _safe(e.id))
        os.makedirs(os.path.join(d, "artifact"))
        for name, data in files.items():
            with open(os.path.join(d, "artifact", name), "xb") as fh:
                fh.write(data)
        for i, a in enumerate(inputs):
            np.save(os.path.join(d, f"in{i}.npy"), a, allow_pickle=False)
        index.append({"id": e.id, "dir": _safe(e.id), "inputs": len(inputs)})
    with open(os.path.join(folder, "index.json"), "w", encoding="utf-8") as fh:
        json.dump({"cases": index, "skipped": skipped, "bytes": total}, fh, indent=1, sort_keys=True)
    print(f"prepared {len(index)} cases ({total / 2**20:.1f} MiB), skipped {len(skipped)} (see index.json)")
    return 0


def run(folder: str, out: str) -> int:
    """Needs only numpy, cuda-bindings and mind.runtime (no MLIR), from a plain copy of the repository."""
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from mind.checkout import use_checkout
    use_checkout(sys.path[0])
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
    return 0


def compare(folder: str, results: str, as_json: bool) -> int:
    from mind.calling import bind_arguments
    from mind.conformance.encoding import decode
    from mind.conformance.suite import load_suite
    from mind.conformance.verdict import Answer, judge
    from mind.ir.parser import parse_module
    from mind.reference.bisect import divergence

    with open(os.path.join(folder, "index.json"), encoding="utf-8") as fh:
        index = json.load(fh)
    with open(os.path.join(results, "status.json"), encoding="utf-8") as fh:
        status = json.load(fh)
    suite = load_suite()
    counts = {"passed": 0, "failed": 0, "error": 0}
    failures = []
    for c in index["cases"]:
        s = status.get(c["id"], {"status": "error", "code": "-", "message": "not run"})
        if s["status"] != "ok":
            counts["error"] += 1
            failures.append({"id": c["id"], "why": f"{s['code']}: {s['message']}"})
            continue
        case = suite.case(suite.entry(c["id"]))
        fn = parse_module(case["ir"], c["id"]).functions[0]
        arrays, env = bind_arguments(fn, [decode(x) for x in case["inputs"]])
        values = [np.load(os.path.join(results, c["dir"], f"r{i}.npy")) for i in range(s["values"])]
        by_value = {id(op.result): v for op, v in zip(fn.ops, values)}
        by_value.update({id(p): a for p, a in zip(fn.params, arrays)})
        verdict = judge(case, Answer("ok", [by_value[id(r)] for r in fn.results]))
        if verdict.passed:
            counts["passed"] += 1
            continue
        counts["failed"] += 1
        first = divergence(fn, arrays, env, values)
        failures.append({"id": c["id"], "why": verdict.message, "first_divergence": str(first) if first else None})
    report = {"counts": counts, "skipped_when_prepared": len(index["skipped"]), "failures": failures}
    if as_json:
        print(json.dumps(report, indent=1, sort_keys=True))
    else:
        print(", ".join(f"{k} {v}" for k, v in counts.items()) + f"; not built: {len(index['skipped'])}")
        for f in failures[:50]:
            print(f"  {f['id']}: {f['why']}" + (f" ({f['first_divergence']})" if f.get("first_divergence") else ""))
    return 0 if counts["failed"] == counts["error"] == 0 else 1


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    a = sub.add_parser("prepare")
    a.add_argument("folder")
    a.add_argument("--select")
    a.add_argument("--limit", type=int)
    a.add_argument("--max-mib", type=float, default=60.0)
    b = sub.add_parser("run")
    b.add_argument("folder")
    b.add_argument("--out", required=True)
    c = sub.add_parser("compare")
    c.add_argument("folder")
    c.add_argument("results")
    c.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    # the folders each step needs, checked first: a wrong path is a usage error, not a traceback
    if args.command == "prepare":
        if os.path.lexists(args.folder):
            p.error(f"{args.folder} exists: prepare writes a new folder")
        return prepare(args.folder, args.select, args.limit, args.max_mib)
    if not os.path.isfile(os.path.join(args.folder, "index.json")):
        p.error(f"{args.folder} is not a folder that `prepare` wrote (no index.json)")
    if args.command == "run":
        if os.path.lexists(args.out):
            p.error(f"{args.out} exists: run writes a new folder")
        return run(args.folder, args.out)
    if not os.path.isfile(os.path.join(args.results, "status.json")):
        p.error(f"{args.results} is not a folder that `run` wrote (no status.json)")
    return compare(args.folder, args.results, args.json)


if __name__ == "__main__":
    sys.exit(main())
