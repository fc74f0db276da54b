"""The per-call path: prepared argument binding, its fallback to full checking, and data pointers."""

from __future__ import annotations

import numpy as np
import pytest

from mind.compiler.backend.cpu.abi import data_pointer
from mind.compiler.backend.cpu.api import compile_function
from mind.compiler.frontend.api import compile_source
from mind.diagnostics import MindError

SRC = "fn f(a: f32, b: Tensor<f32, [2, 3]>) -> Tensor<f32, [2, 3]> { b * a + 1.0 }"


def _runner():
    return compile_function(compile_source(SRC).functions[0])


def test_repeated_calls_take_the_prepared_path_and_stay_correct():
    run = _runner()
    b = np.arange(6, dtype=np.float32).reshape(2, 3)
    first = run([np.float32(2), b])[0]
    assert run._static_inputs([np.float32(2), b]) is not None  # the kernel exists: prepared path
    again = run([np.float32(2), b])[0]
    np.testing.assert_array_equal(first, b * 2 + 1)
    np.testing.assert_array_equal(again, first)


@pytest.mark.parametrize("args, code", [
    ([np.float64(2), np.zeros((2, 3), np.float32)], "E6009"),   # wrong dtype
    ([np.float32(2), np.zeros((3, 2), np.float32)], "E6009"),   # wrong shape
    ([np.float32(2)], "E6010"),                                 # missing argument
])
def test_bad_arguments_after_the_first_call_still_get_coded_diagnostics(args, code):
    run = _runner()
    run([np.float32(1), np.zeros((2, 3), np.float32)])
    assert run._static_inputs(args) is None
    with pytest.raises(MindError) as info:
        run(args)
    assert info.value.diagnostics[0].code == code


def test_read_only_and_non_contiguous_inputs():
    run = _runner()
    b = np.arange(6, dtype=np.float32).reshape(2, 3)
    ro = b.copy()
    ro.flags.writeable = False
    np.testing.assert_array_equal(run([np.float32(3), ro])[0], b * 3 + 1)
    nc = np.asfortranarray(b)
    assert not nc.flags.c_contiguous
    np.testing.assert_array_equal(run([np.float32(3), nc])[0], b * 3 + 1)


@pytest.mark.parametrize("a", [
    np.arange(5, dtype=np.float32),
    np.zeros((0, 3), np.float64),
    np.arange(4, dtype=np.int64)[1:],
])
def test_data_pointer_matches_numpy(a):
    assert data_pointer(a) == a.ctypes.data
    ro = a.copy()
    ro.flags.writeable = False
    assert data_pointer(ro) == ro.ctypes.data


@pytest.mark.parametrize("name, value", [
    ("MIND_CPU_SCHEDULE", "al"), ("MIND_CPU_SCHEDULE", "yes"), ("MIND_CPU_JIT", "maybe"),
    ("MIND_NUM_THREADS", "abc"), ("MIND_NUM_THREADS", "0"), ("MIND_NUM_THREADS", "100000"),
    ("MIND_OPENMP", "iomp"), ("MIND_OPENMP", "GOMP"), ("MIND_CPU_MATMUL", "blas"), ("MIND_CACHE", "false"),
])
def test_invalid_environment_settings_are_usage_errors_not_silent_defaults(monkeypatch, tmp_path, name, value):
    monkeypatch.setenv("MIND_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv(name, value)
    with pytest.raises(MindError) as info:
        _runner()
    d = info.value.diagnostics[0]
    assert d.code == "E7002" and name in d.message and d.help


@pytest.mark.parametrize("name, value", [("MIND_CPU_SCHEDULE", "0"), ("MIND_CPU_SCHEDULE", "all"),
                                         ("MIND_CPU_JIT", "0"), ("MIND_NUM_THREADS", "1"),
                                         ("MIND_OPENMP", "gomp"), ("MIND_OPENMP", "kmpc")])
def test_valid_environment_settings_are_accepted(monkeypatch, tmp_path, name, value):
    monkeypatch.setenv("MIND_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv(name, value)
    b = np.ones((2, 3), np.float32)
    np.testing.assert_array_equal(_runner()([np.float32(2), b])[0], b * 2 + 1)
