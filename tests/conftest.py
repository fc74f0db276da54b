"""Shared test configuration: hypothesis profiles.

``MIND_HYPOTHESIS_PROFILE=ci`` (default) is fast; ``thorough`` runs at least 2000 examples per
property.  Failing examples persist in ``.hypothesis/examples`` and are replayed first.
"""

from __future__ import annotations

import os
import sys

import pytest
from hypothesis import HealthCheck, settings
from hypothesis.database import DirectoryBasedExampleDatabase

_DB = DirectoryBasedExampleDatabase(os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                                 ".hypothesis", "examples"))

settings.register_profile("ci", max_examples=30, deadline=None, derandomize=False, database=_DB,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
settings.register_profile("thorough", max_examples=2000, deadline=None, derandomize=False, database=_DB,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
PROFILE = os.environ.get("MIND_HYPOTHESIS_PROFILE", "ci")

# helpers shared by several test folders (``cli_fuzzing``) are imported by name
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
settings.load_profile(PROFILE)


def pytest_report_header(config):
    return f"hypothesis profile: {PROFILE} (MIND_HYPOTHESIS_PROFILE; max_examples={settings().max_examples})"


_PRIVATE_CACHE: list[str] = []
"""The private cache folder this run made (``pytest_configure``), removed when it ends."""


def pytest_configure(config):
    """Compiled kernels go to a private cache for the whole run (never the user's ~/.cache/mind);
    subprocesses started by tests inherit it.  Tests that need their own cache set it themselves."""
    if "MIND_CACHE_DIR" not in os.environ:
        import tempfile

        os.environ["MIND_CACHE_DIR"] = tempfile.mkdtemp(prefix="mind-test-cache-")
        _PRIVATE_CACHE.append(os.environ["MIND_CACHE_DIR"])


def pytest_unconfigure(config):
    """The private cache goes with the run: every run left its folder in the temporary directory.
    The kernels stored in the background are waited for first, so none is written into a folder
    being removed."""
    if not _PRIVATE_CACHE:
        return
    import shutil

    engine = sys.modules.get("mind.compiler.backend.cpu.engine")
    if engine is not None:
        engine.wait_for_cache_writes(timeout=30)
    for folder in _PRIVATE_CACHE:
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def cache_root(tmp_path, monkeypatch):
    """A private, not yet created ``MIND_CACHE_DIR`` with every cache switch at its default, and no
    in-memory frontend entry or folder check left from another test."""
    from mind import cache_store
    from mind.compiler.frontend import cache as fcache

    root = tmp_path / "cache"
    monkeypatch.setenv("MIND_CACHE_DIR", str(root))
    for name in ("MIND_CACHE", "MIND_FRONTEND_CACHE"):
        monkeypatch.delenv(name, raising=False)
    fcache.clear()
    cache_store.forget_checks()
    yield root
    fcache.clear()
    cache_store.forget_checks()
