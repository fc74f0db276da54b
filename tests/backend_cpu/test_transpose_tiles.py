"""Transposing copies get square one-vector tiles (``transforms._transpose_tiles``): exact against
NumPy on aligned, odd and batched shapes, every dtype, with and without a fused consumer."""

from __future__ import annotations

import numpy as np
import pytest

import mind

NP = {"f32": np.float32, "f64": np.float64, "i32": np.int32, "i64": np.int64}


def T(dt: str, *shape: int) -> str:
    return f"Tensor<{dt}, [{', '.join(map(str, shape))}]>"


@pytest.mark.parametrize("dt", list(NP))
@pytest.mark.parametrize("shape,perm", [((64, 48), (1, 0)), ((37, 129), (1, 0)), ((3, 32, 40), (0, 2, 1)),
                                        ((5, 16, 17), (2, 1, 0)), ((4, 6, 32, 16), (0, 1, 3, 2))])
def test_transpose_matches_numpy(dt, shape, perm):
    x = (np.random.default_rng(len(shape)).standard_normal(shape) * 100).astype(NP[dt])
    out = tuple(shape[p] for p in perm)
    src = (f"fn f(x: {T(dt, *shape)}) -> {T(dt, *out)} {{ transpose(x, permutation=[{', '.join(map(str, perm))}]) }}")
    for opts in ({"schedule": "all", "threads": 1}, {"schedule": "all", "threads": 2}):
        assert np.array_equal(mind.compile(src, **opts)(x), x.transpose(perm)), opts
    src2 = (f"fn f(x: {T(dt, *shape)}) -> {T(dt, *out)} {{ transpose(x, permutation=[{', '.join(map(str, perm))}]) + "
            f"transpose(x, permutation=[{', '.join(map(str, perm))}]) }}")
    assert np.array_equal(mind.compile(src2, schedule="all")(x), x.transpose(perm) + x.transpose(perm))


@pytest.mark.parametrize("cpu", ["host", "x86-64-v3"])
@pytest.mark.parametrize("dt", ["f32", "f64", "i32", "bool"])
@pytest.mark.parametrize("shape,perm", [((3, 40, 33), (2, 1, 0)), ((2, 48, 5, 32), (3, 1, 2, 0)),
                                        ((3, 64, 51), (0, 2, 1)), ((32, 80), (1, 0)),
                                        ((2, 35, 37), (0, 2, 1)), ((19, 100), (1, 0)),
                                        ((3, 14, 40), (0, 2, 1)), ((2, 5, 33), (0, 2, 1)), ((9, 20), (1, 0))])
def test_transposing_plane_is_tiled_and_exact(cpu, dt, shape, perm):
    """Tiles on the loop along the operand's contiguous axis and the result's innermost loop (the
    transposing plane), wherever they are: permutation [2, 1, 0] transposes the first and last
    axes.  Scheduled (never the scalar fallback), bit for bit, on 1 and 2 threads, both vector units
    (16 x 16 f32 tiles use the AVX-512 shuffle network, 8 x 8 the generic shuffles)."""
    from mind.compiler.backend.cpu.api import compile_function
    rng = np.random.default_rng(len(shape) + len(dt))
    x = rng.standard_normal(shape) > 0 if dt == "bool" else (rng.standard_normal(shape) * 100).astype(NP[dt])
    out = tuple(shape[p] for p in perm)
    src = f"fn f(x: {T(dt, *shape)}) -> {T(dt, *out)} {{ transpose(x, permutation=[{', '.join(map(str, perm))}]) }}"
    for threads in (1, 2):
        run = compile_function(mind._function_of(src, "f"), threads=threads, cpu=cpu, cache=False)
        np.testing.assert_array_equal(run([x])[0], x.transpose(perm))
        assert next(iter(run._kernels.values())).scheduled


