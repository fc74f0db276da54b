"""Reductions that feed no broadcast use the threads they get: a column reduction is swept row by row
in contiguous blocks (``transforms._column_tiles``), which the blocked full sum's first level is too;
each such schedule matches the reference on odd, prime-sized and 3-D shapes, on one and two threads
and for AVX2."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from mind.calling import select_function
from mind.compiler.backend.cpu.api import compile_function
from mind.compiler.backend.cpu.kernel_library import host_isa
from mind.compiler.backend.cpu.transforms import (STREAM_BLOCK_BYTES, _column_tiles, choose_elementwise_tiles,
                                                  column_vectors)
from mind.compiler.backend.cpu.vector_unit import AVX512, VECTOR_UNITS
from mind.ir.parser import parse_module
from mind.reference.accuracy import check_op
from mind.reference.ops import OP_FUNCTIONS

AVX2 = VECTOR_UNITS["x86-64-v3"]
COLUMN = ["reduction", "parallel"]


@pytest.mark.parametrize("unit", [AVX512, AVX2], ids=["avx512", "avx2"])
@pytest.mark.parametrize("cols, bits", [(1000, 32), (777, 32), (32768, 64), (4096, 32), (520, 64)])
def test_a_column_reduction_is_tiled_in_contiguous_blocks(cols, bits, unit):
    rows = max(2, unit.l2_bytes // (cols * bits // 8) // 2)  # in L2: blocks for the threads to share
    t = choose_elementwise_tiles([rows, cols], COLUMN, bits, unit, threads=2)
    lanes = unit.lanes(bits)
    block, tile = t.parallel[1], t.reduction[1]
    assert cols % block == 0 and block % tile == 0 and block > tile  # whole tiles of a larger block
    assert cols // block >= min(4, cols // (4 * lanes))  # blocks for the threads to share
    vectors = column_vectors(unit, bits)
    assert tile <= vectors * lanes and block <= 4 * vectors * lanes
    if any(block % (k * lanes) == 0 for k in range(1, vectors + 1)):
        assert tile % lanes == 0  # whole vectors where they divide the block
    else:
        assert tile <= 4 * lanes
    assert t.reduction[0] * tile <= 8 * lanes  # the rows of a tile keep to the register budget


@pytest.mark.parametrize("unit", [AVX512, AVX2], ids=["avx512", "avx2"])
@pytest.mark.parametrize("cols, bits", [(1000, 32), (777, 32), (32768, 64), (4096, 32), (520, 64)])
@pytest.mark.parametrize("threads", [1, 2, 3])
def test_a_streaming_column_reduction_gives_each_thread_one_wide_block(cols, bits, unit, threads):
    # beyond L2 each block sweeps every row: the fewest blocks that give each thread one, unless
    # the accumulators of a block would leave L1
    t = choose_elementwise_tiles([4096, cols], COLUMN, bits, unit, threads=threads)
    block, tile = t.parallel[1], t.reduction[1]
    wanted = max(threads, -(-cols * bits // 8 // STREAM_BLOCK_BYTES))
    assert cols % block == 0 and block % tile == 0 and block * bits // 8 <= STREAM_BLOCK_BYTES
    assert cols // block >= wanted and block > cols // wanted // 2  # as wide as the blocks wanted allow
    # a batch of column reductions has blocks of its own: one block per row of the batch
    batch = choose_elementwise_tiles([8, 4096, cols], ["parallel"] + COLUMN, bits, unit, threads=threads)
    assert batch.parallel[0] == 1 and batch.parallel[2] >= block


def test_a_column_tile_reads_256_bytes_of_a_row():
    # a blocked f64 sum's first level has rows of 32: AVX2 takes the row in one block of 8 ymm (8
    # chains of adds), as AVX-512 does in 4 zmm, where 4 ymm made two blocks of half rows
    for unit in (AVX512, AVX2):
        t = choose_elementwise_tiles([1024, 128, 32], ["parallel", "reduction", "parallel"], 64, unit)
        assert t.parallel == (1, 0, 32)
    assert column_vectors(AVX2, 64) == column_vectors(AVX2, 32) == 8 and column_vectors(AVX512, 32) == 4


@pytest.mark.parametrize("unit", [AVX512, AVX2], ids=["avx512", "avx2"])
@pytest.mark.parametrize("bits", [32, 64])
def test_accumulators_carried_in_registers_are_whole_vectors(unit, bits):
    # a loop-carried vector of 3 or 2.5 registers (48, 40 f32) is scalarized by LLVM: a block that is
    # one tile is 1, 2 or 4 vectors or a whole loop narrower than one, else whole vectors, masked
    lanes, vectors = unit.lanes(bits), column_vectors(unit, bits)
    for size in list(range(1, 300)) + [333, 777, 1000, 1001, 4096, 32768]:
        block, tile, masked = _column_tiles(size, lanes, True, vectors)
        if tile:  # a block swept in tiles reads and writes its accumulators every step: whole vectors
            assert tile % lanes == 0 or tile & (tile - 1) == 0 and 1 < tile < lanes
        else:
            assert block in [k * lanes for k in (1, 2, 4, 8) if k <= vectors] or block == size < lanes
        width = tile or block
        assert masked == (size % width != 0 or size % block != 0)
        # unmasked plans unchanged
        assert _column_tiles(size, lanes, False, vectors) == (block, tile, False) or masked
        unmasked = _column_tiles(size, lanes, False, vectors)
        assert not unmasked[2] and size % unmasked[0] == 0


def test_an_in_l2_column_block_is_swept_in_whole_vectors():
    # 1000 columns: blocks of 250 swept in tiles of 50 (3 vectors and 2 lanes, read in pieces every
    # row) became masked whole-vector blocks of 64 (300x1000 f32 1.14x, 840x496 1.17x, 131x352 1.49x);
    # streaming from beyond L2 (blocks given) keeps its tiles (0.91-1.06x either way)
    assert _column_tiles(1000, 16, True, 4) == (64, 0, True)
    assert _column_tiles(496, 16, True, 4) == (64, 0, True)
    assert _column_tiles(1000, 16, True, 4, 2) == (500, 50, False)


def test_a_middle_axis_tile_takes_rows_for_independent_chains():
    # [2, 8, 125, 17] f64 summed over axis 2 (a blocked sum's level): 17 is one masked tile of 4
    # vectors (the fewest, in a power of two, that cover it), and 2 rows of the axis outside make 8 chains
    kinds = ["parallel", "parallel", "reduction", "parallel"]
    t = choose_elementwise_tiles([2, 8, 125, 17], kinds, 64, AVX512, masked=True)
    assert t.masked and t.parallel[3] == 32 and t.parallel[1] * 4 >= 8
    narrow = choose_elementwise_tiles([256, 125, 4], ["parallel", "reduction", "parallel"], 32, AVX512)
    assert narrow.parallel[0] == 8  # quarter vectors: 8 rows
    # beyond L2 the op streams: one row per tile, one sequential stream
    assert choose_elementwise_tiles([64, 24, 125, 17], kinds, 64, AVX512, masked=True).parallel[1] == 1


def test_a_kept_dim_does_not_take_the_place_of_the_rows():
    # max(x, axes=[-1], keepdims=true) of [836, 64, 4]: loops [836, 64, 1, 4]; the rows of the tile
    # are those of the 64-loop (8 of them, as without the kept dim), not the unit loop's one
    kinds = ["parallel", "parallel", "parallel", "reduction"]
    kept = choose_elementwise_tiles([836, 64, 1, 4], kinds, 32, AVX512)
    dropped = choose_elementwise_tiles([836, 64, 4], kinds[1:], 32, AVX512)
    assert kept.parallel == (1, 8, 1, 0) and dropped.parallel == (1, 8, 0)
    assert kept.reduction[-1] == dropped.reduction[-1] == 4
    # an elementwise op over [R, 1] keeps its tiles (64 rows of one element per tile ran slower)
    assert choose_elementwise_tiles([60000, 1], ["parallel", "parallel"]).parallel == (2, 1)


def test_narrow_column_reductions_and_row_reductions_keep_their_tiles():
    for rows in (300, 4096):  # one tile wide: no inner block, whatever the rows
        narrow = choose_elementwise_tiles([rows, 64], COLUMN)
        assert narrow.parallel == (0, 64) and narrow.reduction == (2, 0) and not narrow.masked, rows
    rows = choose_elementwise_tiles([4096, 1024], ["parallel", "reduction"])
    assert rows.parallel == (8, 0) and rows.reduction == (0, 16)


def _reduction(op: str, dtype: str, shape: tuple[int, ...], axes: list[int], keepdims: bool = False) -> object:
    out = [1 if i in axes else d for i, d in enumerate(shape)] if keepdims else \
        [d for i, d in enumerate(shape) if i not in axes]
    t = lambda s: f"{dtype}[{', '.join(map(str, s))}]"  # noqa: E731 - a scalar is f32[]
    keep = "true" if keepdims else "false"
    return select_function(parse_module(
        f"func @main(%x: {t(shape)}) -> ({t(out)}) {{\n"
        f"  %0 = {op}(%x) {{axes = {axes}, keepdims = {keep}}} : {t(out)}\n  return %0\n}}\n", "t"), None)


CASES = [
    ("reduce_max", "f32", (301, 1000), [0], False),
    ("reduce_sum", "f32", (257, 777), [0], True),
    ("reduce_max", "f64", (5, 37, 520), [1], False),
    ("reduce_sum", "f64", (3, 61, 1536), [0, 1], False),
    ("reduce_sum", "f64", (480, 270), [0, 1], False),   # the blocked sum: rows of 32, [45, 90, 32] first
    ("reduce_sum", "f32", (64, 65536), [0, 1], False),  # the blocked sum's first level: [512, 128, 64]
    ("reduce_sum", "f32", (2000, 333), [0], False),     # blocked over axis 0, masked 4-vector tiles
    ("reduce_sum", "f64", (16, 3000, 17), [1], True),   # blocked middle axis: masked 2-vector tile, chains
    ("reduce_max", "f64", (7, 130, 37), [1], False),
    ("reduce_max", "f32", (3000, 5), [0], False),       # narrower than a vector: one masked vector
    ("reduce_sum", "f32", (9, 200, 6), [1], False),
    ("reduce_sum", "f32", (24, 125, 40), [1], False),   # 2.5 vectors: masked 4
    ("reduce_max", "f32", (12671, 32), [0], False),     # blocked max: levels of rows the threads share
    ("reduce_max", "f64", (3, 640, 2, 9), [1, 2], True),  # blocked over a run of middle axes
    ("reduce_max", "f32", (4096, 1000), [0], False),    # streams: one wide block per thread
    ("reduce_max", "f64", (2000, 48), [1], False),      # short rows, whole: 6 vectors, a tree of pieces
    ("reduce_sum", "f32", (1000, 100), [1], False),     # short rows, whole: 6 vectors and 4 lanes
    ("reduce_sum", "f64", (7, 17, 40), [2], True),      # rows of 17 in tiles of 1 row (17 is prime)
    ("reduce_max", "f32", (250, 8, 4), [1, 2], False),  # a row of two trailing axes, 2 vectors
    ("reduce_sum", "f32", (3000, 12), [1], False),      # shorter than a vector: the transposed tile
    ("reduce_max", "f32", (836, 64, 4), [2], True),     # kept dim: 8 rows per tile, not its unit loop
    ("reduce_sum", "f64", (20001, 5), [1], True),
]
THREADS_AND_CPUS = [(1, "host"), (2, "host")] + ([(2, "x86-64-v3")] if host_isa() is not None else [])


@pytest.mark.parametrize("threads, cpu", THREADS_AND_CPUS)
@pytest.mark.parametrize("op, dtype, shape, axes, keepdims", CASES)
def test_column_and_blocked_reductions_match_the_reference(op, dtype, shape, axes, keepdims, threads, cpu):
    fn = _reduction(op, dtype, shape, axes, keepdims)
    x = np.random.default_rng(len(shape) + shape[-1]).standard_normal(shape).astype(dtype.replace("f", "float"))
    x[0, 0] = np.inf if op == "reduce_max" else x[0, 0]
    run = compile_function(fn, threads=threads, cpu=cpu, cache=False)
    got = run([x])[0]
    kernel = next(iter(run._kernels.values()))
    assert kernel.scheduled and kernel.threads == threads
    op_ = fn.ops[0]
    want = OP_FUNCTIONS[op](x, **dict(op_.attrs))
    assert check_op(op, [x], dict(op_.attrs), got, want, dtype=op_.result.type.dtype) is None
    if op == "reduce_sum":  # the blocked sums are about as accurate as NumPy's, not only within the bound
        exact = x.astype(np.longdouble).sum(axis=tuple(axes), keepdims=keepdims)
        magnitude = np.abs(x).astype(np.longdouble).sum(axis=tuple(axes), keepdims=keepdims)
        err = float(np.max(np.abs(got - exact) / magnitude))  # relative to the terms: no cancellation
        numpy_err = float(np.max(np.abs(x.sum(axis=tuple(axes), keepdims=keepdims) - exact) / magnitude))
        assert err <= max(4 * numpy_err, 8 * float(np.finfo(x.dtype).eps))


SIZES = [1, 2, 3, 4, 5, 7, 8, 16, 17, 31, 40, 64, 127, 129, 257, 333, 16411]


@given(st.data())
def test_random_reductions_match_the_reference(data):
    # any axes of shapes whose extents are primes, odd widths, whole vectors and a prime above 128²
    # (split sums), every op scheduled, with signed zeros and infinities among the terms
    rank = data.draw(st.integers(1, 4))
    shape = tuple(data.draw(st.lists(st.sampled_from(SIZES), min_size=rank, max_size=rank)))
    assume(math.prod(shape) <= 200_000)
    axes = sorted(data.draw(st.sets(st.integers(0, rank - 1))))
    op, dtype = data.draw(st.sampled_from(["reduce_sum", "reduce_max"])), data.draw(st.sampled_from(["f32", "f64"]))
    threads, cpu = data.draw(st.sampled_from(THREADS_AND_CPUS))
    fn = _reduction(op, dtype, shape, axes, data.draw(st.booleans()))
    x = np.random.default_rng(data.draw(st.integers(0, 2**16))).standard_normal(shape).astype(dtype.replace("f", "float"))
    special = data.draw(st.sampled_from([None, -0.0, np.inf, -np.inf, np.nan]))
    if special is not None:
        x.reshape(-1)[data.draw(st.integers(0, x.size - 1))] = special
    run = compile_function(fn, threads=threads, cpu=cpu, cache=False, schedule="all")
    got = run([x])[0]
    op_ = fn.ops[0]
    want = OP_FUNCTIONS[op](x, **dict(op_.attrs))
    assert check_op(op, [x], dict(op_.attrs), got, want, dtype=op_.result.type.dtype) is None


@pytest.mark.parametrize("shape, axes, first", [((12800, 32), [0], (100, 128, 32)),
                                                 ((3, 640, 2, 9), [1, 2], (3, 10, 128, 9))])
def test_a_column_max_is_blocked_into_levels_of_rows(shape, axes, first):
    # the first level is parallel along its blocks of rows (threads share a max over few columns);
    # a trailing max and a short one keep one reduction
    from mind.compiler.backend.linalg.emit import emit_mlir
    text = emit_mlir(_reduction("reduce_max", "f32", shape, axes), {})[0]
    reads = [tuple(int(d) for d in m.group(1).split("x")) for m in
             re.finditer(r"linalg\.generic .*?ins\(%\S+ : tensor<([0-9x]+)xf32", text)]
    assert reads[0] == first and len(reads) == 2
    for short in (((12800, 32), [1]), ((100, 32), [0])):
        text = emit_mlir(_reduction("reduce_max", "f32", *short), {})[0]
        assert text.count("linalg.generic") == 1


@pytest.mark.parametrize("dtype, shape, axes", [("f32", (1000003,), [0]), ("f32", (1000, 1001), [0, 1]),
                                                 ("f64", (2, 4096), [0, 1]), ("f32", (16384,), [0])])
def test_a_max_of_the_whole_operand_is_blocked_as_a_sum(dtype, shape, axes):
    """A max over every element (a 1-D max, all axes of a matrix) is blocked as a trailing sum is
    (``lowerings._trailing_sum``: rows of partial maxima in levels, a prime count split): it was one
    reduction along the whole operand, which the schedule tiles by a divisor of its length (one
    element for 1000003) on no thread; the max of 1000001 f32 ran 19x slower than torch eager's.
    Exact against the reference (signed zeros: +0 above -0; an infinity, a NaN) on 1 and 2 threads
    and AVX2 code."""
    from mind.compiler.backend.linalg.emit import emit_mlir
    fn = _reduction("reduce_max", dtype, shape, axes)
    assert emit_mlir(fn, {})[0].count("linalg.generic") >= 2
    rng = np.random.default_rng(3)
    for special in (None, -0.0, np.inf, np.nan):
        x = rng.standard_normal(shape).astype(dtype.replace("f", "float"))
        if special is not None:
            x.reshape(-1)[-1 if special is np.nan else x.size // 3] = special
        if special == 0.0:
            x = -np.abs(x)
            x.reshape(-1)[7] = 0.0  # +0 above -0: the max is +0
        for threads, cpu in THREADS_AND_CPUS:
            got = compile_function(fn, threads=threads, cpu=cpu, cache=False)([x])[0]
            want = OP_FUNCTIONS["reduce_max"](x, axes=axes, keepdims=False)
            assert np.array_equal(got, want, equal_nan=True) and np.signbit(got) == np.signbit(want), \
                (special, threads, cpu, got, want)


@pytest.mark.parametrize("op, dtype, shape, axes", [("reduce_sum", "f32", (64, 333, 257), [0, 2]),
                                                     ("reduce_max", "f64", (6, 131, 129), [0, 2]),
                                                     ("reduce_sum", "f32", (8, 16, 33, 64), [0, 1, 3]),
                                                     ("reduce_max", "f32", (5, 7, 300, 3), [0, 2])])
def test_a_reduction_over_axes_apart_goes_run_by_run(op, dtype, shape, axes):
    """A reduction over axes that are not adjacent is two: over the last run of adjacent axes, then
    over the others of what it leaves (``lowerings._run_by_run``): as one reduction it had loops of
    no shape the blocked sums and maxima take, a running sum per result on one thread (a sum over
    the first and last axes of 64x333x257 f32 ran at 0.40x torch eager).  Within the sum's bound
    (exact for the max) on 1 and 2 threads and AVX2 code, with a signed zero and an infinity."""
    from mind.compiler.backend.linalg.emit import emit_mlir
    fn = _reduction(op, dtype, shape, axes)
    text = emit_mlir(fn, {})[0]
    firsts = re.findall(r"iterator_types = \[([^\]]*)\]", text)
    assert len(firsts) >= 2 and all(t.count("reduction") <= 2 for t in firsts)
    x = np.random.default_rng(5).standard_normal(shape).astype(dtype.replace("f", "float"))
    x.reshape(-1)[3], x.reshape(-1)[-2] = -0.0, np.inf
    want = OP_FUNCTIONS[op](x, axes=axes, keepdims=False)
    for threads, cpu in THREADS_AND_CPUS:
        got = compile_function(fn, threads=threads, cpu=cpu, cache=False)([x])[0]
        assert check_op(op, [x], {"axes": axes, "keepdims": False}, got, want,
                        dtype=fn.ops[0].result.type.dtype) is None, (threads, cpu)


def _scheduled(fn, unit=AVX512) -> str:
    from mlir import ir
    from mlir.passmanager import PassManager

    from mind.compiler.backend.cpu.transforms import schedule
    from mind.compiler.backend.linalg.emit import emit_mlir
    from mind.compiler.backend.linalg.pipeline import prefusion
    text, _name = emit_mlir(fn, {})
    with ir.Context(), ir.Location.unknown():
        m = ir.Module.parse(text)
        PassManager.parse(prefusion().render()).run(m.operation)
        return schedule(m, min_work=0, unit=unit)


@pytest.mark.parametrize("cpu, op, dtype, shape, axes, tiles", [
    ("x86-64-v4", "reduce_max", "f32", (2000, 64), [1], "[4, 0]"),        # 4 vectors: 4 whole rows per tile
    ("x86-64-v4", "reduce_sum", "f64", (28, 112, 32), [2], "[1, 4, 0]"),
    ("x86-64-v4", "reduce_sum", "f32", (250, 8, 4), [1, 2], "[2, 0, 0]"),  # a row of two axes; 250 = 2 x 125
    ("x86-64-v4", "reduce_max", "f32", (37, 176), [1], "[1, 0]"),          # 11 vectors, 37 rows (prime): one a tile
    ("x86-64-v4", "reduce_max", "f32", (4000, 16), [1], "[4, 0]"),         # one vector
    ("x86-64-v4", "reduce_sum", "f32", (3000, 12), [1], None),             # shorter than a vector
    ("x86-64-v4", "reduce_max", "f32", (300, 192), [1], None),             # 12 vectors: a fusion group's rows
    ("x86-64-v4", "reduce_max", "f32", (64, 300), [0], None),              # a column reduction
    ("x86-64-v3", "reduce_sum", "f32", (3000, 12), [1], "[4, 0]"),         # 1.5 AVX2 vectors
    ("x86-64-v3", "reduce_max", "f32", (2000, 24), [1], None),             # AVX2's maximum: 4 vectors at least
    ("x86-64-v3", "reduce_max", "f32", (2000, 33), [1], "[4, 0]"),
    ("x86-64-v3", "reduce_max", "f64", (1000, 44), [1], "[4, 0]"),
])
def test_short_rows_are_reduced_whole_several_rows_per_tile(cpu, op, dtype, shape, axes, tiles):
    # a reduction along rows of 1 to 12 vectors (a max on AVX2: 4 to 12) takes tiles of whole rows,
    # each row's vector reduced horizontally ("innerreduction", reassociated); others keep the
    # transposed plan
    script = _scheduled(_reduction(op, dtype, shape, axes), VECTOR_UNITS[cpu])
    horizontal = "%eh1 = transform.structured.match ops{[\"vector.reduction\"]} in %ep1_f" in script
    assert horizontal == (tiles is not None), script
    if tiles:
        assert f"tile_using_forall %ew1 tile_sizes {tiles}" in script and "tile_using_for %ep1" not in script
        assert "innerreduction" in script and "#arith.fastmath<reassoc>" in script


def test_streaming_column_blocks_give_every_thread_as_many():
    # a column reduction streaming from beyond L2: its outer parallel blocks times the blocks of its
    # contiguous loop are a multiple of the threads (3 outer blocks on 2 threads were 2 and 1)
    from mind.compiler.backend.cpu.transforms import _column_blocks
    kinds = ["parallel", "reduction", "parallel"]
    for outer, threads, want in [(3, 2, 2), (2, 2, 1), (1, 2, 2), (5, 2, 2), (4, 2, 1), (32, 2, 1), (3, 1, 1),
                                 (2, 3, 3), (1, 4, 4)]:
        got = _column_blocks([outer, 120, 3376], kinds, 32, threads)
        assert got == want and outer * got % threads == 0, (outer, threads, got)
    # a block's accumulators still fit STREAM_BLOCK_BYTES: 20000 f32 columns are 5 blocks of 4000
    assert _column_blocks([3, 120, 20000], kinds, 32, 2) == 5


PRODUCTS = [
    "fn f(x: Tensor<f32, [300, 512]>, y: Tensor<f32, [300, 512]>) -> Tensor<f32, [512]> { sum(x * y, axis=0) }",
    "fn f(x: Tensor<f32, [40000]>, y: Tensor<f32, [40000]>) -> Tensor<f32, []> { sum(x * y) }",
    "fn f(x: Tensor<f64, [24, 130, 37]>) -> Tensor<f64, [24, 37]> { sum(x * x, axis=1) }",
    "fn f(x: Tensor<i32, [200, 300]>, y: Tensor<i32, [200, 300]>) -> Tensor<i32, [300]> { sum(x * y, axis=0) }",
    "fn f(x: Tensor<f32, [50000]>) -> Tensor<f32, []> { sum(exp(x)) }",
    "fn f(x: Tensor<f32, [700, 96]>) -> Tensor<f32, [96]> { mean(sigmoid(x) * x, axis=0) }",
    "fn f(x: Tensor<f32, [333, 129]>, y: Tensor<f32, [333, 1]>) -> Tensor<f32, [129]> { sum(x * y, axis=0) }",
]


@pytest.mark.parametrize("threads, cpu", THREADS_AND_CPUS)
@pytest.mark.parametrize("src", PRODUCTS, ids=lambda s: s[s.index("{") + 2:-2])
def test_a_reduction_of_a_product_over_outer_axes_multiplies_whole_vectors(src, threads, cpu):
    """A reduction over an outer axis (or a blocked full sum's first level) of a product, or of an op
    that ends in one (``exp``, ``sigmoid(x) * x``), multiplies whole vectors.  MLIR's
    ``reduction_to_contract`` patterns, once applied to every kernel, made each such tile a
    ``vector.contract`` that the contraction lowering took apart lane by lane (64 one- or two-lane
    multiplies per tile: a dot of 8M f32 1.5x slower, ``sum(exp(x))`` 3.3x, ``sum(x * y, axis=0)``
    1.5-2.8x); now only a matmul's register block is a contraction (``matmul_section``)."""
    import mind
    from mind.compiler.backend.cpu.engine import mlir_to_llvm_ir
    from mind.compiler.backend.cpu.options import CpuOptions
    from mind.compiler.backend.linalg.emit import emit_mlir
    from mind.compiler.frontend.api import compile_source

    fn = select_function(compile_source(src, "<test>"), "f")
    cpu_ = None if cpu == "host" else cpu
    options = CpuOptions.resolve(threads=threads, cpu=cpu_ or "host", schedule="all")
    llvm_ir = mlir_to_llvm_ir(*emit_mlir(fn, {}), options).llvm_ir
    narrow = re.findall(r"= (?:fmul|mul)\b[^<\n]*(?:<[12] x (?:float|double|i32)>|\b(?:float|double|i32) %)", llvm_ir)
    assert len(narrow) <= 1, narrow[:4]
    rng = np.random.default_rng(7)
    args = []
    for p in fn.params:
        shape, dt = p.type.shape, p.type.dtype
        args.append(rng.integers(-9, 9, shape).astype(dt.numpy) if not dt.is_float
                    else rng.standard_normal(shape).astype(dt.numpy))
    got = mind.compile(src, fn="f", threads=threads, cpu=cpu_ or "host", cache=False, schedule="all")(*args)
    want = mind.compile(src, fn="f", backend="reference")(*args)
    if np.asarray(want).dtype.kind == "i":
        np.testing.assert_array_equal(got, want)
    else:
        scale = float(np.max(np.abs(want))) or 1.0
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * scale)
