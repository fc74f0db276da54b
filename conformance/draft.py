"""Draft an expectations file from a run's results (``mind conformance draft-expectations DIR``).

Hand-maintained expected-failure lists rot and take many reruns to settle; this writes one ``xfail``
line per failed case instead, each with the spec label the failure points at and the failure's
first line as a placeholder reason, grouped by label.  The implementer then replaces each reason
with the *why* (or fixes the implementation).  The label is the op whose result failed: for a
single-op case its op; for a program the op that produced the first wrong result (or, for a
cascade, the op that already fails alone); ``<op>.accuracy`` for a bound exceeded (the inexact op of the failing class),
``<op>.edge_cases`` when the case holds edge values, else ``<op>.semantics``.
"""

from __future__ import annotations

import re
from collections import defaultdict
from typing import Any

from mind.conformance.run import culprit_op
from mind.conformance.suite import Suite

_EDGE = {"zero", "inf", "nan", "extreme", "empty"}


def label_of(case: dict[str, Any], result: dict[str, Any]) -> str:
    if case["expected"]["status"] == "error":
        return case["labels"][0]
    text = " ".join(result["details"][:1] + [result["message"]])
    m = re.search(r"\[accuracy (exp|log|sum|dot), dtype f", text)
    if m:  # a bound exceeded: the inexact op of that class
        cls = m.group(1)
        op = {"exp": "exp", "log": "log", "sum": "reduce_sum"}.get(cls, "conv2d" if "conv2d" in case["ops"] else "matmul")
        return f"{op}.accuracy"
    op = culprit_op(case, result["details"] or [result["message"]], result["cascade"])
    if not op:  # several ops failed as a whole: the case's first label
        return case["labels"][0]
    return f"{op}.edge_cases" if _EDGE & set(case["classes"]) else f"{op}.semantics"


def draft(doc: dict[str, Any], suite: Suite) -> str:
    groups: dict[str, list[str]] = defaultdict(list)
    for r in doc["cases"]:
        if r["outcome"] not in ("fail", "xfail"):
            continue
        e = suite.entry(r["id"])
        if e is None:
            continue
        label = label_of(suite.case(e), r)
        reason = r["reason"] if r["outcome"] == "xfail" else f"TODO why: {r['kind']}: {r['message']}"
        reason = " ".join(reason.replace("#", "∗").split())[:200]
        groups[label].append(f"xfail  {r['id']:<32} {label:<22} {reason}")
    impl = doc["implementation"]
    out = [f"# Expectations for {impl['name']} {impl['version']} on {doc['suite']['name']} {doc['suite']['version']}",
           "# (drafted by `mind conformance draft-expectations`: replace every TODO with the reason)."]
    for label in sorted(groups):
        out += ["", f"# {label}"] + groups[label]
    return "\n".join(out) + "\n"