def test_transpose_tiles_cover_the_transposing_plane():
    from mind.compiler.backend.cpu.transforms import _transpose_tiles
    from mind.compiler.backend.cpu.vector_unit import VECTOR_UNITS
    avx512, avx2 = VECTOR_UNITS["x86-64-v4"], VECTOR_UNITS["x86-64-v3"]
    # when both loops of the plane are longer than a vector and one has no vector-wide divisor, the
    # tile is a whole vector square with masked last tiles (513 -> 16, not 9; 572 x 180 -> 16 x 16,
    # not 13 x 15); with a loop shorter than a vector it keeps the divisors (a masked 16 x 3 tile of
    # [3, 4096, 513] permuted [2, 1, 0] ran 3.7 times slower than the 9 x 3 one)
    t = _transpose_tiles((513, 4096, 3), (0, 2), 32, avx512)
    assert (t.parallel, t.masked) == ((9, 1, 3), False)
    t = _transpose_tiles((3, 513, 4096), (1, 2), 32, avx512)
    assert (t.parallel, t.masked) == ((1, 16, 16), True)
    t = _transpose_tiles((35, 572, 180), (2, 1), 32, avx512)
    assert (t.parallel, t.masked) == ((1, 16, 16), True)
    t = _transpose_tiles((2048, 2048), (0, 1), 32, avx2)
    assert (t.parallel, t.masked) == ((8, 8), False)
    assert _transpose_tiles((2048, 2048), (0, 1), 64, avx512).parallel == (8, 8)
    assert _transpose_tiles((4, 6, 32, 16), (3, 2), 32, avx512).masked is False
    # result rows shorter than a vector but at least half one, the operand's rows a vector or more:
    # masked squares (a 14 x 16 tile was one flat 224-lane shuffle, long for LLVM to compile)
    t = _transpose_tiles((240, 1344, 14), (1, 2), 32, avx512)
    assert (t.parallel, t.masked) == ((1, 16, 16), True)
    t = _transpose_tiles((240, 1024, 8), (1, 2), 32, avx512)
    assert (t.parallel, t.masked) == ((1, 16, 16), True)
    assert _transpose_tiles((400, 1000, 5), (1, 2), 64, avx512).parallel == (1, 8, 8)
    assert _transpose_tiles((400, 1000, 3), (1, 2), 64, avx2).parallel == (1, 4, 4)
    # ... but not result rows under half a vector, nor short operand rows, nor both short
    t = _transpose_tiles((240, 1024, 7), (1, 2), 32, avx512)
    assert (t.parallel, t.masked) == ((1, 16, 7), False)
    t = _transpose_tiles((240, 14, 1344), (1, 2), 32, avx512)
    assert (t.parallel, t.masked) == ((1, 14, 16), False)
    assert _transpose_tiles((240, 12, 14), (1, 2), 32, avx512).masked is False


def _schedule_script(src: str, threads: int, cpu: str = "x86-64-v4") -> str:
    from mlir import ir
    from mlir.passmanager import PassManager

    from mind.compiler.backend.cpu.transforms import schedule
    from mind.compiler.backend.cpu.vector_unit import VECTOR_UNITS
    from mind.compiler.backend.linalg.emit import emit_mlir
    from mind.compiler.backend.linalg.pipeline import prefusion

    text, _name = emit_mlir(mind._function_of(src, "f"), {})
    with ir.Context(), ir.Location.unknown():
        m = ir.Module.parse(text)
        PassManager.parse(prefusion().render()).run(m.operation)
        return schedule(m, 0, None, VECTOR_UNITS[cpu], threads) or ""


def _transpose_src(dt: str, shape: tuple[int, ...], perm: tuple[int, ...]) -> str:
    out = tuple(shape[p] for p in perm)
    return f"fn f(x: {T(dt, *shape)}) -> {T(dt, *out)} {{ transpose(x, permutation=[{', '.join(map(str, perm))}]) }}"


def test_a_transpose_beyond_l2_walks_the_operands_rows():
    """A transposing copy whose part per thread is larger than L2 is interchanged so that the loop
    along the operand's contiguous axis is innermost (its loads follow sequential streams); one
    within L2, one on more threads (each thread's part within L2), one whose plane has a loop
    shorter than a vector, and one with a second operand keep the result's order."""
    big = _schedule_script(_transpose_src("f32", (2048, 2048), (1, 0)), 2)
    assert "iterator_interchange = [1, 0]" in big
    # AVX2's tile rows are half a cache line: a line of the result would be written in two halves
    # a band of rows apart (the 2048² transpose ran 3.1 ms against 1.6)
    assert "interchange" not in _schedule_script(_transpose_src("f32", (2048, 2048), (1, 0)), 2, "x86-64-v3")
    three_d = _schedule_script(_transpose_src("f64", (3, 700, 513), (0, 2, 1)), 2)
    assert "iterator_interchange = [0, 2, 1]" in three_d
    assert "interchange" not in _schedule_script(_transpose_src("f32", (256, 512), (1, 0)), 2)
    assert "interchange" not in _schedule_script(_transpose_src("f32", (512, 700), (1, 0)), 2)  # 0.7 MB a thread
    assert "interchange" in _schedule_script(_transpose_src("f32", (512, 700), (1, 0)), 1)
    assert "interchange" not in _schedule_script(_transpose_src("f32", (3, 4096, 513), (2, 1, 0)), 2)
    two = "fn f(x: Tensor<f32, [2048, 2048]>, y: Tensor<f32, [2048, 2048]>) -> Tensor<f32, [2048, 2048]> " \
          "{ transpose(x) + y }"
    assert "interchange" not in _schedule_script(two, 2)


@pytest.mark.parametrize("cpu", ["host", "x86-64-v3"])
@pytest.mark.parametrize("dt,shape,perm", [("f32", (1000, 1100), (1, 0)), ("f64", (700, 513), (1, 0)),
                                           ("f32", (3, 999, 520), (0, 2, 1)), ("i32", (1030, 1024), (1, 0))])
