"""Every file of the suite folder, rendered from the case builders (see ``mind.conformance.suite``).

``render()`` is a pure function of the code: it returns {path below the suite folder: text}, the same
bytes in every process and on every machine (ordered dicts and sorted keys only; seeded streams;
no platform maths in expected values), which ``tools/gen_conformance.py --check`` compares with the
files on disk.  ``released.txt`` is the exception: it is a record, appended to, never rewritten --
:func:`check_released` refuses a suite in which a released id changed or disappeared.
"""

from __future__ import annotations

import json
from typing import Any, Iterable

from mind.conformance.coverage import Coverage
from mind.conformance.suite import (MANIFEST_FORMAT, PROFILES, SUITE_NAME, SUITE_VERSION, canonical_json,
                                    sha256_text, validate_case)
from mind.spec.version import SPEC_VERSION

RELEASED = "released.txt"
_RELEASED_HEAD = ("# Every released case: id, SHA-256 of its line, the suite version that introduced it.\n"
                  "# Appended by tools/gen_conformance.py; a released id never changes meaning.\n")


def _group(case: dict[str, Any]) -> str:
    """The file a case lives in: its tier, and for the generated single-op tier its op."""
    parts = case["id"].split("/")
    if parts[0] == "gen":
        return f"gen-{parts[1]}"
    return parts[0]


def _order_key(case: dict[str, Any], index: int) -> tuple[int, int]:
    """Run order: single-op success cases, then programs, then the diagnostics cases."""
    if case["expected"]["status"] == "error":
        return (2, index)
    return (0 if case["depth"] <= 1 else 1, index)


def build_cases() -> list[dict[str, Any]]:
    from mind.conformance.generate import handwritten, programs, single_ops

    cases = (handwritten.example_cases() + handwritten.edge_cases() + handwritten.reference_cases()
             + list(single_ops.all_cases()) + list(programs.all_cases())
             + handwritten.negative_cases() + handwritten.error_cases())
    seen: set[str] = set()
    for c in cases:
        if c["id"] in seen:
            raise ValueError(f"duplicate case id {c['id']}")
        seen.add(c["id"])
        validate_case(c)
    return cases


def render(cases: list[dict[str, Any]] | None = None) -> dict[str, str]:
    cases = build_cases() if cases is None else cases
    files: dict[str, list[str]] = {}
    placed: dict[str, tuple[str, int, str]] = {}
    for c in cases:
        rel = f"cases/{_group(c)}.jsonl"
        text = canonical_json(c)
        lines = files.setdefault(rel, [])
        lines.append(text)
        placed[c["id"]] = (rel, len(lines), sha256_text(text))
    ordered = sorted(range(len(cases)), key=lambda i: _order_key(cases[i], i))
    entries = []
    for i in ordered:
        c = cases[i]
        rel, line, digest = placed[c["id"]]
        entries.append({"id": c["id"], "file": rel, "line": line, "sha256": digest, "ops": c["ops"],
                        "dtypes": c["dtypes"], "labels": c["labels"], "classes": c["classes"],
                        "profiles": c["profiles"], "depth": c["depth"], "status": c["expected"]["status"]})
    head = {"format": MANIFEST_FORMAT, "suite": SUITE_NAME, "suite_version": SUITE_VERSION,
            "spec_version": SPEC_VERSION, "profiles": PROFILES, "case_count": len(entries)}
    manifest = json.dumps(head, indent=1, ensure_ascii=False)[:-2] + ',\n "cases": [\n' + \
        ",\n".join(canonical_json(e) for e in entries) + "\n ]\n}\n"
    out = {rel: "\n".join(lines) + "\n" for rel, lines in files.items()}
    out["manifest.json"] = manifest
    out["COVERAGE.md"] = Coverage(cases).markdown(SUITE_VERSION)
    return out


def manifest_hashes(files: dict[str, str]) -> list[tuple[str, str]]:
    doc = json.loads(files["manifest.json"])
    return [(e["id"], e["sha256"]) for e in doc["cases"]]


def parse_released(text: str) -> dict[str, tuple[str, str]]:
    out: dict[str, tuple[str, str]] = {}
    for line in text.splitlines():
        if line.strip() and not line.startswith("#"):
            cid, digest, version = line.split()
            out[cid] = (digest, version)
    return out


def check_released(released: dict[str, tuple[str, str]], current: Iterable[tuple[str, str]]) -> list[str]:
    """Problems that make ``current`` an invalid successor of the released cases."""
    now = dict(current)
    problems = []
    for cid, (digest, version) in released.items():
        if cid not in now:
            problems.append(f"released case {cid} (suite {version}) is gone; ids are never removed")
        elif now[cid] != digest:
            problems.append(f"released case {cid} (suite {version}) changed; give the new case a new id")
    return problems


def released_text(released: dict[str, tuple[str, str]], current: Iterable[tuple[str, str]]) -> str:
    """The record with every new id appended under the current suite version."""
    lines = [f"{cid} {d} {v}" for cid, (d, v) in released.items()]
    lines += [f"{cid} {d} {SUITE_VERSION}" for cid, d in current if cid not in released]
    return _RELEASED_HEAD + "\n".join(lines) + "\n"
