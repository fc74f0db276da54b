"""The per-call path: arguments of shapes bound before skip the general binding (the kernel's
prepared checks and descriptor frames, ``ArgBinder``), everything else falls back to it with its
coded diagnostics; data pointers."""

from __future__ import annotations

import ctypes
import threading

import numpy as np
import pytest
from hypothesis import given, strategies as st

import mind
from mind.compiler.backend.cpu import api
from mind.compiler.backend.cpu.abi import data_pointer
from mind.compiler.backend.cpu.api import compile_function
from mind.compiler.frontend.api import compile_source
from mind.diagnostics import MindError
from mind.runtime import memref

SRC = "fn f(a: f32, b: Tensor<f32, [2, 3]>) -> Tensor<f32, [2, 3]> { b * a + 1.0 }"
SYMBOLIC = """func @f(%x: f32[n, 3], %y: f32[3]) -> (f32[n, 3], f32[n, 3]) where n >= 2 {
  %0 = add(%x, %y) : f32[n, 3]
  %1 = mul(%x, %y) : f32[n, 3]
  return %0, %1
}"""


def _runner(src: str = SRC):
    return compile_function(compile_source(src).functions[0])


@pytest.fixture
def bindings(monkeypatch):
    """How many calls went through the general argument binding."""
    count = [0]
    bind = api.bind_arguments

    def counting(fn, args):
        count[0] += 1
        return bind(fn, args)
    monkeypatch.setattr(api, "bind_arguments", counting)
    return count


def test_repeated_calls_take_the_prepared_path_and_stay_correct(bindings):
    run = _runner()
    b = np.arange(6, dtype=np.float32).reshape(2, 3)
    first = run([np.float32(2), b])[0]
    assert bindings[0] == 1
    for _ in range(3):
        again = run([np.float32(2), b])[0]   # a numpy scalar, read as a 0-d array
        assert again is not first            # fresh results every call
        np.testing.assert_array_equal(again, b * 2 + 1)
    np.testing.assert_array_equal(run((np.array(3, np.float32), b))[0], b * 3 + 1)
    assert bindings[0] == 1
    np.testing.assert_array_equal(first, b * 2 + 1)


@pytest.mark.parametrize("args, code", [
    ([np.float64(2), np.zeros((2, 3), np.float32)], "E6009"),   # wrong dtype
    ([np.float32(2), np.zeros((3, 2), np.float32)], "E6009"),   # wrong shape
    ([np.float32(2), np.zeros((2, 3), np.int32)], "E6009"),     # wrong dtype of an array
    ([np.float32(2), np.zeros((2, 3, 1), np.float32)], "E6009"),  # wrong rank
    ([np.float32(2)], "E6010"),                                 # missing argument
    ([np.float32(2), np.zeros((2, 3), np.float32), np.float32(1)], "E6010"),  # one too many
])
def test_bad_arguments_after_good_calls_still_get_coded_diagnostics(args, code):
    run = _runner()
    good = [np.float32(1), np.zeros((2, 3), np.float32)]
    run(good)
    run(good)
    with pytest.raises(MindError) as info:
        run(args)
    assert info.value.diagnostics[0].code == code
    np.testing.assert_array_equal(run(good)[0], np.ones((2, 3), np.float32))  # and still good after


def test_read_only_non_contiguous_and_subclassed_inputs(bindings):
    run = _runner()
    b = np.arange(6, dtype=np.float32).reshape(2, 3)
    run([np.float32(3), b])
    ro = b.copy()
    ro.flags.writeable = False
    np.testing.assert_array_equal(run([np.float32(3), ro])[0], b * 3 + 1)
    assert bindings[0] == 1  # read-only inputs take the prepared path
    nc = np.asfortranarray(b)
    assert not nc.flags.c_contiguous
    np.testing.assert_array_equal(run([np.float32(3), nc])[0], b * 3 + 1)
    strided = np.arange(12, dtype=np.float32).reshape(2, 6)[:, ::2]
    np.testing.assert_array_equal(run([np.float32(1), strided])[0], strided + 1)

    class Sub(np.ndarray):
        pass
    np.testing.assert_array_equal(run([np.float32(2), b.view(Sub)])[0], b * 2 + 1)
    tagged = b.astype(np.dtype(np.float32, metadata={"unit": "m"}))  # an equal dtype, another object
    np.testing.assert_array_equal(run([np.float32(2), tagged])[0], b * 2 + 1)


