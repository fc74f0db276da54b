"""The conformance suite on disk: its version, profiles, label vocabulary, manifest and cases.

Layout (below ``conformance/suite/``)::

    manifest.json        suite name and version, spec version, profiles, and one entry per case in
                         run order: id, file, line, SHA-256, ops, dtypes, labels, value classes,
                         profiles, depth
    cases/<group>.jsonl  the cases, one canonical JSON object per line (schema: case.schema.json)
    released.txt         every case id ever released, with its SHA-256 and the suite version that
                         introduced it: an id never changes meaning (tools/gen_conformance.py
                         refuses to rewrite a released case)
    COVERAGE.md          op × dtype × value class, and constraint labels × negative cases

A case's SHA-256 is that of its line (UTF-8, without the newline), so a result names exactly the case
it ran.  Cases run in manifest order: every single-op case (depth 1) before the programs that
combine ops, so that a failing op is reported where it first fails, not as a cascade.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
from dataclasses import dataclass, field
from typing import Any, Iterator, Sequence

from mind.diagnostics import error
from mind.spec.ops import OPS
from mind.spec.version import SPEC_VERSION

SUITE_NAME = "mind-core-ir"
SUITE_VERSION = "1.1.0"
MANIFEST_FORMAT = "mind-conformance-manifest/1"

HERE = os.path.dirname(os.path.abspath(__file__))
SUITE_DIR = os.path.join(HERE, "suite")
CASE_SCHEMA = os.path.join(HERE, "case.schema.json")

#: Profiles: the features a case needs besides ``core``.  An implementation claims a set of them.
PROFILES: dict[str, str] = {
    "core": "bool, i32 and f32 tensors of static shape: every op's semantics and accuracy",
    "i64": "cases with i64 tensors (values or gather indices)",
    "f64": "cases with f64 tensors",
    "symbolic": "functions with symbolic dims, bound from the arguments' shapes at run time",
    "diagnostics": "invalid IR text and arguments: the coded diagnostic and constraint label",
}

#: Value classes: what kind of element values (or shapes) a case exercises.
CLASSES = ("normal", "zero", "inf", "nan", "extreme", "empty", "symbolic")
FLOAT_CLASSES = ("normal", "zero", "inf", "nan", "extreme", "empty", "symbolic")
INT_CLASSES = ("normal", "zero", "extreme", "empty", "symbolic")
BOOL_CLASSES = ("normal", "empty", "symbolic")

#: Labels that are not an op's: malformed text, structural verification, argument binding.
GENERAL_LABELS = {
    "ir.parse": "the IR text grammar and the definition of every name (docs/ir-text.md)",
    "ir.verify": "declared result types agree with the inferred ones; symbolic constraints are decided",
    "call.arguments": "arguments match the parameter types and the `where` assumptions",
}


def op_labels(op: str) -> list[str]:
    """The labels of one op: its semantics, its edge cases, its accuracy class (inexact ops) and
    its numbered constraints (``matmul.C4``)."""
    d = OPS[op]
    out = [f"{op}.semantics", f"{op}.edge_cases"]
    if d.accuracy != "exact":
        out.append(f"{op}.accuracy")
    return out + [f"{op}.{c.label}" for c in d.constraints]


def all_labels() -> list[str]:
    return [lab for op in OPS for lab in op_labels(op)] + list(GENERAL_LABELS)


def label_text(label: str) -> str:
    """What a label stands for, from the spec."""
    if label in GENERAL_LABELS:
        return GENERAL_LABELS[label]
    op, part = label.split(".", 1)
    d = OPS[op]
    if part == "semantics":
        return d.semantics
    if part == "edge_cases":
        return d.edge_cases
    if part == "accuracy":
        from mind.spec import accuracy

        return accuracy.get(d.accuracy).summary
    return d.constraint(part).text


def canonical_json(obj: Any) -> str:
    """The one serialisation of a case (and of a protocol message): sorted keys, no spaces."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class Entry:
    """One manifest entry (the case itself is read on demand)."""

    id: str
    file: str
    line: int
    sha256: str
    ops: tuple[str, ...]
    dtypes: tuple[str, ...]
    labels: tuple[str, ...]
    classes: tuple[str, ...]
    profiles: tuple[str, ...]
    depth: int
    status: str  # "success" | "error"

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "file": self.file, "line": self.line, "sha256": self.sha256,
                "ops": list(self.ops), "dtypes": list(self.dtypes), "labels": list(self.labels),
                "classes": list(self.classes), "profiles": list(self.profiles), "depth": self.depth,
                "status": self.status}


