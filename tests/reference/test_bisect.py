"""The divergence locator names the first op that breaks its own accuracy bound."""

from __future__ import annotations

import numpy as np

from mind.ir.parser import parse_module
from mind.bisect import first_divergence, probe_function
from mind.calling import run_reference

SRC = """func @main(%x: f32[4], %y: f32[4]) -> (f32[]) {
  %0 = mul(%x, %y) : f32[4]
  %1 = exp(%0) : f32[4]
  %2 = add(%1, %x) : f32[4]
  %3 = reduce_sum(%2) {axes = [0], keepdims = false} : f32[]
  return %3
}
"""
ARGS = [np.array([0.5, -1.0, 2.0, 0.0], np.float32), np.array([1.0, 2.0, -0.5, 3.0], np.float32)]


def _fn():
    return parse_module(SRC).functions[0]


def _reference_runner(fn):
    return lambda args: run_reference(fn, args)


def test_probe_function_returns_every_intermediate():
    probe = probe_function(_fn())
    assert [v.name for v in probe.results] == ["0", "1", "2", "3"]
    assert len(run_reference(probe, ARGS)) == 4


def test_reference_against_itself_has_no_divergence():
    assert first_divergence(_fn(), ARGS, _reference_runner) is None


def _perturbing_runner(index, ulps):
    """A self-consistent fake implementation whose op ``index`` is off by ``ulps`` (1, or 1 %)."""
    from mind.reference.ops import OP_FUNCTIONS

    def compile_runner(fn):
        def run(args):
            values = {id(p): np.asarray(a) for p, a in zip(fn.params, args)}
            for i, op in enumerate(fn.ops):
                out = OP_FUNCTIONS[op.op](*[values[id(v)] for v in op.operands], **op.attrs)
                if i == index:
                    out = np.nextafter(out, np.float32(np.inf)) if ulps == 1 else out * np.float32(1.01)
                values[id(op.result)] = np.asarray(out, dtype=out.dtype)
            return [values[id(v)] for v in fn.results]
        return run
    return compile_runner


def test_a_wrong_op_is_located_even_though_later_ops_also_differ():
    d = first_divergence(_fn(), ARGS, _perturbing_runner(1, ulps=100))
    assert d is not None and d.index == 1 and d.op == "exp" and d.value == "1"
    assert "first divergence at op #1" in str(d)


def test_an_error_within_the_ops_bound_is_not_a_divergence():
    # exp may be off by a few ULP (spec/accuracy.py); one ULP is within its bound
    assert first_divergence(_fn(), ARGS, _perturbing_runner(1, ulps=1)) is None
    # add is exact: one ULP there is a divergence
    d = first_divergence(_fn(), ARGS, _perturbing_runner(2, ulps=1))
    assert d is not None and d.op == "add"