def test_zero_d_parameters_and_results():
    run = _runner("fn f(a: f32, b: f32) -> f32 { a * b + 1.0 }")
    for _ in range(3):
        r = run([np.array(2, np.float32), np.float32(4)])[0]
        assert r.shape == () and r.dtype == np.float32 and r == 9


def test_many_results_are_distinct_fresh_arrays(bindings):
    run = _runner("fn f(a: Tensor<i32, [3]>) -> (Tensor<i32, [3]>, Tensor<i32, [3]>, Tensor<i32, [3]>) "
                  "{ (a + a, a * a, a - a) }")
    a = np.array([1, -2, 3], np.int32)
    first = run([a])
    second = run([a])
    assert bindings[0] == 1
    for r in (first, second):
        np.testing.assert_array_equal(r[0], a + a)
        np.testing.assert_array_equal(r[1], a * a)
        np.testing.assert_array_equal(r[2], 0 * a)
    assert len({id(r) for r in first + second}) == 6
    assert not any(np.shares_memory(x, y) for x in first for y in second)


def test_symbolic_dims_called_with_two_shapes_alternately(bindings):
    f = mind.compile(SYMBOLIC, fn="f")
    y = np.array([1, 2, 3], np.float32)
    xs = [np.arange(6, dtype=np.float32).reshape(2, 3), np.arange(15, dtype=np.float32).reshape(5, 3)]
    for i in range(6):
        x = xs[i % 2] + i
        s, p = f(x, y)
        np.testing.assert_array_equal(s, x + y)
        np.testing.assert_array_equal(p, x * y)
    assert bindings[0] == 2  # once per shape
    with pytest.raises(MindError) as info:  # the assumption n >= 2 is checked for a new shape
        f(np.zeros((1, 3), np.float32), y)
    assert info.value.diagnostics[0].code == "E6009" and "n >= 2" in info.value.diagnostics[0].message
    with pytest.raises(MindError) as info:  # a shape that binds n but breaks another parameter
        f(xs[0], np.zeros(4, np.float32))
    assert info.value.diagnostics[0].code == "E6009"
    with pytest.raises(MindError) as info:
        f(xs[0].astype(np.float64), y)
    assert info.value.diagnostics[0].code == "E6009"


def test_bool_inputs_are_made_0_1_on_the_prepared_path(bindings):
    run = _runner("fn f(a: Tensor<bool, [4]>, b: Tensor<bool, [4]>) -> Tensor<bool, [4]> { a == b }")
    t = np.array([True, False, True, True])
    run([t, t])
    twos = np.array([2, 0, 1, 3], np.uint8).view(np.bool_)  # bytes other than 0 and 1
    np.testing.assert_array_equal(run([twos, t])[0], [True, True, True, True])
    assert bindings[0] == 1


def test_out_arrays_on_the_prepared_path():
    run = _runner()
    b = np.arange(6, dtype=np.float32).reshape(2, 3)
    run([np.float32(2), b])
    out = np.empty((2, 3), np.float32)
    assert run([np.float32(2), b], out=[out])[0] is out
    np.testing.assert_array_equal(out, b * 2 + 1)
    bad = [np.empty((2, 3), np.float64), np.empty((3, 2), np.float32), np.empty((2, 6), np.float32)[:, ::2], b]
    ro = np.empty((2, 3), np.float32)
    ro.flags.writeable = False
    for o in bad + [ro]:
        with pytest.raises(MindError) as info:
            run([np.float32(2), b], out=[o])
        assert info.value.diagnostics[0].code == "E6009"
    with pytest.raises(MindError) as info:  # the arguments' diagnostic comes first
        run([np.float64(2), b], out=[ro])
    assert "argument %a" in info.value.diagnostics[0].message


def test_out_arrays_that_overlap_an_input_or_each_other(bindings):
    run = _runner("fn f(a: Tensor<f32, [2, 3]>) -> (Tensor<f32, [2, 3]>, Tensor<f32, [2, 3]>) { (a + 1.0, a * 2.0) }")
    mem = np.arange(24, dtype=np.float32)
    a = mem[:6].reshape(2, 3)
    run([a])
    for o1, o2 in [(mem[3:9], mem[12:18]), (mem[12:18], mem[15:21]), (mem[12:18], mem[12:18]), (mem[12:18], mem[5:11])]:
        with pytest.raises(MindError) as info:
            run([a], out=[o1.reshape(2, 3), o2.reshape(2, 3)])
        assert info.value.diagnostics[0].code == "E6009" and "overlaps" in info.value.diagnostics[0].message
    calls = bindings[0]
    adjacent = (mem[6:12].reshape(2, 3), mem[12:18].reshape(2, 3))  # touching, not sharing a byte
    run([a], out=adjacent)
    np.testing.assert_array_equal(adjacent[0], a + 1)
    np.testing.assert_array_equal(adjacent[1], a * 2)
    assert bindings[0] == calls  # accepted by the quick checks


