"""The output pool (``outputs.new_output``): large results reuse the buffers of dead ones, and never
the buffer of an array, view or base that someone still holds."""

from __future__ import annotations

import gc

import numpy as np
import pytest

from mind.compiler.backend.cpu import outputs
from mind.compiler.backend.cpu.outputs import MIN_POOLED_BYTES, new_output

BIG = (1024, 1024)  # 4 MiB of f32


@pytest.fixture(autouse=True)
def empty_pool(monkeypatch):
    monkeypatch.setattr(outputs, "_free", {})
    monkeypatch.setattr(outputs, "_held", [0])


def test_small_outputs_are_plain_arrays():
    a = new_output((4, 4), np.float32)
    assert a.base is None and a.flags.owndata and MIN_POOLED_BYTES > a.nbytes


def test_large_outputs_are_aligned_contiguous_and_writable():
    a = new_output(BIG, np.float64)
    assert a.shape == BIG and a.dtype == np.float64 and a.flags.c_contiguous and a.flags.writeable
    assert a.ctypes.data % 64 == 0


def test_a_dead_output_gives_its_buffer_to_the_next_one():
    a = new_output(BIG, np.float32)
    address = a.ctypes.data
    del a
    gc.collect()
    assert outputs.pooled_bytes() > 0
    b = new_output(BIG, np.float32)
    assert b.ctypes.data == address and outputs.pooled_bytes() == 0


@pytest.mark.parametrize("keep", ["array", "view", "base", "slice"])
def test_a_held_buffer_is_never_reused(keep):
    a = new_output(BIG, np.float32)
    a.fill(7)
    held = {"array": a, "view": a.view(), "base": a.base, "slice": a[10:20]}[keep]
    snapshot = np.array(held, copy=True)
    if keep != "array":
        del a
        gc.collect()
    for _ in range(3):
        b = new_output(BIG, np.float32)
        assert not np.shares_memory(b, held)
        b.fill(1)
        del b
    assert np.array_equal(held, snapshot)


def test_the_pool_is_bounded(monkeypatch):
    monkeypatch.setattr(outputs, "MAX_POOLED_BYTES", 3 * (1 << 22) + 1000)
    arrays = [new_output(BIG, np.float32) for _ in range(5)]
    del arrays
    gc.collect()
    assert outputs.pooled_bytes() <= 2 * ((1 << 22) + 64)  # MAX_PER_SIZE buffers of this size
    many = [new_output((1024, 1024 + i), np.float32) for i in range(1, 6)]
    del many
    gc.collect()
    assert outputs.pooled_bytes() <= outputs.MAX_POOLED_BYTES


def test_compiled_results_held_across_calls_stay_distinct_and_right():
    import mind
    f = mind.compile("fn f(x: Tensor<f32, [1024, 512]>) -> Tensor<f32, [1024, 512]> { x * 2.0 }")
    xs = [np.full((1024, 512), i, np.float32) for i in range(4)]
    ys = [f(x) for x in xs]
    for i, y in enumerate(ys):
        assert np.all(y == 2 * i)
    del ys
    gc.collect()
    again = [f(x) for x in xs]  # now from the pool
    for i, y in enumerate(again):
        assert np.all(y == 2 * i)
