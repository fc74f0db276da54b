"""The adapters for other systems (conformance/adapters/), each an optional extra: on the spec's
examples and the hand-written edge cases they depart only where their expectations file says.
Without the extra installed, each test is skipped with the reason."""

from __future__ import annotations

import importlib.util
import os

import pytest

from mind.conformance.expectations import load
from mind.conformance.run import RunOptions, run
from mind.conformance.suite import HERE, all_labels

ADAPTERS = {  # adapter module -> the package its extra installs
    "iree": "iree.compiler",
    "onnxruntime": "onnxruntime",
    "jax_lax": "jax",
    "torch_ops": "torch",
}


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:
        return False


@pytest.mark.parametrize("adapter", sorted(ADAPTERS))
def test_every_expectation_names_a_label_and_a_reason(adapter):
    exp = load(os.path.join(HERE, "adapters", f"{adapter}.expect"), set(all_labels()))
    assert exp.entries, f"{adapter}.expect lists no departure"
    assert all(e.reason and e.label for e in exp.entries)


@pytest.mark.slow
@pytest.mark.parametrize("adapter", sorted(ADAPTERS))
def test_adapter_departs_only_as_expected(adapter):
    if not _installed(ADAPTERS[adapter]):
        pytest.skip(f"{ADAPTERS[adapter]} is not installed (pip install 'mind-lang[conformance-{adapter.split('_')[0]}]')")
    result = run(RunOptions(impl=f"python:mind.conformance.adapters.{adapter}:factory",
                            expect=os.path.join(HERE, "adapters", f"{adapter}.expect"),
                            select=("examples/*", "edge/*"), timeout_s=300))
    unexpected = [(c.entry.id, c.outcome, c.message[:200]) for c in result.cases if c.outcome in ("fail", "xpass")]
    assert unexpected == []
