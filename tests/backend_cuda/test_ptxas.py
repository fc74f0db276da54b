"""Every kernel the cuda backend emits for the conformance suite's programs and the differential
strategy's programs is assembled by ptxas for sm_80 and sm_90 (a kernel ptxas refuses fails the
test).  This runs on every machine: ptxas comes from the pinned nvidia-cuda-nvcc wheel.  The CI
profile takes a representative subset of the suite (one program per op and dtype, and some
compositions); ``MIND_HYPOTHESIS_PROFILE=thorough`` takes every program."""

from __future__ import annotations

import os

import pytest
from hypothesis import given, settings

from mind.compiler.backend.cuda.api import compile_program
from mind.compiler.backend.cuda.options import CudaOptions
from mind.compiler.backend.cuda.ptxas import find_ptxas
from mind.conformance.suite import load_suite
from mind.diagnostics import MindError
from mind.ir.parser import parse_module

THOROUGH = os.environ.get("MIND_HYPOTHESIS_PROFILE") == "thorough"
OPTIONS = CudaOptions.resolve({}, environ={})

pytestmark = pytest.mark.skipif(find_ptxas() is None, reason="no ptxas (install the pinned nvidia-cuda-nvcc wheel)")


def _suite_programs() -> list[tuple[str, str, list]]:
    """(case id, Core IR, inputs) of the suite's programs that run: all (thorough) or one per op set and dtype
    set, and the first composition of each depth."""
    suite = load_suite()
    chosen, seen = [], set()
    for e in suite.entries:
        if e.status != "success":
            continue
        key = (e.ops, e.dtypes) if len(e.ops) == 1 else ("depth", e.depth)
        if THOROUGH or key not in seen:
            seen.add(key)
            case = suite.case(e)
            chosen.append((e.id, case["ir"], case["inputs"]))
    return chosen


PROGRAMS = _suite_programs()


def _assemble(ir_text: str, inputs: list):
    """The program compiled for the sizes its inputs give its symbolic dims."""
    from mind.calling import bind_arguments
    from mind.conformance.encoding import decode

    fn = parse_module(ir_text).functions[0]
    env = bind_arguments(fn, [decode(x) for x in inputs])[1] if fn.symbols() else {}
    return compile_program(fn, env, OPTIONS)


@pytest.mark.parametrize("case_id,ir_text,inputs", PROGRAMS, ids=[c for c, _, _ in PROGRAMS])
def test_suite_program_kernels_assemble(case_id, ir_text, inputs):
    try:
        compiled = _assemble(ir_text, inputs)
    except MindError as e:
        if e.diagnostics[0].code == "E6003":  # a part that does not map to the GPU yet: named, listed
            pytest.xfail(f"{case_id}: {e.diagnostics[0].message}")
        raise
    for module, cubins in compiled.cubins.items():
        assert set(cubins) == {"sm_80", "sm_90"}, module
        assert all(c[:4] == b"\x7fELF" for c in cubins.values())
        assert compiled.ptx[module].lstrip().startswith("//")


def test_the_subset_covers_every_op():
    from mind.spec.ops import OPS

    ops = {op for _, ir_text, _ in PROGRAMS for op in OPS if f"= {op}(" in ir_text}
    assert ops == set(OPS) - {"const"} or ops == set(OPS)


def _differential_programs():
    import sys

    sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(__file__)), "backend_cpu"))
    from test_differential import programs  # the cpu backend's differential strategy, at fixed shapes

    return programs()


@settings(max_examples=2000 if THOROUGH else 8)
@given(_differential_programs())
def test_differential_program_kernels_assemble(case):
    fn = case[0] if isinstance(case, tuple) else case
    try:
        compile_program(fn, {}, OPTIONS)
    except MindError as e:
        if e.diagnostics[0].code != "E6003":
            raise
