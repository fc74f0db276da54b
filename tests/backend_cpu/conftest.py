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
