"""Shared by the cuda backend's tests: the ``gpu`` fixture skips, with the reason, where no GPU can run them."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def gpu():
    from mind.runtime.cuda import unavailable

    reason = unavailable()
    if reason is not None:
        pytest.skip(f"needs an NVIDIA GPU: {reason}")
