"""``mind audit --check``: a bundle is re-verified independently; any changed byte, in any kind of
file, is reported with the file and what differs."""

from __future__ import annotations

import json
import os
import shutil

import pytest

from .helpers import ROOT, audit_into
from mind.verify.audit.bundle import check_bundle


@pytest.fixture(scope="module")
def bundle(tmp_path_factory):
    out = str(tmp_path_factory.mktemp("audit") / "bundle")
    audit_into(os.path.join(ROOT, "examples", "affine.mir"), out, timings=True)
    return out


@pytest.fixture
def copy(bundle, tmp_path):
    dst = str(tmp_path / "copy")
    shutil.copytree(bundle, dst)
    return dst


def _flip(path: str, offset: int | None = None) -> None:
    with open(path, "rb") as fh:
        data = bytearray(fh.read())
    i = len(data) // 2 if offset is None else offset
    data[i] = data[i] ^ 0x01 if chr(data[i] ^ 0x01).isprintable() else ord("x")
    with open(path, "wb") as fh:
        fh.write(bytes(data))


def test_an_untouched_bundle_is_intact_and_reproduces(bundle):
    rep = check_bundle(bundle)
    assert rep.ok and rep.intact and rep.verdict == "pass"
    assert rep.checked["queries re-solved"] > 0 and rep.checked["hashes"] > 10


def _kinds(folder: str) -> list[str]:
    names = sorted(os.listdir(folder))
    one_smt = [n for n in names if n.endswith(".smt2")][:1]
    return [n for n in names if not n.endswith(".smt2") and not n.startswith(".")] + one_smt


def test_every_file_kind_is_covered(bundle):
    kinds = _kinds(bundle)
    assert {"manifest.json", "audit.json", "audit.sarif", "audit.html", "audit.intoto.json", "traceability.csv",
            "audit.schema.json", "subject.mir", "input.mir", "timings.json"} <= set(kinds)
    assert any(k.endswith(".smt2") for k in kinds)


@pytest.mark.parametrize("name", ["manifest.json", "audit.json", "audit.sarif", "audit.html", "audit.intoto.json",
                                  "traceability.csv", "audit.schema.json", "subject.mir", "input.mir",
                                  "timings.json", "*.smt2"])
def test_one_changed_byte_is_reported_with_its_file(copy, name):
    if name == "*.smt2":
        name = next(n for n in sorted(os.listdir(copy)) if n.endswith(".smt2"))
    _flip(os.path.join(copy, name))
    rep = check_bundle(copy)
    assert not rep.ok and not rep.intact
    assert name in {f for f, _ in rep.problems}, rep.problems


def test_a_consistent_forgery_of_a_derived_file_is_still_caught(copy):
    """Change the SARIF and fix up its hash in the manifest: it no longer is what audit.json gives."""
    path = os.path.join(copy, "audit.sarif")
    with open(path, encoding="utf-8") as fh:
        log = json.load(fh)
    log["runs"][0]["results"][0]["kind"] = "fail"
    data = (json.dumps(log, indent=1, ensure_ascii=False) + "\n").encode()
    with open(path, "wb") as fh:
        fh.write(data)
    _rewrite_manifest(copy)
    rep = check_bundle(copy)
    assert [f for f, _ in rep.problems] == ["audit.sarif"]
    assert "line" in rep.problems[0][1]


def test_a_consistent_forgery_of_a_proof_is_caught_by_the_solvers(copy):
    """Record z3's answer as sat in audit.json and re-hash everything: re-solving the file tells."""
    path = os.path.join(copy, "audit.json")
    with open(path, encoding="utf-8") as fh:
        doc = json.load(fh)
    doc["proofs"]["queries"][0]["solvers"]["z3"]["status"] = "sat"
    from mind.verify.audit.bundle import derived_files
    from mind.verify.audit.formats import dump_json

    with open(os.path.join(copy, "input.mir"), encoding="utf-8") as fh:
        sources = {doc["subject"]["file"]: fh.read()}
    base = {n: open(os.path.join(copy, n), "rb").read() for n in os.listdir(copy)
            if n.endswith((".smt2", ".mir"))}
    for name, data in derived_files(doc, sources, base).items():
        with open(os.path.join(copy, name), "wb") as fh:
            fh.write(data)
    assert dump_json(doc) == open(path, "rb").read()
    _rewrite_manifest(copy)
    rep = check_bundle(copy)
    assert any("z3 now answers unsat" in w for _, w in rep.problems), rep.problems


