"""The x86-64 levels of the prebuilt GEMM (``kernel_library.ISAS``) this host runs, for the tests that
build kernels for a named level: the options refuse a level the host cannot run (E7002: a kernel
runs in this process), so on an AVX2-only host such a test skips its AVX-512 case, with the reason,
instead of failing."""

from __future__ import annotations

import pytest

from mind.compiler.backend.cpu.kernel_library import ISAS
from mind.compiler.backend.cpu.vector_unit import runs_isa

HOST_LEVELS = tuple(isa for isa in ISAS if runs_isa(isa))
"""The levels of ``ISAS`` this host runs, best first."""


def needs_level(cpu: str) -> None:
    """Skip the calling test where the options ``cpu`` names a level this host does not run."""
    if cpu not in ("host", "generic") and not runs_isa(cpu):
        pytest.skip(f"this host does not run {cpu} code (the options refuse it: E7002)")
