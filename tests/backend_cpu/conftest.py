import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))

pytest.importorskip("mlir.ir")
pytest.importorskip("llvmlite.binding")


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path_factory, monkeypatch):
    """Every test compiles into a private cache folder (never the user's ~/.cache/mind)."""
    monkeypatch.setenv("MIND_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "mind-cache"))


@pytest.fixture(autouse=True)
def _schedule_every_op(monkeypatch):
    """Schedule every op that has a plan, however small (``MIND_CPU_SCHEDULE=all``): the tests' shapes
    are small, and the default cost model (``transforms.MIN_SCHEDULE_WORK``) would leave most of them
    scalar loops, untested by the differential and schedule tests.  Tests of the cost model itself
    set ``MIND_CPU_SCHEDULE=1``."""
    monkeypatch.setenv("MIND_CPU_SCHEDULE", "all")
