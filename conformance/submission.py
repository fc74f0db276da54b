"""``mind conformance verify-submission DIR``: re-check a submitted result set against the suite.

A conformance claim is a ``results.json`` (written by ``mind conformance run --report DIR``) for a
suite version and a set of profiles.  It is a valid submission when it follows the results schema,
names this suite (same version, same manifest SHA-256), holds exactly one result per case of the
suite with that case's SHA-256 (no selection), marks "not supported" only the cases whose profiles
it does not claim, explains every skip and expected failure, and its summary agrees with its cases.
The claim holds when, in addition, every case of the claimed profiles passed.
"""

from __future__ import annotations

import os
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from mind.conformance.report import validate_results
from mind.conformance.run import OUTCOMES
from mind.conformance.suite import Suite, read_json
from mind.diagnostics import Diagnostic, MindError, error


@dataclass
class Check:
    doc: dict[str, Any]
    problems: list[str] = field(default_factory=list)

    @property
    def valid(self) -> bool:
        return not self.problems

    @property
    def conformant(self) -> bool:
        return self.valid and self.doc["summary"]["verdict"] == "pass"


def load_results(directory: str) -> dict[str, Any]:
    import jsonschema

    path = os.path.join(directory, "results.json") if os.path.isdir(directory) else directory
    doc, _raw = read_json(path, "pass the folder written by `mind conformance run --report DIR`")
    try:
        validate_results(doc)
    except jsonschema.ValidationError as exc:
        where = "/".join(str(p) for p in exc.absolute_path) or "(top level)"
        raise error("E7004", f"`{path}` does not follow the results schema at {where}: {exc.message}") from None
    return doc


def verify(doc: dict[str, Any], suite: Suite) -> Check:
    chk = Check(doc)
    p = chk.problems
    s = doc["suite"]
    if (s["name"], s["version"]) != (suite.name, suite.version):
        p.append(f"the results are for suite {s['name']} {s['version']}, this is {suite.name} {suite.version}")
    if s["manifest_sha256"] != suite.manifest_sha256:
        p.append("the suite's manifest differs from the one the results were produced with")
    if doc["run"]["select"]:
        p.append(f"the run was restricted with --select {' '.join(doc['run']['select'])}; a claim covers the whole suite")
    claimed = set(doc["profiles"])
    if "core" not in claimed:
        p.append("the claimed profiles do not include core")
    by_id = {c["id"]: c for c in doc["cases"]}
    if len(by_id) != len(doc["cases"]):
        p.append("a case is listed more than once")
    for e in suite.entries:
        c = by_id.pop(e.id, None)
        if c is None:
            p.append(f"no result for case {e.id}")
            continue
        if c["sha256"] != e.sha256:
            p.append(f"case {e.id}: the result is for another version of the case (SHA-256 differs)")
        needs = [x for x in e.profiles if x not in claimed]
        if c["outcome"] == "unsupported" and not needs:
            p.append(f"case {e.id} is marked not supported, but its profiles ({', '.join(e.profiles)}) are claimed")
        if c["outcome"] != "unsupported" and needs:
            p.append(f"case {e.id} needs profile {', '.join(needs)}, which is not claimed, yet it ran")
        if c["outcome"] in ("skip", "xfail", "xpass") and not c["reason"].strip():
            p.append(f"case {e.id}: {c['outcome']} without a reason")
    for cid in sorted(by_id):
        p.append(f"result for case {cid}, which is not in the suite")
    counts = Counter(c["outcome"] for c in doc["cases"])
    summary = doc["summary"]
    if summary["total"] != len(doc["cases"]) or any(summary[o] != counts[o] for o in OUTCOMES):
        p.append("the summary's counts disagree with the cases")
    verdict = ("fail" if counts["fail"] or counts["xpass"] else
               "pass-with-expectations" if counts["xfail"] or counts["skip"] else "pass")
    if summary["verdict"] != verdict:
        p.append(f"the summary's verdict is {summary['verdict']}, the cases give {verdict}")
    return chk


def raise_invalid(chk: Check, where: str) -> None:
    diags = [Diagnostic("E7004", f"{where}: {msg}") for msg in chk.problems[:50]]
    if len(chk.problems) > 50:
        diags.append(Diagnostic("E7004", f"{where}: … and {len(chk.problems) - 50} more problems"))
    raise MindError(diags)
