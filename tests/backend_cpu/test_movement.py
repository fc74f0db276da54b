"""Movement ops against the reference, bit for bit.

Pads as fills plus a copy into a window (``Emitter.pad``, the ``linalg.copy`` plan of
``cpu/transforms.py``: loops that LLVM's loop vectorizer takes): every pad width (0 included),
interior padding on any axis, operands that are inputs or computed (elementwise, a matmul's result),
fused consumers, 1 and 2 threads, both vector units.  Gathers of whole rows vectorized as contiguous
reads (``transforms._plan_row_reads``, ``payload.row_reads``): indices out of range and negative
(clamped), index tensors of rank 2, gathers along inner axes, slices with steps fused around them."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest
from hypothesis import example, given, strategies as st

from mind.calling import run_reference
from mind.compiler.backend.cpu.api import compile_function
from mind.compiler.backend.cpu.movement_loops import fewest_predicated_trips
from mind.compiler.backend.cpu.vector_unit import runs_isa, vector_unit
from mind.ir.builder import FunctionBuilder
from mind.spec.dtypes import DType
from mind.spec.ops import TensorType

_DTYPES = {"f32": DType.F32, "f64": DType.F64, "i32": DType.I32, "i64": DType.I64, "bool": DType.BOOL}


def _padded(shape, lo, hi, interior):
    return tuple(l + h + n + max(n - 1, 0) * i for n, l, h, i in zip(shape, lo, hi, interior))


def _pad_program(dtype: DType, shape, lo, hi, interior, operand: str = "input", consumer: str = "none"):
    """``pad`` of an input, of ``exp``/``add`` of it (computed), or of a matmul's result; then maybe a
    consumer that elementwise fusion would like to fold the pad into (an add, a strided slice)."""
    b = FunctionBuilder("main")
    x = b.param("x", TensorType(dtype, shape))
    v = b.param("v", TensorType(dtype, ()))
    if operand == "computed":
        x = b.emit("add", x, x)
    elif operand == "matmul":
        w = b.param("w", TensorType(dtype, (shape[-1], shape[-1])))
        x = b.emit("matmul", x, w)
    y = b.emit("pad", x, v, lo=tuple(lo), hi=tuple(hi), interior=tuple(interior))
    if consumer == "add":
        y = b.emit("add", y, y)
    elif consumer == "slice":
        out = y.type.shape
        y = b.emit("slice", y, start=tuple(n - 1 for n in out), stop=tuple(-1 for _ in out),
                   step=tuple(-2 for _ in out))
    return b.finish([y])


def _inputs(fn, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    arrays = []
    for p in fn.params:
        t = p.type
        arrays.append(rng.integers(-3, 4, t.shape).astype(t.dtype.numpy) if t.dtype is not DType.BOOL
                      else rng.integers(0, 2, t.shape).astype(np.bool_))
    if arrays[1].dtype.kind == "f":
        arrays[1] = np.asarray(-7.5, arrays[1].dtype)  # the pad value, unlike any element
    return arrays


def _check(fn, threads: int = 1, cpu: str = "host", schedule=True) -> None:
    args = _inputs(fn)
    run = compile_function(fn, threads=threads, cache=False, schedule=schedule, cpu=cpu, matmul="schedule")
    got = run(args)
    want = run_reference(fn, args)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_array_equal(g, w)


_CASES = [
    # shape, lo, hi, interior: odd, prime and 3-D shapes; zero widths on some axes or ends
    ((5, 7), (1, 2), (0, 3), (0, 0)),
    ((37, 101), (2, 0), (1, 5), (0, 0)),
    ((3, 4, 5), (0, 1, 2), (1, 0, 2), (1, 0, 1)),
    ((6, 5, 128), (1, 1, 1), (1, 1, 1), (0, 0, 0)),
    ((64, 64), (1, 1), (1, 1), (1, 0)),
    ((31, 17), (0, 0), (0, 0), (0, 2)),
    ((13,), (4,), (0,), (0,)),
    ((9, 11), (0, 0), (0, 0), (0, 0)),
]


@pytest.mark.parametrize("case", _CASES, ids=lambda c: "x".join(map(str, c[0])) + f"_lo{c[1]}_hi{c[2]}_in{c[3]}")
@pytest.mark.parametrize("operand", ["input", "computed"])
@pytest.mark.parametrize("dtype", ["f32", "i64"])
def test_pads_match_reference(case, operand, dtype):
    shape, lo, hi, interior = case
    _check(_pad_program(_DTYPES[dtype], shape, lo, hi, interior, operand), schedule="all")


@pytest.fixture(params=[1, 2])
def threads(request) -> int:
    return request.param


@pytest.fixture(params=["host", "x86-64-v3"])
def cpu(request) -> str:
    """The host's vector unit, and AVX2's where the host runs it."""
    if request.param != "host" and not runs_isa(request.param):
        pytest.skip(f"this host does not run {request.param}")
    return request.param


@pytest.mark.parametrize("consumer", ["none", "add", "slice"])
def test_pads_of_a_matmul_with_fused_consumers(threads, cpu, consumer):
    fn = _pad_program(DType.F32, (48, 40), (2, 3), (1, 0), (0, 1), "matmul", consumer)
    _check(fn, threads=threads, cpu=cpu)


def test_large_pad_is_scheduled_and_copies_rows():
    # the copy into the window is a `linalg.copy` the schedule tiles (not a gathering generic)
    fn = _pad_program(DType.F32, (300, 257), (3, 1), (2, 0), (0, 0))
    args = _inputs(fn)
    run = compile_function(fn, threads=1, cache=False)
    got = run(args)
    assert next(iter(run._kernels.values())).scheduled
    np.testing.assert_array_equal(got[0], run_reference(fn, args)[0])


@pytest.mark.parametrize("dtype", ["bool", "i32", "f64"])
def test_pads_of_every_dtype(dtype):
    _check(_pad_program(_DTYPES[dtype], (19, 23), (1, 0), (2, 1), (0, 1)), schedule="all")


@given(st.data())
@example(data=None)
def test_random_pads_match_reference(data):
    if data is None:  # interior padding on every axis of a 3-D operand, widths 0 and 1 mixed
        shape, lo, hi, interior, operand, consumer = (2, 3, 4), (0, 1, 0), (1, 0, 0), (1, 1, 1), "computed", "add"
    else:
        rank = data.draw(st.integers(1, 3))
        shape = tuple(data.draw(st.lists(st.integers(1, 9), min_size=rank, max_size=rank)))
        lo, hi, interior = (tuple(data.draw(st.lists(st.integers(0, m), min_size=rank, max_size=rank)))
                            for m in (3, 3, 2))
        operand = data.draw(st.sampled_from(["input", "computed", "matmul"] if rank >= 2 else ["input", "computed"]))
        consumer = data.draw(st.sampled_from(["none", "add", "slice"]))
    assert math.prod(_padded(shape, lo, hi, interior)) > 0
    _check(_pad_program(DType.F32, shape, lo, hi, interior, operand, consumer), schedule="all")


def _gather_program(dtype: DType, xshape, ishape, axis: int, around: str = "none"):
    """``gather`` of an input, then maybe a fused consumer (``add``) or a reversing, strided slice
    before it (a view that the gather's reads go through)."""
    b = FunctionBuilder("main")
    x = b.param("x", TensorType(dtype, xshape))
    i = b.param("i", TensorType(DType.I32, ishape))
    if around == "slice":
        x = b.emit("slice", x, start=tuple(n - 1 for n in xshape), stop=tuple(-1 for _ in xshape),
                   step=tuple(-1 if k != len(xshape) - 1 else -2 for k in range(len(xshape))))
        x = b.emit("add", x, x)
    y = b.emit("gather", x, i, axis=axis)
    if around == "add":
        y = b.emit("add", y, y)
    return b.finish([y])


def _gather_inputs(fn, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    x, i = fn.params
    g = next(op for op in fn.ops if op.op == "gather")
    n = g.operands[0].type.shape[g.attrs["axis"]]
    return [rng.integers(-50, 50, x.type.shape).astype(x.type.dtype.numpy),
            rng.integers(-3, n + 3, i.type.shape).astype(np.int32)]  # out of range both ways: clamped


def _check_gather(fn, threads: int = 1, cpu: str = "host", schedule="all") -> bool:
    args = _gather_inputs(fn)
    run = compile_function(fn, threads=threads, cache=False, schedule=schedule, cpu=cpu)
    got = run(args)
    np.testing.assert_array_equal(got[0], run_reference(fn, args)[0])
    return bool(next(iter(run._kernels.values())).scheduled)


_GATHERS = [((1000, 64), (512,), 0), ((50, 37), (9,), 0), ((7, 5, 48), (3, 2), 1), ((30, 20), (11,), 1),
            ((13, 96), (4, 5), 0), ((6, 4, 3), (2,), 0), ((101,), (7,), 0)]


@pytest.mark.parametrize("case", _GATHERS, ids=lambda c: f"{c[0]}_take{c[1]}_axis{c[2]}")
@pytest.mark.parametrize("around", ["none", "add", "slice"])
def test_gathers_match_reference(case, around):
    xshape, ishape, axis = case
    _check_gather(_gather_program(DType.F32, xshape, ishape, axis, around))


@pytest.mark.parametrize("dtype", ["f64", "i64", "i32"])
def test_row_gathers_are_scheduled(threads, cpu, dtype):
    assert _check_gather(_gather_program(_DTYPES[dtype], (200, 48), (256,), 0), threads, cpu, schedule=True)


_PRIME_ROWS = [((300, 67), (40,), 0), ((50, 134), (9,), 0), ((20, 131), (5, 3), 0), ((4, 9, 97), (6,), 1)]


@pytest.mark.parametrize("case", _PRIME_ROWS, ids=lambda c: f"{c[0]}_take{c[1]}_axis{c[2]}")
@pytest.mark.parametrize("around", ["none", "add"])
def test_gathers_of_rows_no_vector_divides_are_vectorized(case, around, threads, cpu):
    """Rows longer than 4 vectors with no divisor of a vector or more (67, 2 x 67, 131, 97 f32) are
    read in whole-vector tiles and one last partial tile, both as contiguous vectors (they were
    scalar loops: a 2000-row gather of 67 f32 took 5x NumPy's time), with the reference's values,
    indices out of range clamped."""
    from mind.compiler.backend.cpu.engine import mlir_to_llvm_ir
    from mind.compiler.backend.cpu.options import CpuOptions
    from mind.compiler.backend.cpu.vector_unit import vector_unit
    from mind.compiler.backend.linalg.emit import emit_mlir

    xshape, ishape, axis = case
    fn = _gather_program(DType.F32, xshape, ishape, axis, around)
    assert _check_gather(fn, threads, cpu)
    text, name = emit_mlir(fn, {})
    llvm_ir = mlir_to_llvm_ir(text, name, CpuOptions.resolve(threads=threads, cpu=cpu, schedule="all")).llvm_ir
    lanes = vector_unit(cpu).lanes(32)
    tile = lanes * min(4, xshape[-1] // lanes)
    tail = xshape[-1] % tile  # one element is a scalar load
    assert f"load <{tile} x float>" in llvm_ir and (tail == 1 or f"load <{tail} x float>" in llvm_ir)


@given(st.data())
@example(data=None)
def test_random_gathers_match_reference(data):
    if data is None:  # a strided, reversed view gathered by rows of a 3-D operand
        xshape, ishape, axis, around = (5, 3, 16), (2, 2), 0, "slice"
    else:
        rank = data.draw(st.integers(1, 3))
        xshape = tuple(data.draw(st.lists(st.integers(1, 17), min_size=rank - 1, max_size=rank - 1)))
        # a last extent that no vector divides, longer than 4 vectors, now and then (_peeled_row_reads)
        xshape += (data.draw(st.one_of(st.integers(1, 17), st.sampled_from([67, 131]))),)
        ishape = tuple(data.draw(st.lists(st.integers(1, 4), min_size=1, max_size=2)))
        axis = data.draw(st.integers(0, rank - 1))
        around = data.draw(st.sampled_from(["none", "add", "slice"]))
    _check_gather(_gather_program(DType.F32, xshape, ishape, axis, around))


def _element_gather_program(dtype: DType, table: str, tshape, ishape, axis: int):
    """A gather of elements: the index (computed from ``k``: ``k * 3 + 1``, which fusion takes into
    the gather) varies along the last loop.  ``table``: "param" (an argument), "const" (a constant
    of the program) or "computed" (``x + x``: not dense by construction)."""
    b = FunctionBuilder("main")
    if table == "const":
        values = np.arange(math.prod(tshape)).reshape(tshape) * 7 % 23 - 11
        x = b.const(values.astype(dtype.numpy) if dtype is not DType.BOOL else values > 0, dtype)
    else:
        x = b.param("x", TensorType(dtype, tshape))
        if table == "computed":
            x = b.emit("add", x, x) if dtype is not DType.BOOL else b.emit("select", x, x, x)
    k = b.param("k", TensorType(DType.I32, ishape))
    idx = b.emit("add", b.emit("mul", k, b.const(3, DType.I32)), b.const(1, DType.I32))
    return b.finish([b.emit("gather", x, idx, axis=axis)])


_ELEMENT_GATHERS = [  # table shape, index shape, axis: 2-D and 1-D indices, rows in pieces of vectors,
    ((97,), (40, 67), 0), ((97,), (64, 64), 0), ((301,), (1003,), 0),  # tables of rows (axis 1)
    ((12, 50), (33,), 1), ((6, 4, 29), (5, 16), 2)]


@pytest.mark.parametrize("case", _ELEMENT_GATHERS, ids=lambda c: f"{c[0]}_take{c[1]}_axis{c[2]}")
@pytest.mark.parametrize("dtype", ["f32", "f64", "i32", "bool"])
@pytest.mark.parametrize("table", ["param", "const"])
def test_gathers_of_elements_from_dense_tensors_are_vectorized(case, dtype, table, threads, cpu):
    """A gather whose index varies along the last loop, from a constant or an argument (dense by
    construction, ``payload.dense_by_construction``), is planned as any elementwise op and its reads
    become hardware gathers (``transforms._gathers_from_dense``); they were scalar loops (``sin`` of
    2000x2000 f32: 193 ms).  Indices out of range are clamped as in the reference; tables of rows
    (axis > 0) read ``x`` at linearized indices of a dense buffer."""
    from mind.compiler.backend.cpu.engine import mlir_to_llvm_ir
    from mind.compiler.backend.cpu.options import CpuOptions
    from mind.compiler.backend.linalg.emit import emit_mlir

    tshape, ishape, axis = case
    fn = _element_gather_program(_DTYPES[dtype], table, tshape, ishape, axis)
    rng = np.random.default_rng(1)
    args = [] if table == "const" else [rng.integers(-9, 9, tshape).astype(_DTYPES[dtype].numpy)]
    args.append(rng.integers(-3, tshape[axis] // 3 + 3, ishape).astype(np.int32))  # clamped both ways
    run = compile_function(fn, threads=threads, cache=False, schedule="all", cpu=cpu)
    np.testing.assert_array_equal(run(args)[0], run_reference(fn, args)[0])
    lowered = mlir_to_llvm_ir(*emit_mlir(fn, {}), CpuOptions.resolve(threads=threads, cpu=cpu, schedule="all"))
    assert lowered.scheduled and lowered.scalar_work == 0
    assert "@llvm.masked.gather" in lowered.llvm_ir
    if axis == 0:  # the index's producer fused into the gather (a broadcast index is hoisted)
        assert "__mind_alloc" not in lowered.llvm_ir


@pytest.mark.parametrize("case", _ELEMENT_GATHERS[:3:2], ids=lambda c: f"{c[0]}_take{c[1]}_axis{c[2]}")
def test_gathers_of_elements_from_computed_tensors_stay_loops(case):
    """The near miss: a computed table may bufferize to a strided view (a result placed in a slice),
    where a hardware gather's linearized indices would be wrong; it keeps its scalar loops."""
    from mind.compiler.backend.cpu.engine import mlir_to_llvm_ir
    from mind.compiler.backend.cpu.options import CpuOptions
    from mind.compiler.backend.linalg.emit import emit_mlir

    tshape, ishape, axis = case
    fn = _element_gather_program(DType.F32, "computed", tshape, ishape, axis)
    rng = np.random.default_rng(2)
    args = [rng.standard_normal(tshape).astype(np.float32), rng.integers(-3, tshape[axis] // 3 + 3, ishape).astype(np.int32)]
    run = compile_function(fn, threads=2, cache=False, schedule="all")
    np.testing.assert_array_equal(run(args)[0], run_reference(fn, args)[0])
    lowered = mlir_to_llvm_ir(*emit_mlir(fn, {}), CpuOptions.resolve(threads=2, schedule="all"))
    assert lowered.scalar_work > 0 and "@llvm.masked.gather" not in lowered.llvm_ir


def test_sin_is_one_vectorized_loop(threads, cpu):
    """``sin`` (and ``cos``, ``tan``) reduce their argument with table lookups (``reduce_pio2``): the
    lookups are hardware gathers of the constant tables and the whole function one fused loop, no
    index written out (2000x2000 f32 on two threads: 193 -> 23.6 ms), with the reference's values."""
    from mind.compiler.backend.cpu.engine import mlir_to_llvm_ir
    from mind.compiler.backend.cpu.options import CpuOptions
    from mind.compiler.backend.linalg.emit import emit_mlir
    from mind.compiler.frontend.api import compile_source

    fn = compile_source("fn f(x: Tensor<f32, [37, 67]>) -> Tensor<f32, [37, 67]> { sin(x) }").functions[0]
    rng = np.random.default_rng(3)
    x = (rng.standard_normal((37, 67)) * 10.0 ** rng.integers(-3, 38, (37, 67))).astype(np.float32)
    x.flat[:5] = [np.nan, np.inf, -np.inf, 0.0, -0.0]
    run = compile_function(fn, threads=threads, cache=False, schedule="all", cpu=cpu)
    np.testing.assert_array_equal(run([x])[0], run_reference(fn, [x])[0])
    lowered = mlir_to_llvm_ir(*emit_mlir(fn, {}), CpuOptions.resolve(threads=threads, cpu=cpu, schedule="all"))
    assert lowered.scheduled and lowered.scalar_work == 0 and "__mind_alloc" not in lowered.llvm_ir


def test_contiguous_run_of_a_pad_copy():
    """The run ``_plan_copy`` weighs (for a conv's padding) is what the window keeps contiguous in the
    result, not the last extent: an unpadded last axis joins the axis before it."""
    from mlir import ir

    from mind.compiler.backend.cpu.transforms import _contiguous_run
    from mind.compiler.backend.linalg.context import new_context

    def run(shape, lo, hi, interior):
        from mind.compiler.backend.cpu.api import emit_cpu_mlir
        text, _ = emit_cpu_mlir(_pad_program(DType.F32, shape, lo, hi, interior), {}, None)
        with new_context(), ir.Location.unknown():
            module = ir.Module.parse(text)
            copies: list = []
            module.operation.walk(lambda op: (copies.append(op) if op.name == "linalg.copy" else None,
                                              ir.WalkResult.ADVANCE)[1])
            return _contiguous_run(copies[0], shape)
    assert run((4, 11, 13, 3), (0, 1, 2, 0), (0, 2, 1, 0), (0, 0, 0, 0)) == 39
    assert run((4, 11, 13, 3), (0, 1, 2, 0), (0, 2, 1, 1), (0, 0, 0, 0)) == 3
    assert run((6, 9, 7), (0, 0, 0), (0, 0, 0), (0, 0, 1)) == 1
    assert run((6, 9, 7), (1, 0, 0), (0, 0, 0), (0, 0, 0)) == 63 * 6


@pytest.mark.parametrize("interior", [(0, 0), (0, 1)])
@pytest.mark.parametrize("value", ["const", "param"])
def test_pad_copies_in_place_into_the_result(value, interior, monkeypatch):
    # The copy's init was an extract_slice of the fill, so the fill had two users; with a constant pad
    # value `untie_shared_inits` split it into two fills, and the copy went into a temporary buffer
    # copied again into the result (2000x2000 by 3: 3.9 ms instead of 1.8).  Then the first border box
    # was filled in a buffer of the result's size and copied out (``result_roots``), and the window's
    # row blocks were ``memref.copy``s.  Now every box and the window are written in the result
    # itself, by loops: no buffer, no copy.
    from mind.compiler.backend.cpu import lowering
    from mind.compiler.backend.cpu.api import emit_cpu_mlir
    from mind.compiler.backend.cpu.lowering import lower_to_llvm_dialect
    from mind.compiler.backend.cpu.options import CpuOptions

    bufferized: list[str] = []
    insert = lowering.insert_library_calls
    monkeypatch.setattr(lowering, "insert_library_calls", lambda m, *a: (bufferized.append(str(m)), insert(m, *a))[1])
    b = FunctionBuilder("main")
    x = b.param("x", TensorType(DType.F32, (64, 96)))
    v = b.const(np.float32(0.0), DType.F32) if value == "const" else b.param("v", TensorType(DType.F32, ()))
    fn = b.finish([b.emit("pad", x, v, lo=(3, 1), hi=(3, 2), interior=interior)])
    module, _, scheduled = lower_to_llvm_dialect(*emit_cpu_mlir(fn, {}, None), CpuOptions.resolve(threads=1, schedule="all"))
    assert scheduled
    moves = [ln for ln in bufferized[0].splitlines() if "memref.copy" in ln or "memref.alloc" in ln]
    assert not moves, moves


def test_a_pads_rows_are_one_band_and_a_convs_padding_keeps_its_copy():
    """A pad whose last padded axis is not the first writes the rows of its window along the axes
    before it in one ``scf.forall`` (``Emitter._band``): each block fills its border along that axis
    and copies its rows between, so one thread writes each row (28x35x87 by (1, 2), (3, 0) on two
    threads: 21 -> 9.7 us).  A conv's padding keeps its boxes and a copy marked ``CONV_OPERAND``."""
    from mind.compiler.backend.cpu.api import emit_cpu_mlir
    from mind.compiler.backend.linalg.emitter import CONV_OPERAND
    text, _ = emit_cpu_mlir(_pad_program(DType.F32, (28, 35, 87), (0, 1, 3), (0, 2, 0), (0, 0, 0)), {}, None)
    band = text[text.index("scf.forall"):text.index("scf.forall.in_parallel")]
    assert text.count("scf.forall (") == 1 and CONV_OPERAND not in text
    assert band.count("linalg.fill") == 1 and band.count("linalg.copy") == 1  # the 3 in front; no hi
    assert text.count("linalg.fill") == 3  # the two boxes along axis 1, and the band's
    b = FunctionBuilder("main")
    x = b.param("x", TensorType(DType.F32, (2, 9, 9, 8)))
    w = b.param("w", TensorType(DType.F32, (3, 3, 8, 16)))
    fn = b.finish([b.emit("conv2d", x, w, strides=(1, 1), padding=((1, 1), (1, 1)), lhs_dilation=(1, 1),
                          rhs_dilation=(1, 1))])
    text, _ = emit_cpu_mlir(fn, {}, None)
    assert "scf.forall" not in text and f"linalg.copy {{{CONV_OPERAND}}}" in text
    rng = np.random.default_rng(0)
    args = [rng.integers(-3, 4, p.type.shape).astype(np.float32) for p in fn.params]  # sums exact in f32
    got = compile_function(fn, threads=2, cache=False, schedule="all")(args)
    np.testing.assert_array_equal(got[0], run_reference(fn, args)[0])


@pytest.mark.parametrize("cpu", ["host", "x86-64-v3"])
def test_a_window_of_a_computed_tensor_as_a_result_is_copied_on_the_kernels_threads(cpu):
    """A result that is a window of a tensor the kernel computes (a conv computed 48 channels deep
    for its 40, ``lowerings.block_channels``; a slice of an op's result) is copied by a
    ``linalg.copy`` marked ``WINDOW_COPY`` that the target plans in blocks of rows on the kernel's
    threads (each block one ``memrefCopy``), not by the runtime's one serial ``memrefCopy`` of all
    its rows; a window of a parameter is still that one strided copy.  Bit for bit against the
    reference, 1 and 2 threads."""
    if cpu != "host" and not runs_isa(cpu):
        pytest.skip(f"this host does not run {cpu}")
    b = FunctionBuilder("main")
    x = b.param("x", TensorType(DType.F32, (3, 20, 20, 3)))
    w = b.param("w", TensorType(DType.F32, (3, 3, 3, 40)))
    conv = b.finish([b.emit("conv2d", x, w, strides=(2, 2), padding=((1, 1), (1, 1)), lhs_dilation=(1, 1),
                            rhs_dilation=(1, 1))])
    b = FunctionBuilder("main")
    y = b.param("y", TensorType(DType.F32, (300, 200)))
    window = dict(start=(5, 3), stop=(290, 197), step=(2, 1))
    computed = b.finish([b.emit("slice", b.emit("add", y, y), **window)])
    b = FunctionBuilder("main")
    of_parameter = b.finish([b.emit("slice", b.param("y", TensorType(DType.F32, (300, 200))), **window)])
    b = FunctionBuilder("main")  # a window of a view of a parameter is not computed either
    reshaped = b.emit("reshape", b.param("y", TensorType(DType.F32, (200, 300))), shape=(300, 200))
    of_reshaped_parameter = b.finish([b.emit("slice", reshaped, **window)])
    rng = np.random.default_rng(0)
    from mind.compiler.backend.cpu.api import emit_cpu_mlir
    from mind.compiler.backend.linalg.emitter import WINDOW_COPY
    for fn, copied in ((conv, True), (computed, True), (of_parameter, False), (of_reshaped_parameter, False)):
        text, _ = emit_cpu_mlir(fn, {}, None)
        windows = re.findall(r"(%\w+) = tensor\.extract_slice", text)
        assert any(f"linalg.copy {{{WINDOW_COPY}}} ins({v} :" in text for v in windows) == copied
        # the rows are moved inside a parallel region's function, or by the kernel's own
        functions = _llvm_ir(fn, cpu, threads=2).split("\ndefine ")
        movers = [f.split("(")[0] for f in functions if "call void @memrefCopy(" in f]
        assert movers and all(("omp_par" in name) == copied for name in movers), movers
        args = [rng.integers(-3, 4, p.type.shape).astype(np.float32) for p in fn.params]  # sums exact in f32
        want = run_reference(fn, args)[0]
        for threads in (1, 2):
            np.testing.assert_array_equal(compile_function(fn, threads=threads, cpu=cpu, cache=False)(args)[0], want)


def _scripts_of(fn, threads: int) -> str:
    """The transform script the CPU lowering applies to ``fn`` (schedule "all")."""
    from mind.compiler.backend.cpu import lowering
    from mind.compiler.backend.cpu.api import emit_cpu_mlir
    from mind.compiler.backend.cpu.options import CpuOptions
    scripts: list[str] = []
    real = lowering.apply_script
    try:
        lowering.apply_script = lambda m, script: (scripts.append(script), real(m, script))[1]
        lowering.lower_to_llvm_dialect(*emit_cpu_mlir(fn, {}, None),
                                       CpuOptions.resolve(threads=threads, schedule="all"))
    finally:
        lowering.apply_script = real
    return "".join(scripts)


@pytest.mark.parametrize("threads,shape,parallel", [
    (2, (256, 1, 500), True),    # 1.5 MB of border rows: worth a parallel region each
    (1, (256, 1, 500), False),   # a one-thread kernel never starts one
    (2, (6, 1, 50), False),      # a few KB: the region would cost more than it saves
])
def test_big_pad_borders_are_filled_on_the_kernels_threads(threads, shape, parallel):
    """A pad's border boxes are most of what it writes ([256, 1, 500] -> [256, 4, 503]: three
    quarters); filled on one thread, only the window's copy used the second (57 -> 33 us)."""
    fn = _pad_program(DType.F32, shape, (0, 1, 3), (0, 2, 0), (0, 0, 0))
    fills = [ln for ln in _scripts_of(fn, threads).splitlines() if "%ft" in ln and "tile_using" in ln]
    rows = [ln for ln in fills if f", {shape[-1] + 3}]" in ln]
    assert len(fills) == 3 and len(rows) == 2, fills  # the boxes along axis 1; axis 2's is 3 wide
    assert all(("tile_using_forall" in ln) == parallel for ln in rows), rows
    assert not any("tile_using_forall" in ln for ln in fills if ln not in rows)
    _check(fn, threads=threads, cpu="host", schedule="all")


@pytest.mark.parametrize("cpu", ["host", "x86-64-v3"])
@pytest.mark.parametrize("dtype", [DType.F32, DType.F64, DType.I32, DType.BOOL])
@pytest.mark.parametrize("shape,start,stop,step", [
    ((16, 64, 40), (0, 1, 0), (16, 64, 40), (1, 3, 1)),    # a step on a middle axis: a view
    ((12, 40, 33), (1, 0, 0), (12, 40, 33), (2, 2, 1)),    # steps on two axes
    ((16, 64, 40), (0, 0, 5), (16, 64, 37), (1, 1, 2)),    # a step along the rows: the strided generic
    ((16, 64, 40), (0, 63, 0), (16, -1, 40), (1, -1, 1)),  # reversed: the generic
])
def test_strided_slices_and_their_readers(cpu, dtype, shape, start, stop, step):
    """A slice whose rows stay contiguous is a strided view (``lowerings.slice``): as a result, one
    strided copy; read by an elementwise op, a plain operand of a scheduled, vectorized generic (the
    strided map left the fused op scalar).  Bit for bit against the reference, 1 and 2 threads."""
    if cpu != "host" and not runs_isa(cpu):
        pytest.skip(f"this host does not run {cpu}")
    out = tuple(len(range(a, b, s)) for a, b, s in zip(start, stop, step))
    rng = np.random.default_rng(len(shape))
    x = rng.standard_normal(shape) > 0 if dtype is DType.BOOL else (rng.standard_normal(shape) * 50).astype(dtype.numpy)
    for reader in (None, "add"):
        b = FunctionBuilder("main")
        p = b.param("x", TensorType(dtype, shape))
        s = b.emit("slice", p, start=start, stop=stop, step=step)
        fn = b.finish([b.emit("add", s, s) if reader and dtype is not DType.BOOL else s])
        want = run_reference(fn, [x])[0]
        for threads in (1, 2):
            run = compile_function(fn, threads=threads, cpu=cpu, schedule="all", cache=False)
            np.testing.assert_array_equal(run([x])[0], want)
            if reader and dtype is not DType.BOOL and step[-1] == 1 and min(step) > 0:
                assert next(iter(run._kernels.values())).scheduled
    assert want.shape == out


def _slice_program(dtype: DType, shape, step: int, reader: str = "none"):
    """A slice with ``step`` along the last axis (a reversal when negative), maybe read by an add."""
    n = shape[-1]
    start = tuple([0] * (len(shape) - 1) + [0 if step > 0 else n - 1])
    stop = tuple(list(shape[:-1]) + [n if step > 0 else -1])
    b = FunctionBuilder("main")
    s = b.emit("slice", b.param("x", TensorType(dtype, shape)), start=start, stop=stop,
               step=tuple([1] * (len(shape) - 1) + [step]))
    return b.finish([b.emit("add", s, s) if reader == "add" else s])


def _llvm_ir(fn, cpu: str = "host", threads: int = 1) -> str:
    from mind.compiler.backend.cpu.api import emit_stage
    return emit_stage(fn, "llvm", threads=threads, cpu=cpu, schedule="all")


@pytest.mark.parametrize("dtype", ["f32", "f64", "i32", "i64", "bool"])
@pytest.mark.parametrize("step", [2, 3, 4, -1, -3])
@pytest.mark.parametrize("shape", [(5, 97), (3, 7, 77), (2, 1001), (40, 16)])
def test_last_axis_steps_are_vectorized_loops(cpu, dtype, step, shape):
    """A step or a reversal along the contiguous axis is a loop of loads and stores that
    ``movement_loops`` marks for LLVM's loop vectorizer (interleaved or reversed wide loads, a
    remainder loop on extents no vector divides): bit for bit against the reference, 1 and 2
    threads, both vector units."""
    fn = _slice_program(_DTYPES[dtype], shape, step)
    if len(range(0, shape[-1], abs(step))) >= 64:  # a whole vector of any element on any vector unit
        assert "llvm.loop.vectorize.enable" in _llvm_ir(fn, cpu)
    _check_slice(fn, cpu)


@pytest.mark.parametrize("cpu", ["host", "x86-64-v3"])
@pytest.mark.parametrize("dtype,shape,step", [("f32", (4692, 144), 2), ("f64", (600, 8, 500), 4),
                                              ("i32", (997, 301), 3), ("bool", (1000, 1000), 2)])
def test_large_last_axis_steps_run_on_the_kernels_threads(cpu, dtype, shape, step):
    """A step along the rows of a large operand: blocks of whole rows on the kernel's threads
    (``transforms._plan_strided``), each block's loops still marked for LLVM's loop vectorizer; on
    one thread, loops as before.  Bit for bit against the reference, 1 and 2 threads."""
    fn = _slice_program(_DTYPES[dtype], shape, step)
    assert "tile_using_forall" in _scripts_of(fn, 2)
    assert "tile_using_forall" not in _scripts_of(fn, 1)
    assert "llvm.loop.vectorize.enable" in _llvm_ir(fn, cpu, threads=2)
    _check_slice(fn, cpu)


def test_steps_that_keep_their_loops():
    """A step on rows only (whole rows: one ``memmove`` each, faster than the loops on two
    threads), a reversal (MLIR's tiling rejects its negative coefficient), and a small slice (the
    parallel region would cost more than it saves) are not tiled."""
    b = FunctionBuilder("main")
    rows = b.emit("slice", b.param("x", TensorType(DType.F32, (3000, 1000))), start=(0, 0), stop=(3000, 1000),
                  step=(2, 1))
    assert "tile_using_forall" not in _scripts_of(b.finish([rows]), 2)
    assert "tile_using_forall" not in _scripts_of(_slice_program(DType.F32, (4692, 144), -1), 2)
    assert "tile_using_forall" not in _scripts_of(_slice_program(DType.F32, (20, 144), 2), 2)


def test_short_movement_loops_are_not_marked(capfd):
    """A forced loop that LLVM reshapes and then cannot vectorize makes it print "remark: loop not
    vectorized" on stderr (a 2-element fill beside a reduction did): loops shorter than a vector are
    not marked (nothing to gain there either)."""
    b = FunctionBuilder("main")
    x = b.param("x", TensorType(DType.F32, (1, 2, 1)))
    s = b.emit("reduce_sum", x, axes=(2,), keepdims=False)
    fn = b.finish([b.emit("add", x, x), s, b.emit("exp", s)])
    assert "llvm.loop.vectorize.enable" not in _llvm_ir(fn)
    x0 = np.arange(2, dtype=np.float32).reshape(1, 2, 1)
    for schedule in (True, False):
        compile_function(fn, threads=1, cache=False, schedule=schedule)([x0])
    assert "remark" not in capfd.readouterr().err


@pytest.mark.parametrize("dtype", ["f32", "f64", "i32", "bool"])
@pytest.mark.parametrize("shape,lo,hi", [((300, 17, 6), (0, 1, 3), (0, 2, 0)), ((58, 26, 7), (0, 1, 3), (0, 2, 0)),
                                         ((40, 9, 5), (2, 0, 1), (1, 3, 2)), ((30, 11, 4), (0, 1, 3), (0, 2, 0)),
                                         ((224, 30, 3), (0, 1, 3), (0, 2, 0))])
def test_short_copy_runs_are_masked_vector_moves(capfd, cpu, dtype, shape, lo, hi):
    """A pad whose contiguous runs are ``fewest_predicated_trips`` (3 on AVX-512, 4 on AVX2) to a
    vector of elements copies each run in a loop marked for predicated vectorization (one masked
    vector move per run, where it was a scalar loop): the reference's values (NaN padding shows a
    misplaced or missed element), 1 and 2 threads, and nothing from LLVM on stderr (a forced loop it
    cannot vectorize warns)."""
    fn = _pad_program(_DTYPES[dtype], shape, lo, hi, (0, 0, 0))
    ir = _llvm_ir(fn, cpu)
    lanes = vector_unit(cpu).lanes(_DTYPES[dtype].bits)
    predicated = fewest_predicated_trips(vector_unit(cpu)) <= shape[-1] < lanes
    assert ("llvm.loop.vectorize.predicate.enable" in ir) == predicated
    assert "llvm.loop.vectorize.enable" in ir or not predicated
    args = _inputs(fn)
    want = run_reference(fn, args)
    for threads in (1, 2):
        got = compile_function(fn, threads=threads, cpu=cpu, cache=False)(args)
        np.testing.assert_array_equal(got[0], want[0])
    err = capfd.readouterr().err
    assert "remark" not in err and "not vectorized" not in err


@pytest.mark.parametrize("dtype", [DType.F32, DType.I32, DType.BOOL])
def test_copies_from_an_argument_to_a_result_know_they_do_not_overlap(capfd, cpu, dtype):
    """A result never shares memory with an argument (the calling convention), and the kernel's data
    pointers say so (``noalias``).  Without that, the rows of a slice reversed along a middle axis
    stayed scalar loops that LLVM, told to vectorize them, could not: "loop not vectorized" on
    stderr at every compile.  The reference's values, 1 and 2 threads, nothing on stderr."""
    b = FunctionBuilder("main")
    x = b.param("x", TensorType(dtype, (16, 64, 40)))
    fn = b.finish([b.emit("slice", x, start=(0, 63, 0), stop=(16, -1, 40), step=(1, -1, 1))])
    entry = next(ln for ln in _llvm_ir(fn, cpu).splitlines() if ln.startswith("define void @mind_main("))
    assert entry.count("ptr noalias") == 2, entry  # the argument's and the result's data pointers
    args = [np.random.default_rng(1).integers(-50, 50, (16, 64, 40)).astype(dtype.numpy)]
    want = run_reference(fn, args)
    for threads in (1, 2):
        np.testing.assert_array_equal(compile_function(fn, threads=threads, cpu=cpu, cache=False)(args)[0], want[0])
    err = capfd.readouterr().err
    assert "remark" not in err and "not vectorized" not in err


def _check_slice(fn, cpu: str = "host") -> None:
    """Every element distinct (a misplaced one shows), 1 and 2 threads."""
    t = fn.params[0].type
    x = np.arange(math.prod(t.shape)).reshape(t.shape)
    x = (x % 3 == 0) if t.dtype is DType.BOOL else x.astype(t.dtype.numpy)
    want = run_reference(fn, [x])[0]
    for threads in (1, 2):
        got = compile_function(fn, threads=threads, cpu=cpu, schedule="all", cache=False)([x])[0]
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_array_equal(got, want)


def _reversal(dtype: DType, shape, axes, reader: str = "none"):
    """A slice of ``shape`` reversed along ``axes``, maybe read by ``exp(s + y)`` (fused into it)."""
    b = FunctionBuilder("main")
    x = b.param("x", TensorType(dtype, shape))
    s = b.emit("slice", x, start=tuple(n - 1 if i in axes else 0 for i, n in enumerate(shape)),
               stop=tuple(-1 if i in axes else n for i, n in enumerate(shape)),
               step=tuple(-1 if i in axes else 1 for i in range(len(shape))))
    if reader == "none":
        return b.finish([s])
    return b.finish([b.emit("exp", b.emit("add", s, b.param("y", TensorType(dtype, shape))))])


def _threaded(fn, cpu: str = "host") -> bool:
    """Whether the 2-thread kernel of ``fn`` forks a parallel region (and the 1-thread one does not)."""
    assert "__kmpc_fork_call" not in _llvm_ir(fn, cpu, threads=1)
    return "__kmpc_fork_call" in _llvm_ir(fn, cpu, threads=2)


@pytest.mark.parametrize("dtype", [DType.F32, DType.F64, DType.I32, DType.BOOL])
@pytest.mark.parametrize("shape,axes", [((64, 300, 100), (1,)), ((1000, 300), (0,)), ((300, 1000), (1,)),
                                        ((200, 30, 40), (0, 2)), ((64, 64, 64), (0, 1, 2)), ((7, 5, 3001), (2,))])
def test_large_reversals_run_on_the_kernels_threads(capfd, cpu, dtype, shape, axes):
    """MLIR's tiling cannot take a map that reads an axis backwards, so a reversal was one loop
    nest on one thread, whatever the kernel's count.  Bufferized, it is now that loop nest with
    its outer loops on the threads (``reversed_loops``): whole rows as ``memcpy`` where the last
    axis is not reversed, else a row loop that LLVM vectorizes.  Bit for bit against the reference,
    1 and 2 threads, nothing from LLVM on stderr."""
    fn = _reversal(dtype, shape, axes)
    assert _threaded(fn, cpu)
    assert ("@llvm.memcpy" in _llvm_ir(fn, cpu, threads=2)) == (len(shape) - 1 not in axes)
    _check_slice(fn, cpu)
    err = capfd.readouterr().err
    assert "remark" not in err and "not vectorized" not in err


def test_reversals_fused_into_a_reader_run_on_the_kernels_threads(capfd):
    """A reversal that elementwise fusion merged into its reader (``exp(reverse(x) + y)``) is one
    generic that reads backwards: its loop nest takes the generic's own body, on the threads.  A
    nest whose one parallel loop is the reversed axis stays on one thread: LLVM could not vectorize
    its rows (its alias check between the rows failed) and said so on stderr."""
    rng = np.random.default_rng(3)
    for shape, axes, threaded in [((20, 30, 400), (1,), True), ((20, 30, 400), (2,), True), ((300, 400), (1,), True),
                                  ((300, 400), (0,), False)]:
        fn = _reversal(DType.F32, shape, axes, reader="exp")
        assert _threaded(fn) == threaded, (shape, axes)
        args = [rng.standard_normal(shape).astype(np.float32) for _ in range(2)]
        want = run_reference(fn, args)[0]
        for threads in (1, 2):
            np.testing.assert_allclose(compile_function(fn, threads=threads, cache=False)(args)[0], want, rtol=2e-6)
    err = capfd.readouterr().err
    assert "remark" not in err and "not vectorized" not in err


def test_small_reversals_keep_one_thread():
    """A reversal of a few KB: the parallel region would cost more than the second thread saves."""
    assert not _threaded(_reversal(DType.F32, (16, 8, 10), (1,)))


def test_loops_that_compute_are_not_marked():
    """Only movement is handed to the loop vectorizer (its compile time over every scalar loop nest
    of a kernel doubled a CNN training step's): a strided slice read by an add fuses into one loop
    that computes, which keeps LLVM's scalar "loops" pipeline."""
    from mind.compiler.backend.cpu.movement_loops import MOVEMENT_BODY_OPS
    assert "arith.addf" not in MOVEMENT_BODY_OPS
    fn = _slice_program(DType.F32, (6, 40), 2, reader="add")
    assert "llvm.loop.vectorize.enable" not in _llvm_ir(fn)
    _check_slice(fn)


_SHORT_RUNS = [
    # shape, lo, hi, interior: runs (contiguous in both the operand and the window) shorter than 4
    # vectors, copied by vectorized loops; and one whose unpadded last axis joins the axis before
    ((125, 18, 27), (0, 1, 3), (0, 2, 0), (0, 0, 0)),
    ((4, 11, 13, 3), (0, 1, 2, 0), (0, 2, 1, 1), (0, 0, 0, 0)),
    ((4, 11, 13, 3), (0, 1, 2, 0), (0, 2, 1, 0), (0, 0, 0, 0)),
    ((6, 9, 33), (1, 0, 1), (0, 1, 2), (0, 0, 0)),
    ((6, 9, 7), (1, 0, 1), (0, 1, 2), (0, 1, 1)),
]


@pytest.mark.parametrize("case", _SHORT_RUNS, ids=lambda c: "x".join(map(str, c[0])) + f"_lo{c[1]}_hi{c[2]}_in{c[3]}")
@pytest.mark.parametrize("dtype", ["f32", "f64", "i32", "bool"])
def test_pads_of_short_rows_match_reference(threads, cpu, case, dtype):
    shape, lo, hi, interior = case
    for operand in ("input", "computed") if dtype != "bool" else ("input",):
        _check(_pad_program(_DTYPES[dtype], shape, lo, hi, interior, operand), threads=threads, cpu=cpu,
               schedule="all")




@pytest.mark.parametrize("dt", ["f32", "f64", "i32", "bool"])
@pytest.mark.parametrize("shape,step,start,computed", [((4040, 18), 2, 0, False), ((1000, 30), 3, 2, False),
                                                       ((8, 100, 24), 2, 1, True), ((500, 12), 4, 3, False),
                                                       ((7, 6), 2, 0, False), ((2083, 24), 2, 0, False),
                                                       ((3, 5, 10), 5, 4, True)])
def test_a_step_through_short_rows_merges_them(dt, shape, step, start, computed):
    # x[..., start::step] of rows of step * n elements with n under a vector: the rows are merged
    # (lowerings._merged_step_rows, at least MERGED_STEP_ROW results per merged row, two rows or
    # more: 2083 rows, a prime, are not), bit for bit against the reference, fused after an add too
    dtype = _DTYPES[dt]
    b = FunctionBuilder("main")
    x = b.param("x", TensorType(dtype, shape))
    v = b.emit("add", x, x) if computed and dtype is not DType.BOOL else x
    n = shape[-1] // step
    out = b.emit("slice", v, start=(0,) * (len(shape) - 1) + (start,), stop=tuple(shape),
                 step=(1,) * (len(shape) - 1) + (step,))
    fn = b.finish([out])
    rng = np.random.default_rng(3)
    arr = (rng.standard_normal(shape) * 9).astype(dtype.numpy)
    got = compile_function(fn, threads=2, cache=False)([arr])[0]
    want = run_reference(fn, [arr])[0]
    np.testing.assert_array_equal(got, want)
    assert got.shape == shape[:-1] + (n,)


def test_which_step_slices_merge_their_rows():
    from mind.compiler.backend.linalg.lowerings import _merged_step_rows
    from mind.compiler.backend.linalg.emitter import TensorValue

    def merged(shape, step, start=0):
        x = TensorValue("%x", tuple(shape), "f32", DType.F32)
        n = shape[-1] // step
        return _merged_step_rows(x, [0] * (len(shape) - 1) + [start], [1] * (len(shape) - 1) + [step],
                                 tuple(shape[:-1]) + (n,))
    assert merged((4040, 18), 2) == (4040 // 8, 72)  # the fewest rows (8) that make 64 results
    assert merged((8, 100, 24), 2) == (100, 96)  # 800 rows: 6 does not divide them, 8 does
    assert merged((2083, 24), 2) is None  # a prime count of rows: one merged row would idle a thread
    assert merged((4040, 40), 2) is None  # 20 results: a vector already
    assert merged((4040, 19), 2) is None  # an odd row: not a whole number of steps
    assert merged((23580, 24), 2) is None  # 2.26 MB, beyond SPLIT_ROWS_BYTES: streamed as it is