@dataclass
class Suite:
    """A loaded suite: its manifest and where its files are."""

    root: str
    name: str
    version: str
    spec_version: str
    manifest_sha256: str
    entries: list[Entry]
    profiles: dict[str, str] = field(default_factory=dict)
    _lines: dict[str, list[str]] = field(default_factory=dict)

    def entry(self, cid: str) -> Entry | None:
        for e in self.entries:
            if e.id == cid:
                return e
        return None

    def case_text(self, e: Entry) -> str:
        lines = self._lines.get(e.file)
        if lines is None:
            path = os.path.join(self.root, e.file)
            try:
                with open(path, encoding="utf-8") as fh:
                    lines = fh.read().split("\n")
            except (OSError, UnicodeDecodeError) as exc:
                raise error("E7004", f"cannot read case file `{path}`: {exc}",
                            help="reinstall the suite or regenerate it with tools/gen_conformance.py") from None
            self._lines[e.file] = lines
        if not 1 <= e.line <= len(lines):
            raise error("E7004", f"case `{e.id}`: {e.file} has no line {e.line}")
        return lines[e.line - 1]

    def case(self, e: Entry) -> dict[str, Any]:
        """The case of an entry, after checking that its text has the manifest's SHA-256."""
        text = self.case_text(e)
        if sha256_text(text) != e.sha256:
            raise error("E7004", f"case `{e.id}` ({e.file}:{e.line}) does not have the SHA-256 the "
                                 f"manifest records", help="the suite was modified; reinstall or regenerate it")
        case = json.loads(text)
        if case.get("id") != e.id:
            raise error("E7004", f"{e.file}:{e.line} holds case `{case.get('id')}`, the manifest says `{e.id}`")
        return case

    def cases(self) -> Iterator[dict[str, Any]]:
        for e in self.entries:
            yield self.case(e)


def _bad_manifest(path: str, why: str) -> Exception:
    return error("E7004", f"`{path}` is not a conformance manifest: {why}",
                 help="point --cases at a folder holding manifest.json (the suite's folder)")


def read_json(path: str, help: str) -> tuple[Any, bytes]:
    """The JSON document in ``path`` and its bytes: E7001 if unreadable, E7004 if not JSON."""
    try:
        with open(path, "rb") as fh:
            raw = fh.read()
    except OSError as exc:
        raise error("E7001", f"cannot read `{path}`: {exc.strerror or exc}", help=help) from None
    try:
        return json.loads(raw.decode("utf-8")), raw
    except (UnicodeDecodeError, ValueError) as exc:
        raise error("E7004", f"`{path}` is not JSON: {exc}", help=help) from None


def load_suite(root: str = SUITE_DIR) -> Suite:
    """Read ``root/manifest.json`` (E7001 if missing, E7004 if malformed)."""
    path = os.path.join(root, "manifest.json")
    doc, raw = read_json(path, "--cases names a suite folder holding manifest.json")
    if not isinstance(doc, dict) or doc.get("format") != MANIFEST_FORMAT:
        raise _bad_manifest(path, f"its format is not {MANIFEST_FORMAT}")
    try:
        entries = [Entry(c["id"], c["file"], int(c["line"]), c["sha256"], tuple(c["ops"]), tuple(c["dtypes"]),
                         tuple(c["labels"]), tuple(c["classes"]), tuple(c["profiles"]), int(c["depth"]),
                         c["status"])
                   for c in doc["cases"]]
        suite = Suite(os.path.abspath(root), doc["suite"], doc["suite_version"], doc["spec_version"],
                      hashlib.sha256(raw).hexdigest(), entries, dict(doc.get("profiles", {})))
    except (KeyError, TypeError, ValueError) as exc:
        raise _bad_manifest(path, f"an entry lacks a field or has the wrong type ({exc!r})") from None
    seen: set[str] = set()
    for e in entries:
        if e.id in seen:
            raise _bad_manifest(path, f"case `{e.id}` is listed twice")
        seen.add(e.id)
        if os.path.isabs(e.file) or ".." in e.file.split("/"):
            raise _bad_manifest(path, f"case `{e.id}` names a file outside the suite: {e.file!r}")
    return suite


@functools.lru_cache(maxsize=None)
def _validator(path: str) -> Any:
    import jsonschema

    with open(path, encoding="utf-8") as fh:
        schema = json.load(fh)
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def validate_case(case: dict[str, Any]) -> None:
    """Raise ``jsonschema.ValidationError`` if ``case`` does not follow the case schema."""
    _validator(CASE_SCHEMA).validate(case)


def required_profiles(dtypes: Sequence[str], symbolic: bool, status: str) -> list[str]:
    """The profiles a case needs: ``core`` plus one per feature beyond it."""
    out = ["core"]
    for d in ("i64", "f64"):
        if d in dtypes:
            out.append(d)
    if symbolic:
        out.append("symbolic")
    if status == "error":
        out.append("diagnostics")
    return out