def test_kernel_called_directly_checks_every_array():
    run = _runner()
    b = np.ones((2, 3), np.float32)
    run([np.float32(2), b])
    k = run.kernel({})
    np.testing.assert_array_equal(k(np.array(2, np.float32), b), b * 2 + 1)
    ro = np.empty((2, 3), np.float32)
    ro.flags.writeable = False
    two, fortran = np.array(2, np.float32), np.asfortranarray(np.ones((2, 3), np.float32))
    for args, out, what in [((np.array(2, np.float64), b), None, "dtype"), ((two, b.T), None, "shape"),
                            ((two, b), [ro], "writeable"), ((two, fortran), None, "contiguous"),
                            ((two,), None, "inputs")]:
        with pytest.raises(MindError) as info:
            k(*args, out=out)
        assert info.value.diagnostics[0].code == "E6012" and what in info.value.diagnostics[0].message


def test_kernel_called_directly_refuses_out_arrays_that_share_memory():
    """The kernel's data pointers are ``noalias`` (``lowering._promise_no_aliasing``): an ``out`` that
    overlaps an input or another result must be refused on the full checks' path too, not only by
    the quick checks (which send it there)."""
    run = _runner("fn f(a: Tensor<f32, [2, 3]>) -> (Tensor<f32, [2, 3]>, Tensor<f32, [2, 3]>) { (a + 1.0, a * 2.0) }")
    mem = np.arange(24, dtype=np.float32)
    a = mem[:6].reshape(2, 3)
    run([a])
    k = run.kernel({})
    for o1, o2, what in [(mem[3:9], mem[12:18], "output 0"), (mem[12:18], mem[15:21], "output 1"),
                         (mem[:6], mem[12:18], "output 0")]:
        before = mem.copy()
        with pytest.raises(MindError) as info:
            k(a, out=[o1.reshape(2, 3), o2.reshape(2, 3)])
        message = info.value.diagnostics[0].message
        assert info.value.diagnostics[0].code == "E6012" and what in message and "shares memory" in message
        np.testing.assert_array_equal(mem, before)  # nothing ran
    outs = (mem[6:12].reshape(2, 3), mem[12:18].reshape(2, 3))  # touching, not sharing a byte
    k(a, out=outs)
    np.testing.assert_array_equal(outs[0], a + 1)
    np.testing.assert_array_equal(outs[1], a * 2)


