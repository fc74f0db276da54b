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

from mind.conformance.suite import Suite

_EDGE = {"zero", "inf", "nan", "extreme", "empty"}


def _failing_op(case: dict[str, Any], result: dict[str, Any]) -> str:
    from mind.ir.parser import parse_module
    from mind.reference.interpreter import select_function

    if result["cascade"]:
        return result["cascade"][0]
    ops = [o for o in case["ops"] if o != "const"] or case["ops"]
    if len(ops) == 1:
        return ops[0]
    m = re.match(r"result (\d+):", (result["details"] or [result["message"]])[0])
    fn = select_function(parse_module(case["ir"], case["id"]), case["function"])
    index = int(m.group(1)) if m else 0
    producer = {id(op.result): op.op for op in fn.ops}
    return producer.get(id(fn.results[index]), ops[-1]) if index < len(fn.results) else ops[-1]


def label_of(case: dict[str, Any], result: dict[str, Any]) -> str:
    if case["expected"]["status"] == "error":
        return case["labels"][0]
    text = " ".join(result["details"][:1] + [result["message"]])
    m = re.search(r"\[accuracy (exp|log|sum|dot), dtype f", text)
    if m:  # a bound exceeded: the inexact op of that class
        cls = m.group(1)
        op = {"exp": "exp", "log": "log", "sum": "reduce_sum"}.get(cls, "conv2d" if "conv2d" in case["ops"] else "matmul")
        return f"{op}.accuracy"
    op = _failing_op(case, result)
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