def _rewrite_manifest(folder: str) -> None:
    from mind.verify.audit.bundle import manifest_bytes

    files = {n: open(os.path.join(folder, n), "rb").read() for n in os.listdir(folder)
             if n not in ("manifest.json", ".mind-outputs.json")}
    with open(os.path.join(folder, "manifest.json"), "rb") as fh:
        wall = json.load(fh)["wall_clock"]
    with open(os.path.join(folder, "manifest.json"), "wb") as fh:
        fh.write(manifest_bytes(files, wall))


def test_a_missing_an_extra_and_a_linked_file_are_reported(copy):
    smt = next(n for n in sorted(os.listdir(copy)) if n.endswith(".smt2"))
    os.remove(os.path.join(copy, smt))
    with open(os.path.join(copy, "extra.txt"), "w") as fh:
        fh.write("x")
    os.remove(os.path.join(copy, "audit.html"))
    os.symlink(os.path.join(copy, "audit.sarif"), os.path.join(copy, "audit.html"))
    rep = check_bundle(copy)
    problems: dict[str, str] = {}
    for file, what in rep.problems:
        problems[file] = problems.get(file, "") + what + "; "
    assert "not in the folder" in problems[smt]
    assert "not in the manifest" in problems["extra.txt"]
    assert "symbolic link" in problems["audit.html"]


def test_a_manifest_in_another_form_is_reported(copy):
    path = os.path.join(copy, "manifest.json")
    with open(path, encoding="utf-8") as fh:
        doc = json.load(fh)
    with open(path, "w", encoding="utf-8") as fh:
        json.dump(doc, fh)  # same content, other whitespace
    rep = check_bundle(copy)
    assert [f for f, _ in rep.problems] == ["manifest.json"]
    assert "canonical" in rep.problems[0][1]


def test_a_folder_that_is_no_bundle(tmp_path):
    rep = check_bundle(str(tmp_path))
    assert not rep.ok and rep.problems[0][0] == "manifest.json"


@pytest.fixture(scope="module")
def compiled_bundle(tmp_path_factory):
    """A bundle of a surface program (canonicalized) with the CPU backend's differential runs."""
    pytest.importorskip("mlir.ir")
    out = str(tmp_path_factory.mktemp("audit-cpu") / "bundle")
    audit_into(os.path.join(ROOT, "examples", "quickstart.mind"), out, backends=("cpu",))
    return out


# found by a byte-flipping sweep: a changed byte in each of these made the derived files' lookup a
# KeyError (an id one part of audit.json names that another does not hold, a key the schema did not
# require) instead of a report; the first was CI's flip of the middle byte of one bundle
_CROSS_REFERENCES = ['"main/%', '"negative/', '"fn":', '"name": "mind-core-ir"', '"note":', '"end_to_end_max_ulp"',
                     '"rank_bound"', '"ops_checked"']


@pytest.mark.parametrize("which", ["ir", "surface"])
def test_a_changed_byte_anywhere_in_audit_json_is_reported_never_raised(bundle, compiled_bundle, tmp_path, which):
    """Byte after byte (a sample of offsets, and each key and id above): the check reports audit.json
    and never raises (``--check`` without re-solving, for speed; the derived files are rebuilt)."""
    src = bundle if which == "ir" else compiled_bundle
    with open(os.path.join(src, "audit.json"), "rb") as fh:
        data = fh.read()
    offsets = set(range(0, len(data), max(1, len(data) // 400)))
    for needle in _CROSS_REFERENCES:
        at = data.find(needle.encode())
        if at >= 0:
            offsets.add(at + 2)  # a letter of the key or id
    for off in sorted(offsets):
        dst = str(tmp_path / f"c{off}")
        shutil.copytree(src, dst)
        _flip(os.path.join(dst, "audit.json"), off)
        rep = check_bundle(dst, rerun=False)
        assert "audit.json" in {f for f, _ in rep.problems}, (off, data[max(0, off - 40):off + 20])
        shutil.rmtree(dst)
