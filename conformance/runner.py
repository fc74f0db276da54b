"""Run conformance cases against a backend.

``run_case(case, backend="reference")`` returns an :class:`Outcome`; ``python -m mind.conformance.runner
[--backend NAME] [DIR ...]`` runs every ``*.json`` case below the given directories (default: the
cases shipped with this package) and prints pass/fail counts (exit status 0 only if all pass).

A success case passes when the function's results have the expected count, dtypes and shapes and
every result is within its accuracy class of the expected value (``mind.spec.accuracy.check``).
An error case passes when the first diagnostic has the expected code and, if given, the expected
spec label (and stage).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import traceback
from dataclasses import dataclass, field
from typing import Any, Iterator, Sequence

CASES_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "cases")
SCHEMA_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "case.schema.json")


@dataclass
class Outcome:
    id: str
    passed: bool
    message: str = ""
    details: list[str] = field(default_factory=list)

    def __str__(self) -> str:
        head = f"{'PASS' if self.passed else 'FAIL'} {self.id}"
        if self.message:
            head += f": {self.message}"
        return "\n".join([head] + ["  " + line for d in self.details for line in d.splitlines()])


def load_case(path: str) -> dict[str, Any]:
    with open(path, encoding="utf-8") as fh:
        return json.load(fh)


def case_paths(directory: str = CASES_DIR) -> list[str]:
    out = []
    for root, _dirs, files in os.walk(directory):
        out.extend(os.path.join(root, f) for f in files if f.endswith(".json"))
    return sorted(out)


def iter_cases(directory: str = CASES_DIR) -> Iterator[dict[str, Any]]:
    for p in case_paths(directory):
        yield load_case(p)


def schema() -> dict[str, Any]:
    with open(SCHEMA_PATH, encoding="utf-8") as fh:
        return json.load(fh)


def validate(case: dict[str, Any]) -> None:
    """Raise ``jsonschema.ValidationError`` if ``case`` does not follow the case schema."""
    import jsonschema

    jsonschema.validate(case, schema(), cls=jsonschema.Draft202012Validator)


def _execute(case: dict[str, Any], backend: str) -> tuple[str, Any]:
    """("ok", results) or ("error", (stage, diagnostics))."""
    from mind.backends import compile_for
    from mind.conformance.values import decode
    from mind.diagnostics import MindError
    from mind.ir.parser import parse_module
    from mind.ir.verify import verify_module
    from mind.reference.interpreter import select_function

    stage = "parse"
    try:
        module = parse_module(case["ir"], case["id"])
        stage = "verify"
        verify_module(module)
        stage = "run"
        fn = select_function(module, case["function"])
        inputs = {name: decode(v) for name, v in case["inputs"].items()}
        results = compile_for(fn, backend)(inputs)
        return "ok", results
    except MindError as exc:
        return "error", (stage, exc.diagnostics)


def run_case(case: dict[str, Any] | str, backend: str = "reference") -> Outcome:
    """Run one case (a dict or a path to its JSON file) on ``backend``."""
    import numpy as np

    from mind.conformance.values import decode
    from mind.spec import accuracy

    if isinstance(case, str):
        case = load_case(case)
    cid = case.get("id", "?")
    expected = case["expected"]
    try:
        kind, got = _execute(case, backend)
    except Exception:  # a crash of the implementation is a failure, not a runner error
        return Outcome(cid, False, "the implementation raised an exception", [traceback.format_exc()])
    if expected["status"] == "error":
        want = f"{expected['code']}" + (f" [{expected['label']}]" if expected.get("label") else "")
        if kind == "ok":
            return Outcome(cid, False, f"expected error {want}, but the function ran")
        stage, diags = got
        first = diags[0]
        have = f"{first.code}" + (f" [{first.label}]" if first.label else "")
        ok = first.code == expected["code"] and (not expected.get("label") or first.label == expected["label"])
        if ok and expected.get("stage") and expected["stage"] != stage:
            return Outcome(cid, False, f"error {have} reported at stage {stage}, expected {expected['stage']}")
        if not ok:
            return Outcome(cid, False, f"expected error {want}, got {have}", [d.message for d in diags])
        return Outcome(cid, True)
    if kind == "error":
        stage, diags = got
        return Outcome(cid, False, f"expected success, got {diags[0].code} at stage {stage}",
                       [f"{d.code}: {d.message}" for d in diags])
    results = got
    want_results = expected["results"]
    if len(results) != len(want_results):
        return Outcome(cid, False, f"{len(results)} results, expected {len(want_results)}")
    details = []
    for i, (res, want, acc) in enumerate(zip(results, want_results, expected["accuracy"])):
        exp_arr = decode(want)
        extra = {}
        if acc.get("n") is not None:
            extra["n"] = acc["n"]
        if acc.get("abs_sum") is not None:
            extra["abs_sum"] = decode(acc["abs_sum"])
        elif acc["class"] in ("sum", "dot"):
            extra["abs_sum"] = np.zeros(exp_arr.shape)
        mismatch = accuracy.check(acc["class"], want["dtype"], np.asarray(res), exp_arr, **extra)
        if mismatch is not None:
            details.append(f"result {i}: {mismatch}")
    if details:
        return Outcome(cid, False, "results differ", details)
    return Outcome(cid, True)


def run_all(directories: Sequence[str] = (CASES_DIR,), backend: str = "reference") -> list[Outcome]:
    out = []
    for d in directories:
        paths = [d] if os.path.isfile(d) else case_paths(d)
        out.extend(run_case(p, backend) for p in paths)
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m mind.conformance.runner",
                                     description="Run MIND Core IR conformance cases.")
    parser.add_argument("dirs", nargs="*", metavar="DIR", help="case directories or files (default: all shipped cases)")
    parser.add_argument("--backend", default="reference", help="backend name (see mind.backends)")
    parser.add_argument("-v", "--verbose", action="store_true", help="print passing cases too")
    args = parser.parse_args(argv)
    for d in args.dirs:
        if not os.path.exists(d):
            print(f"error[E7001]: `{d}` does not exist", file=sys.stderr)
            return 2
    outcomes = run_all(args.dirs or [CASES_DIR], args.backend)
    failed = [o for o in outcomes if not o.passed]
    for o in outcomes:
        if args.verbose or not o.passed:
            print(o)
    print(f"{len(outcomes) - len(failed)} passed, {len(failed)} failed, {len(outcomes)} cases "
          f"(backend {args.backend})")
    return 0 if not failed else 1


if __name__ == "__main__":
    sys.exit(main())