def test_calls_from_several_threads_never_share_descriptors():
    run = _runner("fn f(a: Tensor<f64, [64]>) -> Tensor<f64, [64]> { a * 2.0 + 1.0 }")
    run([np.zeros(64)])
    errors: list[str] = []

    def work(seed: int) -> None:
        for i in range(300):
            a = np.full(64, seed * 1000.0 + i)
            if not np.array_equal(run([a])[0], a * 2 + 1):
                errors.append(f"thread {seed} call {i}")
    threads = [threading.Thread(target=work, args=(s,)) for s in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors


@pytest.mark.parametrize("words, field", [(None, None), (None, "kept"), ("short", "kept")])
def test_without_the_word_view_or_the_data_field_calls_stay_right(monkeypatch, words, field):
    """No word view (``from_address`` on the data field), neither (``data_pointer``), or a view
    too short for the arrays' addresses (the IndexError sends the call through the full checks)."""
    if field is None:
        monkeypatch.setattr(memref, "_DATA_FIELD", None)
    monkeypatch.setattr(memref, "_WORDS", None if words is None else memoryview(np.zeros(4, np.int64)))
    run = _runner()
    b = np.arange(6, dtype=np.float32).reshape(2, 3)
    ro = b.copy()
    ro.flags.writeable = False
    for x in (b, ro, b):
        np.testing.assert_array_equal(run([np.float32(2), x])[0], b * 2 + 1)


@pytest.mark.parametrize("a", [
    np.arange(5, dtype=np.float32),
    np.zeros((0, 3), np.float64),
    np.arange(4, dtype=np.int64)[1:],
    np.arange(24, dtype=np.int32).reshape(2, 3, 4)[1, 1:],
    np.zeros((), np.bool_),
])
def test_data_pointer_and_the_data_field_match_numpy(a):
    assert data_pointer(a) == a.ctypes.data
    assert memref._DATA_FIELD is not None  # CPython: the field is read directly
    assert ctypes.c_int64.from_address(id(a) + memref._DATA_FIELD).value == a.ctypes.data
    assert memref._WORDS is not None  # x86-64 CPython: read through the word view
    assert memref._WORDS[(id(a) + memref._DATA_FIELD) >> 3] == memref._pointer(a) == a.ctypes.data
    ro = a.copy()
    ro.flags.writeable = False
    assert data_pointer(ro) == ro.ctypes.data == memref._pointer(ro)


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


# The quick path against the reference backend's binding, on arguments of every kind: after good
# calls have prepared it, any argument gives the same result or the same diagnostic code.
PROPERTY = """func @f(%x: f32[3, 5, 7], %y: i64[n, 7], %s: f64[]) -> (f32[3, 5, 7], i64[n, 7]) where n >= 2 {
  %0 = convert(%s) {dtype = f32} : f32[]
  %1 = mul(%x, %0) : f32[3, 5, 7]
  %2 = add(%y, %y) : i64[n, 7]
  return %1, %2
}"""
_PROPERTY_FNS: dict[str, object] = {}


def _property_fns():
    if not _PROPERTY_FNS:
        _PROPERTY_FNS["cpu"] = mind.compile(PROPERTY, fn="f")
        _PROPERTY_FNS["reference"] = mind.compile(PROPERTY, backend="reference", fn="f")
        for n in (2, 5):  # both shapes prepared
            _PROPERTY_FNS["cpu"](np.ones((3, 5, 7), np.float32), np.ones((n, 7), np.int64), np.float64(1))
    return _PROPERTY_FNS["cpu"], _PROPERTY_FNS["reference"]


def _argument(draw, st, dtype, shape):
    """An array like the parameter's, or off in one way: dtype, an extent, rank, layout, a view."""
    kind = draw(st.sampled_from(["exact", "exact", "dtype", "extent", "rank", "fortran", "strided", "read-only",
                                 "subclass", "scalar", "list"]))
    if kind == "dtype":
        dtype = draw(st.sampled_from([np.float32, np.float64, np.int32, np.int64, np.bool_]))
    if kind == "extent" and shape:
        shape = shape[:-1] + (draw(st.sampled_from([1, 6, 8])),)
    if kind == "rank":
        shape = shape + (1,) if draw(st.booleans()) else shape[1:]
    a = (np.arange(int(np.prod(shape)), dtype=np.float64) % 17 - 8).astype(dtype).reshape(shape)
    if kind == "fortran":
        a = np.asfortranarray(a)
    elif kind == "strided":
        a = np.repeat(a, 2, axis=-1)[..., ::2] if shape else a
    elif kind == "read-only":
        a.flags.writeable = False
    elif kind == "subclass":
        a = a.view(np.matrix) if a.ndim == 2 else a
    elif kind == "scalar" and not shape:
        return a.item()
    elif kind == "list":
        return a.tolist()
    return a


def _outcome(f, args):
    try:
        return [np.asarray(r) for r in f(*args)]
    except MindError as e:
        return e.diagnostics[0].code


def _same_outcome(args) -> None:
    cpu, reference = _property_fns()
    want, got = _outcome(reference, args), _outcome(cpu, args)
    if isinstance(want, str):
        assert got == want
    else:
        assert not isinstance(got, str), got
        for g, w in zip(got, want):
            assert g.dtype == w.dtype and g.shape == w.shape
            np.testing.assert_array_equal(g, w)


@given(st.data())
def test_quick_path_matches_the_reference_binding(data):
    n = data.draw(st.sampled_from([2, 5, 1, 3]))  # prepared, prepared, violates n >= 2, new
    _same_outcome([data.draw(st.composite(lambda d: _argument(d, st, dt, sh))())
                   for dt, sh in ((np.float32, (3, 5, 7)), (np.int64, (n, 7)), (np.float64, ()))])


X, Y = np.ones((3, 5, 7), np.float32), np.arange(35, dtype=np.int64).reshape(5, 7)


@pytest.mark.parametrize("args", [
    [X, Y, np.float64(3)], [X, Y[:2], 2.5], [X, Y, np.float32(3)], [X.astype(np.float64), Y, np.float64(1)],
    [X, Y.astype(np.int32), np.float64(1)], [X, Y[:1], np.float64(1)], [X[..., ::-1], Y, np.float64(-1)],
])
def test_quick_path_matches_the_reference_binding_on(args):
    _same_outcome(args)
