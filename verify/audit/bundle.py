"""Writing a bundle, and ``mind audit --check``: re-verifying one independently.

A bundle is one folder holding one audit's files, written through ``mind.output_dir.OutputDir``
(each file atomically, never through a link, the folder holding exactly this run's files) and
described by ``manifest.json``: every other file's name, size and SHA-256.  Files:

``audit.json``          the audit (schema ``audit.schema.json``, also in the bundle)
``audit.sarif``         SARIF 2.1.0; ``audit.intoto.json`` an in-toto Statement (test-result predicate)
``traceability.csv``    spec label → evidence → result; ``audit.html`` the page a person reads
``input.*``             the input as given; ``subject.mir`` its canonical Core IR
``smt-<hash>.smt2``     one SMT-LIB query per distinct obligation
``<backend>-<fn>.*``    compiled artifacts (``--backend``)
``timings.json``        wall-clock times, only with ``--timings`` (the one file that differs between runs)

``check_bundle`` trusts nothing in the folder: the manifest must be in its canonical form and name
exactly the files present (regular files, no links); every hash must match; every derived file
(SARIF, HTML, CSV, in-toto, schema, canonical IR) must equal what MIND derives again from
``audit.json`` and the input; every SMT-LIB file is answered again by both solvers; every
differential run is repeated.  Each difference is reported with the file and what differs.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
from dataclasses import dataclass, field
from typing import Any

from mind.verify.audit.formats import (SCHEMA_FILE, audit_schema, dump_json, intoto_statement, sarif_log,
                                       validate_audit)
from mind.verify.audit.html import audit_html
from mind.verify.audit.report import Audit
from mind.verify.audit.traceability import traceability_csv

__all__ = ["write_bundle", "check_bundle", "CheckReport", "MANIFEST", "MANIFEST_FORMAT", "derived_files"]

MANIFEST = "manifest.json"
MANIFEST_FORMAT = "mind-audit-manifest/1"
MAX_MANIFEST_BYTES = 64 << 20
MAX_FILE_BYTES = 1 << 30
INPUT_NAMES = {"mind": "input.mind", "core": "input.mir", "public": "input.txt"}


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def derived_files(doc: dict[str, Any], sources: dict[str, str], base: dict[str, bytes]) -> dict[str, bytes]:
    """The files MIND derives from the audit document (and the input, for the source lines of the
    page): the same functions make them when writing and when checking.  ``base`` holds the other
    files of the bundle (their digests go into the in-toto Statement)."""
    out = {"audit.json": dump_json(doc), SCHEMA_FILE: dump_json(audit_schema()),
           "audit.sarif": dump_json(sarif_log(doc)),
           "traceability.csv": traceability_csv(doc["traceability"], doc["proofs"]["obligations"]).encode(),
           "audit.html": audit_html(doc, sources).encode()}
    digests = {n: _sha(d) for n, d in {**base, **out}.items()}
    out["audit.intoto.json"] = dump_json(intoto_statement(doc, digests))
    return out


def manifest_bytes(files: dict[str, bytes], wall_clock: list[str]) -> bytes:
    entries = [{"name": n, "bytes": len(d), "sha256": _sha(d)} for n, d in sorted(files.items())]
    return dump_json({"format": MANIFEST_FORMAT, "files": entries, "wall_clock": sorted(wall_clock)})


def bundle_files(audit: Audit, timings: bool) -> dict[str, bytes]:
    """Every file of the bundle but the manifest."""
    doc = audit.doc
    base = dict(audit.files)
    base[INPUT_NAMES[doc["subject"]["format"]]] = next(iter(audit.sources.values())).encode("utf-8")
    files = {**base, **derived_files(doc, audit.sources, base)}
    if timings:
        files["timings.json"] = dump_json({"wall_clock_seconds": audit.timings})
    return files


def write_bundle(audit: Audit, out: str, timings: bool = False) -> dict[str, str]:
    """Write the bundle into ``out`` (E7003 when MIND may not write there); name -> SHA-256."""
    from mind.driver_io import writing
    from mind.output_dir import OutputDir

    files = bundle_files(audit, timings)
    manifest = manifest_bytes(files, ["timings.json"] if timings else [])
    with writing(out):
        folder = OutputDir(out, list(files) + [MANIFEST])
        for name in sorted(files):
            data = files[name]
            folder.write(name, lambda fh, data=data: fh.write(data))
        folder.write(MANIFEST, lambda fh: fh.write(manifest))
        folder.finish()
    return {n: _sha(d) for n, d in files.items()}


# ------------------------------------------------------------------------------------------------
# --check
# ------------------------------------------------------------------------------------------------


@dataclass
class CheckReport:
    folder: str
    problems: list[tuple[str, str]] = field(default_factory=list)  # (file, what differs)
    checked: dict[str, int] = field(default_factory=dict)  # what was re-verified: kind -> count
    verdict: str | None = None  # the audit's own verdict, when audit.json could be read

    @property
    def intact(self) -> bool:
        return not self.problems

    @property
    def ok(self) -> bool:
        return self.intact and self.verdict == "pass"

    def add(self, file: str, what: str) -> None:
        self.problems.append((file, what))

    def to_json(self) -> dict[str, Any]:
        return {"ok": self.ok, "intact": self.intact, "folder": self.folder, "audit_verdict": self.verdict,
                "checked": dict(sorted(self.checked.items())),
                "problems": [{"file": f, "problem": w} for f, w in self.problems]}


def _read_regular(path: str, limit: int) -> bytes:
    """The bytes of a regular file (not through a link), at most ``limit``; OSError otherwise."""
    st = os.lstat(path)
    if not stat.S_ISREG(st.st_mode):
        from mind.disk import describe_kind

        raise OSError(f"it is {describe_kind(st.st_mode)}, not a regular file")
    if st.st_size > limit:
        raise OSError(f"it has {st.st_size} bytes, more than a bundle file may ({limit})")
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    with os.fdopen(fd, "rb") as fh:
        return fh.read(limit + 1)


def _first_difference(expected: bytes, actual: bytes) -> str:
    """Where two versions of a text file first differ: line number and both lines."""
    a, b = expected.decode("utf-8", "replace").split("\n"), actual.decode("utf-8", "replace").split("\n")
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return f"line {i + 1} differs: expected {x[:160]!r}, found {y[:160]!r}"
    return f"it has {len(b)} lines where {len(a)} are expected"


def _load(folder: str, rep: CheckReport) -> tuple[dict[str, Any], dict[str, bytes]] | None:
    from mind.output_dir import RECORD

    try:
        raw = _read_regular(os.path.join(folder, MANIFEST), MAX_MANIFEST_BYTES)
        manifest = json.loads(raw)
    except (OSError, ValueError) as exc:
        rep.add(MANIFEST, f"cannot be read: {exc}")
        return None
    ok_shape = (isinstance(manifest, dict) and manifest.get("format") == MANIFEST_FORMAT
                and isinstance(manifest.get("files"), list)
                and all(isinstance(e, dict) and set(e) == {"name", "bytes", "sha256"} for e in manifest["files"]))
    if not ok_shape:
        rep.add(MANIFEST, f"is not a {MANIFEST_FORMAT} manifest")
        return None
    names = [e["name"] for e in manifest["files"]]
    try:
        present = sorted(n for n in os.listdir(folder) if n not in (MANIFEST, RECORD))
    except OSError as exc:
        rep.add(folder, f"cannot be listed: {exc.strerror or exc}")
        return None
    for n in sorted(set(present) - set(names)):
        rep.add(n, "is in the folder but not in the manifest")
    files: dict[str, bytes] = {}
    for e in manifest["files"]:
        name = e["name"]
        if not isinstance(name, str) or "/" in name or name in (".", "..") or name not in present:
            rep.add(str(name), "is in the manifest but not in the folder")
            continue
        try:
            data = _read_regular(os.path.join(folder, name), MAX_FILE_BYTES)
        except OSError as exc:
            rep.add(name, f"cannot be read: {exc}")
            continue
        files[name] = data
        rep.checked["hashes"] = rep.checked.get("hashes", 0) + 1
        if len(data) != e["bytes"] or _sha(data) != e["sha256"]:
            rep.add(name, f"SHA-256 {_sha(data)} ({len(data)} bytes) differs from the manifest's {e['sha256']} "
                          f"({e['bytes']} bytes)")
    wall = manifest.get("wall_clock")
    if not (isinstance(wall, list) and all(isinstance(w, str) for w in wall)):
        rep.add(MANIFEST, "has no list of wall-clock files")
    elif not rep.problems:
        expected_manifest = manifest_bytes(files, wall)
        if raw != expected_manifest:
            rep.add(MANIFEST, "is not in its canonical form: " + _first_difference(expected_manifest, raw))
    return manifest, files


def check_bundle(folder: str, *, rerun: bool = True) -> CheckReport:
    """Re-verify the bundle in ``folder`` (see the module docstring)."""
    rep = CheckReport(folder)
    loaded = _load(folder, rep)
    if loaded is None:
        return rep
    manifest, files = loaded
    raw = files.get("audit.json")
    if raw is None:
        rep.add("audit.json", "is missing")
        return rep
    try:
        doc = json.loads(raw)
    except ValueError as exc:
        rep.add("audit.json", f"is not JSON: {exc}")
        return rep
    problems = validate_audit(doc)
    for p in problems[:20]:
        rep.add("audit.json", f"breaks its schema: {p}")
    if problems:
        return rep
    dangling = dangling_references(doc)
    for p in dangling[:20]:
        rep.add("audit.json", p)
    if dangling:
        return rep
    rep.verdict = doc["summary"]["verdict"]
    _check_derived(doc, files, manifest, rep)
    if rerun:
        _check_proofs(doc, files, rep)
        _check_compiled(doc, files, rep)
    return rep


def dangling_references(doc: dict[str, Any]) -> list[str]:
    """What the traceability section of a schema-valid audit.json names that the document does not
    hold: an obligation its proofs do not list, a case an implementation has no outcome for.  Why
    here: the schema checks each part's form, not that one part's ids are another's, and the derived
    files look them up (a changed byte in an id was a ``KeyError``, not a report)."""
    section = doc["traceability"]
    ids = {o["id"] for o in doc["proofs"]["obligations"]}
    outcomes = section["case_outcomes"]
    found = [f"traceability names implementation {impl!r}, which has no case outcomes"
             for impl in section["implementations"] if impl not in outcomes]
    for row in section["labels"]:
        found += [f"label {row['label']} names obligation {oid!r}, which its proofs do not list"
                  for oid in row["obligations"] if oid not in ids]
        found += [f"label {row['label']} names case {cid!r}, which {impl!r} has no outcome for"
                  for cid in row["cases"] for impl in section["implementations"] if cid not in outcomes.get(impl, {})]
    return found


def _recorded(files: dict[str, bytes], name: str, sha256: str, whose: str, rep: CheckReport) -> bytes | None:
    """The file ``name``, reporting it when it is missing or its hash is not the one audit.json records."""
    data = files.get(name)
    if data is None:
        rep.add(name, "is missing")
    elif _sha(data) != sha256:
        rep.add(name, f"SHA-256 {_sha(data)} differs from {whose} {sha256} in audit.json")
    return data


def _check_derived(doc: dict[str, Any], files: dict[str, bytes], manifest: dict[str, Any], rep: CheckReport) -> None:
    """Every file MIND derives must be what it derives again; the canonical IR what the input gives."""
    subject = doc["subject"]
    data = _recorded(files, INPUT_NAMES[subject["format"]], subject["sha256"], "the subject's", rep)
    if data is None:
        return
    text = data.decode("utf-8", "replace")
    sources = {subject["file"]: text}
    wall = set(manifest.get("wall_clock", []))
    derived_names = {"audit.json", SCHEMA_FILE, "audit.sarif", "traceability.csv", "audit.html", "audit.intoto.json"}
    base = {n: d for n, d in files.items() if n not in derived_names and n not in wall}
    again = derived_files(doc, sources, base)
    for name, want in sorted(again.items()):
        got = files.get(name)
        rep.checked["derived files"] = rep.checked.get("derived files", 0) + 1
        if got is None:
            rep.add(name, "is missing")
        elif got != want:
            rep.add(name, "differs from what MIND derives from audit.json: " + _first_difference(want, got))
    ir = _recorded(files, subject["ir_file"], subject["ir_sha256"], "the subject's IR hash", rep)
    if ir is not None:
        _check_canonical_ir(doc, text, ir, rep)


def _check_canonical_ir(doc: dict[str, Any], text: str, ir: bytes, rep: CheckReport) -> None:
    """``subject.mir`` must be the canonical Core IR that MIND makes of the input copy again."""
    from mind.diagnostics import MindError
    from mind.ir.solver_limits import SolverLimits
    from mind.verify.audit.subject import subject_of

    subject, opts = doc["subject"], doc["tool"]["options"]
    rep.checked["canonical IR rebuilt"] = 1
    try:
        again = subject_of(subject["file"], text, opts["fn"], SolverLimits(int(opts["rlimit"]), float(opts["timeout_s"])))
    except MindError as exc:
        rep.add(subject["ir_file"], f"the input copy no longer gives Core IR: {exc.diagnostics[0].message}")
        return
    want = again.module.text().encode()
    if want != ir:
        rep.add(subject["ir_file"], "differs from the canonical Core IR of the input copy: " + _first_difference(want, ir))


def _check_proofs(doc: dict[str, Any], files: dict[str, bytes], rep: CheckReport) -> None:
    """Every query answered again by both solvers, from the file; every obligation's verdict is its query's."""
    from mind.ir.solver_limits import SolverLimits
    from mind.verify.audit.proofs import combine
    from mind.verify.audit.solvers import check_text

    opts = doc["tool"]["options"]
    limits = SolverLimits(int(opts["rlimit"]), float(opts["timeout_s"]))
    verdicts = {}
    for q in doc["proofs"]["queries"]:
        name = q["file"]
        data = _recorded(files, name, q["sha256"], "the query's", rep)
        if data is None:
            continue
        answers = check_text(data.decode("utf-8", "replace"), limits)
        rep.checked["queries re-solved"] = rep.checked.get("queries re-solved", 0) + 1
        for solver, a in answers.items():
            want = q["solvers"].get(solver, {}).get("status")
            if a.status != want:
                rep.add(name, f"{solver} now answers {a.status}, the bundle records {want}")
        verdict = combine(q["expect"], {k: a.status for k, a in answers.items()})
        verdicts[name] = verdict
        if verdict != q["verdict"]:
            rep.add(name, f"the verdict is now {verdict}, the bundle records {q['verdict']}")
    for o in doc["proofs"]["obligations"]:
        if o["query"] is not None and o["query"] in verdicts and o["verdict"] != verdicts[o["query"]]:
            rep.add("audit.json", f"obligation {o['id']} records {o['verdict']}, its query {o['query']} gives "
                                  f"{verdicts[o['query']]}")


def _check_compiled(doc: dict[str, Any], files: dict[str, bytes], rep: CheckReport) -> None:
    if not doc["compiled"]:
        return
    from mind.verify.audit.compiled import recheck

    for file, what in recheck(doc, files, rep.checked):
        rep.add(file, what)
