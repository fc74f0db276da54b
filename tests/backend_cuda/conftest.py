"""Shared by the cuda backend's tests: whether a GPU can run them, and the reason when not."""

from __future__ import annotations

import pytest


def gpu_unavailable() -> str | None:
    """Why the GPU tests cannot run here (no cuda-bindings, no driver, no GPU), or None."""
    from mind.diagnostics import MindError

    try:
        from mind.runtime.cuda import device

        device(0)
    except MindError as e:
        return e.diagnostics[0].message
    return None


@pytest.fixture(scope="session")
def gpu():
    reason = gpu_unavailable()
    if reason is not None:
        pytest.skip(f"needs an NVIDIA GPU: {reason}")
