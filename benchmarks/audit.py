"""Benchmark of `mind audit`: the whole command (a fresh process, as a user runs it) and
`mind audit --check`, on the MLIR training example (`examples/train_mlp.mind`, without and with
`--backend cpu`) and on a generated 10,000-op Core IR dump with symbolic dims (the generator of
`benchmarks/verify.py`, so both benchmarks measure the same program).

    python benchmarks/audit.py [--repeat 3] [--ops 10000] [--no-cpu]

Prints a table (median wall-clock seconds of --repeat runs; the per-section times of the last run
come from the bundle's timings.json) and writes benchmarks/results/audit.json.  Target: seconds, not
minutes.  The first cpu run compiles kernels and the conformance cases' kernels into the cache
($MIND_CACHE_DIR); its time is reported apart ("cold").
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def generate_dump(n_ops: int, path: str) -> None:
    """Write the 10,000-op dump of ``benchmarks/verify.py`` (``generate``) to ``path``."""
    spec = importlib.util.spec_from_file_location("bench_verify", os.path.join(HERE, "verify.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(module.generate(n_ops))


def _mind(args: list[str]) -> float:
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "mind.cli.main", *args], cwd=ROOT, capture_output=True, text=True)
    dt = time.perf_counter() - t0
    if proc.returncode not in (0, 1):
        raise SystemExit(f"mind {' '.join(args)} failed ({proc.returncode}):\n{proc.stderr}")
    return dt


def measure(name: str, program: str, extra: list[str], repeat: int, tmp: str) -> dict:
    out = os.path.join(tmp, name)
    cold = None
    if "--backend" in extra:
        shutil.rmtree(out, ignore_errors=True)
        cold = _mind(["audit", program, "--out", out, *extra])
    runs, checks = [], []
    for _ in range(repeat):
        shutil.rmtree(out, ignore_errors=True)
        runs.append(_mind(["audit", program, "--out", out, "--timings", *extra]))
        checks.append(_mind(["audit", "--check", out]))
    with open(os.path.join(out, "timings.json"), encoding="utf-8") as fh:
        sections = json.load(fh)["wall_clock_seconds"]
    with open(os.path.join(out, "audit.json"), encoding="utf-8") as fh:
        doc = json.load(fh)
    size = sum(os.path.getsize(os.path.join(out, n)) for n in os.listdir(out))
    ops = sum(f["ops"] for f in doc["subject"]["functions"])
    return {"name": name, "program": program, "options": extra, "ops": ops,
            "obligations": sum(doc["summary"]["obligations"].values()), "queries": doc["summary"]["queries"],
            "verdict": doc["summary"]["verdict"], "bundle_bytes": size, "files": len(os.listdir(out)),
            "audit_s": round(statistics.median(runs), 3), "check_s": round(statistics.median(checks), 3),
            "cold_s": None if cold is None else round(cold, 3),
            "sections_s": {k: round(v, 3) for k, v in sections.items()}}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--ops", type=int, default=10_000)
    ap.add_argument("--no-cpu", action="store_true", help="skip the --backend cpu row")
    ap.add_argument("--out", default=os.path.join(HERE, "results", "audit.json"))
    args = ap.parse_args(argv)
    rows = []
    with tempfile.TemporaryDirectory(prefix="mind-bench-audit-") as tmp:
        dump = os.path.join(tmp, f"dump{args.ops}.mir")
        generate_dump(args.ops, dump)
        cases = [("train_mlp", "examples/train_mlp.mind", [])]
        if not args.no_cpu:
            cases.append(("train_mlp+cpu", "examples/train_mlp.mind", ["--backend", "cpu"]))
        cases.append((f"dump{args.ops}", dump, []))
        for name, program, extra in cases:
            rows.append(measure(name, program, extra, args.repeat, tmp))
    print(f"{'program':>14} {'ops':>6} {'obligations':>11} {'queries':>7} {'audit s':>8} {'check s':>8} "
          f"{'cold s':>7} {'bundle MB':>9}  slowest sections")
    for r in rows:
        slow = sorted(((v, k) for k, v in r["sections_s"].items() if k != "total"), reverse=True)[:3]
        cold = "-" if r["cold_s"] is None else f"{r['cold_s']:.2f}"
        print(f"{r['name']:>14} {r['ops']:>6} {r['obligations']:>11} {r['queries']:>7} {r['audit_s']:>8.2f} "
              f"{r['check_s']:>8.2f} {cold:>7} {r['bundle_bytes'] / 1e6:>9.1f}  "
              + ", ".join(f"{k} {v:.2f}" for v, k in slow))
    payload = {"machine": platform.platform(), "python": sys.version.split()[0], "cpu_count": os.cpu_count(),
               "repeat": args.repeat, "rows": rows}
    sys.path.insert(0, ROOT)
    from mind.driver_io import atomic_write

    atomic_write(args.out, lambda fh: fh.write(json.dumps(payload, indent=2) + "\n"), mode="w")
    return 0


if __name__ == "__main__":
    sys.exit(main())
