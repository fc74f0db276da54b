"""The generated docs are in step with the machine-readable spec."""

from __future__ import annotations

import importlib.util
import os

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _gen_docs():
    spec = importlib.util.spec_from_file_location("gen_docs", os.path.join(ROOT, "tools", "gen_docs.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_docs_are_in_step():
    files = _gen_docs().rendered()
    stale = []
    for rel, text in files.items():
        path = os.path.join(ROOT, rel)
        if not os.path.exists(path) or open(path, encoding="utf-8").read() != text:
            stale.append(rel)
    ops_dir = os.path.join(ROOT, "docs", "spec", "ops")
    extra = [n for n in os.listdir(ops_dir) if f"docs/spec/ops/{n}" not in files]
    assert not stale and not extra, f"run `python tools/gen_docs.py`: out of date {stale}, extra {extra}"


def test_docs_cover_every_op_label_and_code():
    from mind.spec.errors import CODES
    from mind.spec.ops import OPS

    files = _gen_docs().rendered()
    for op in OPS.values():
        page = files[f"docs/spec/ops/{op.name}.md"]
        for section in ("## Semantics", "## Inputs", "## Outputs", "## Constraints", "## Edge cases",
                        "## Accuracy", "## VJP", "## Examples"):
            assert section in page, (op.name, section)
        for c in op.constraints:
            assert f"`{op.name}.{c.label}`" in page
    for code in CODES:
        assert f"`{code}`" in files["docs/errors.md"]
    index = files["docs/spec/index.md"]
    for word in ("ConstTensor", "Mean", "Squeeze", "Relu", "Neg", "Conv2d", "Broadcasting", "autodiff"):
        assert word in index


def test_architecture_doc_exists():
    text = open(os.path.join(ROOT, "docs", "architecture.md"), encoding="utf-8").read()
    for folder in ("spec/", "mind/", "reference/", "conformance/", "tools/"):
        assert folder in text