def test_interchanged_transposes_are_exact(cpu, dt, shape, perm):
    """The interchanged schedule (masked last tiles where a vector does not divide the plane; AVX-512
    only), bit for bit, on one thread and two, both vector units."""
    from mind.compiler.backend.cpu.api import compile_function
    x = (np.random.default_rng(7).standard_normal(shape) * 100).astype(NP[dt])
    src = _transpose_src(dt, shape, perm)
    assert ("interchange" in _schedule_script(src, 1, "x86-64-v4" if cpu == "host" else cpu)) == (cpu == "host")
    for threads in (1, 2):
        run = compile_function(mind._function_of(src, "f"), threads=threads, cpu=cpu, cache=False)
        np.testing.assert_array_equal(run([x])[0], x.transpose(perm))
        assert next(iter(run._kernels.values())).scheduled


UNIT_AXES = [
    # (input shape, permutation, expression around the transpose)
    ((2048, 1), (1, 0), "transpose(sum(y * y, axis=1, keepdims=true))"),        # a statistic as a row
    ((8, 1, 64, 1), (1, 0, 3, 2), "transpose(y * 2.0, permutation=[1, 0, 3, 2])"),  # units moved around
    ((5, 1, 7), (1, 0, 2), "transpose(exp(y), permutation=[1, 0, 2])"),
]


@pytest.mark.parametrize("shape,perm,expr", UNIT_AXES, ids=lambda v: str(v))
def test_a_transpose_of_unit_axes_of_a_computed_value_is_a_view(shape, perm, expr):
    """Only unit axes move: the same elements in the same order, a reshape (no transposing copy);
    as a copy, its unit axis became a loop of its readers and fusion made the GEMM of a pairwise
    distance a generic again (1024x2048 by 128: 3x slower)."""
    from mind.calling import select_function
    from mind.compiler.backend.linalg.emit import emit_mlir
    from mind.compiler.frontend.api import compile_source
    y_shape = (2048, 128) if "sum" in expr else shape
    out = tuple(shape[p] for p in perm)
    src = f"fn f(y: {T('f32', *y_shape)}) -> {T('f32', *out)} {{ {expr} }}"
    fn = select_function(compile_source(src, "<test>"), "f")
    text = emit_mlir(fn, {})[0]
    lowered = text.split("// transpose", 1)[1].split("\n  //", 1)[0]  # the transpose's own lines
    assert "linalg.generic" not in lowered, lowered
    y = np.random.default_rng(3).standard_normal(y_shape).astype(np.float32)
    want = mind.compile(src, backend="reference")(y)
    for opts in ({"threads": 1}, {"threads": 2, "schedule": "all"}):
        np.testing.assert_allclose(mind.compile(src, cache=False, **opts)(y), want, rtol=1e-6, atol=1e-6)


def test_a_pairwise_distance_keeps_its_gemm():
    import mind as m
    from mind.compiler.backend.cpu.api import emit_stage
    src = (f"fn f(x: {T('f32', 64, 32)}, y: {T('f32', 96, 32)}) -> {T('f32', 64, 96)} {{\n"
           "  sum(x * x, axis=1, keepdims=true) + transpose(sum(y * y, axis=1, keepdims=true))"
           " - 2.0 * matmul(x, transpose(y))\n}")
    llvm_ir = emit_stage(m._function_of(src, "f"), "llvm", threads=1)
    assert "call void @mind_gemm" in llvm_ir
    rng = np.random.default_rng(4)
    x, y = rng.standard_normal((64, 32)).astype(np.float32), rng.standard_normal((96, 32)).astype(np.float32)
    np.testing.assert_allclose(m.compile(src, cache=False)(x, y), m.compile(src, backend="reference")(x, y),
                               rtol=1e-4, atol=1e-4)


def test_a_transpose_of_unit_axes_of_a_parameter_stays_a_copy():
    # a reshape of a parameter is pushed into its readers by fusion, which then loop over its unit
    # axis (y - transpose(x) of x [512, 1]: 2.5x slower); the copy is a tile per vector
    from mind.calling import select_function
    from mind.compiler.backend.linalg.emit import emit_mlir
    from mind.compiler.frontend.api import compile_source
    src = f"fn f(x: {T('f32', 512, 1)}, y: {T('f32', 256, 512)}) -> {T('f32', 256, 512)} {{ y - transpose(x) }}"
    assert "(d1, d0)" in emit_mlir(select_function(compile_source(src, "<test>"), "f"), {})[0]
    rng = np.random.default_rng(5)
    x, y = rng.standard_normal((512, 1)).astype(np.float32), rng.standard_normal((256, 512)).astype(np.float32)
    np.testing.assert_array_equal(mind.compile(src, cache=False)(x, y), y - x.T)
