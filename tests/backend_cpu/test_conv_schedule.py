"""conv2d on the CPU backend: the named-op emission, the tile chooser and the vectorized schedule.

Every compiled case is checked against the reference (``mind.reference.ops.conv2d``, which
accumulates in f64 / wrapping uint64) and asserted to have been scheduled.
"""

from __future__ import annotations

import numpy as np
import pytest

from mind.compiler.backend.cpu.api import compile_function
from mind.compiler.backend.cpu.conv_gemm import ConvGemm, ConvRows, gemm_of_shapes, rows_of_shapes
from mind.compiler.backend.cpu.conv_schedule import (PACK_MIN_ITERATIONS, ConvTiles, block_cost, choose_conv_tiles,
                                                     conv_section, direct_estimate, most_pixels, pack_rows,
                                                     packed_cost)
from mind.compiler.backend.cpu.vector_unit import VECTOR_UNITS, vector_unit
from mind.compiler.backend.linalg.conv_phases import AxisPhase, axis_phases, phase_padding
from mind.compiler.backend.linalg.lowerings import block_channels, block_width
from mind.ir.parser import parse_module
from mind.reference.accuracy import check_op
from mind.calling import select_function
from mind.reference.ops import conv2d as ref_conv2d
from levels import HOST_LEVELS, needs_level

_NP = {"f32": np.float32, "f64": np.float64, "i32": np.int32, "i64": np.int64}


# ------------------------------------------------------------------------------ tile chooser (pure)

def test_tiles_of_the_benchmark_conv():
    # 6 pixels x 64 channels: 24 zmm accumulators, tiles divide 54 and 64
    assert choose_conv_tiles(8, 54, 54, 64, 3, 3, 64) == ConvTiles(ow=6, f=64, c=1)


def test_tiles_f64_and_narrow_channels():
    # f64, F = 64 (8 vectors): 8 x 2 (strided rows, 16 accumulators) over 4 x 4 (half the pixels per
    # streamed filter vector)
    assert choose_conv_tiles(1, 8, 8, 64, 3, 3, 8, elem_bits=64) == ConvTiles(ow=8, f=16, c=1)
    assert choose_conv_tiles(1, 5, 7, 1, 1, 1, 1) == ConvTiles(ow=7, f=1, c=1)      # F = 1
    assert choose_conv_tiles(1, 5, 53, 32, 3, 3, 3) == ConvTiles(ow=1, f=32, c=1)   # prime OW
    assert choose_conv_tiles(1, 0, 4, 4, 1, 1, 1) is None


def test_tiles_narrow_f_fits_one_vector():
    # F not a lane multiple: the largest divisor of F that fits one register (a row of 20 or 24
    # floats is a vector length LLVM scalarizes), with up to 24 pixels (of 2 or 4 images here)
    assert choose_conv_tiles(2, 3, 12, 20, 3, 3, 5) == ConvTiles(ow=12, f=10, c=1, n=2)
    assert choose_conv_tiles(8, 28, 28, 24, 3, 3, 24) == ConvTiles(ow=4, f=12, c=1, n=4)
    assert choose_conv_tiles(1, 4, 3, 17, 2, 3, 3) == ConvTiles(ow=3, f=1, c=1)       # F prime > lanes
    assert choose_conv_tiles(1, 3, 3, 5, 3, 3, 2) == ConvTiles(ow=3, f=5, c=1)
    assert choose_conv_tiles(1, 4, 4, 12, 3, 3, 2, elem_bits=64) == ConvTiles(ow=4, f=6, c=1)


def test_tiles_power_of_two_vector_rows():
    # F = 48 / 80 / 96: rows of 3, 5 or 6 vectors are never chosen (LLVM scalarizes them: 6 vs
    # 200 GFLOP/s); one vector with up to 24 pixels (6 of 4 images x 16 here: 5.3 -> 4.6 ms
    # against 18 x 16 of one image; 4 of 4 x 16 as fast as 14 x 16) or 2 vectors instead
    assert choose_conv_tiles(8, 54, 54, 48, 3, 3, 48) == ConvTiles(ow=6, f=16, c=1, n=4)
    assert choose_conv_tiles(4, 28, 28, 80, 3, 3, 48) == ConvTiles(ow=4, f=16, c=1, n=4)
    # 6 pixels of 2 images x 2 vectors (24 accumulators) over 9 x 2 of one image: 17.8 / 17.5 ms
    assert choose_conv_tiles(8, 54, 54, 96, 3, 3, 96) == ConvTiles(ow=6, f=32, c=1, n=2)


def test_tiles_one_vector_takes_up_to_24_pixels():
    # OW = 13 / 26 / 28 with few small divisors: 13 (14) pixels x 1 vector beat 1 x 4 or 2 x 4
    # (4 or 8 accumulators; measured about 4x and 2x faster) and 7 x 1 (fewer than 8 accumulators);
    # with 8 images, 2 pixels of 4 images x 2 vectors is as fast as 13 x 1 (7.1 ms either way); a
    # filter of 1.2 MB (more than AVX-512's L2) packs its slices, 13 x 1 as well
    assert choose_conv_tiles(1, 13, 13, 256, 3, 3, 128) == ConvTiles(ow=13, f=16, c=1, pack_rows=13)
    assert choose_conv_tiles(1, 26, 26, 128, 3, 3, 128) == ConvTiles(ow=13, f=16, c=1)
    assert choose_conv_tiles(8, 26, 26, 128, 3, 3, 128) == ConvTiles(ow=2, f=32, c=1, n=4)
    assert choose_conv_tiles(8, 24, 24, 16, 3, 3, 32) == ConvTiles(ow=24, f=16, c=1)


def test_tiles_prefer_more_accumulators_over_wider_f():
    # OW = 7 or 27 has no divisor <= 6: of one image, 7 x 2 (9 x 2) vectors beat 1 x 4 (3 x 4); with
    # images, blocks of 24 accumulators: 1 pixel of 8 images x 2 vectors (0.51 / 0.51 ms against
    # 7 x 2), 3 pixels of 2 images x 4 vectors (2.65 -> 2.39 ms against 9 x 2, stride 2); a filter
    # of 3 x 3 x 256 x 256 (2.4 MB) does not fit L2: its slices are packed, 1 pixel of 4 images x 2
    # vectors per block, 7 rows of them per packed slice (7 pixels of 2 images x 1 vector in place:
    # 5.1 -> 2.5 ms on two threads of an Intel Xeon)
    assert choose_conv_tiles(1, 7, 7, 256, 3, 3, 64) == ConvTiles(ow=7, f=32, c=1)
    assert choose_conv_tiles(8, 7, 7, 256, 3, 3, 64) == ConvTiles(ow=1, f=32, c=1, n=8)
    assert choose_conv_tiles(8, 7, 7, 256, 3, 3, 256) == ConvTiles(ow=1, f=32, c=1, n=4, pack_rows=7)
    assert choose_conv_tiles(1, 27, 27, 64, 3, 3, 64) == ConvTiles(ow=9, f=32, c=1)
    assert choose_conv_tiles(8, 27, 27, 64, 3, 3, 64) == ConvTiles(ow=3, f=64, c=1, n=2)
    # equal cost and accumulator counts: the wider f wins (4 x 4 over 8 x 2)
    assert choose_conv_tiles(8, 56, 56, 64, 3, 3, 64) == ConvTiles(ow=4, f=64, c=1)


def test_tiles_strided_filter_rows_want_more_pixels():
    # F = 128 / 256: a 64-wide block reads half (a quarter) of each filter row, streamed from L2;
    # 4 pixels per filter vector are too few there (4 x 4 measured 8-17 % slower than 7 x 2); with
    # images, 4 pixels of 2 x 2 vectors (16 accumulators; 8.51 / 8.34 ms against 7 x 2)
    assert choose_conv_tiles(1, 28, 28, 128, 3, 3, 128) == ConvTiles(ow=7, f=32, c=1)
    assert choose_conv_tiles(8, 28, 28, 128, 3, 3, 128) == ConvTiles(ow=4, f=32, c=1, n=2)
    assert choose_conv_tiles(4, 56, 56, 128, 3, 3, 128) == ConvTiles(ow=8, f=32, c=1)
    assert choose_conv_tiles(8, 56, 56, 256, 1, 1, 64) == ConvTiles(ow=8, f=32, c=1)    # 1x1, 25 % faster
    # a 2.4 MB filter: packed slices (12 x 2 in place: 6.1 -> 3.1 ms on two threads of an Intel Xeon)
    assert choose_conv_tiles(4, 12, 12, 256, 3, 3, 256) == ConvTiles(ow=6, f=16, c=1, n=4, pack_rows=12)
    # whole rows (F = 64): 4 x 4 stays (as fast as 7 x 2 or 8 x 2)
    assert choose_conv_tiles(8, 28, 28, 64, 3, 3, 128) == ConvTiles(ow=4, f=64, c=1)


def test_block_cost_terms():
    assert block_cost(6, 4, False) == 0.5             # the benchmark's block: FMA-bound
    assert block_cost(2, 4, False) == 0.75            # 2 pixels: the filter stream
    assert block_cost(7, 1, False) == 4 / 7           # 7 accumulators: loads (8 per 7 FMAs)
    assert block_cost(1, 4, False) == 1.5             # 1 pixel per streamed filter vector
    assert block_cost(4, 4, True) > block_cost(7, 2, True) == 0.5


def test_filter_stream_counts_bytes():
    # an AVX2 filter vector carries half a zmm's bytes: half the stream cost per FMA
    assert block_cost(2, 4, False, vector_bytes=32) == block_cost(4, 4, False) == 0.5
    assert block_cost(2, 4, True, vector_bytes=32) == 3.5 / 4
    assert block_cost(2, 4, True) == 3.5 / 2


def test_filter_slices_from_l3_are_packed():
    # a filter larger than L2 read f of F columns at a time: its rows, a power-of-two stride apart,
    # miss in L2 and L3 alike (85-92 GFLOP/s on two threads of an Intel Xeon, 206-265 packed)
    t = choose_conv_tiles(8, 14, 14, 256, 3, 3, 256)
    assert t.f < 256 and t.pack_rows == 14
    assert block_cost(16, 1, True, True) == 20.0 / 16 > block_cost(16, 1, False, True)
    # a filter that fits L2, or a block reading whole rows (F one vector): read in place
    assert choose_conv_tiles(2, 32, 32, 128, 3, 3, 128).pack_rows == 0
    assert choose_conv_tiles(1, 8, 8, 16, 3, 3, 4096).pack_rows == 0
    # AVX2's smaller L2 (512 KB): the 590 KB filter of a 3x3 128 -> 128 conv is packed there, each
    # slice for a whole 32x32 image
    assert choose_conv_tiles(2, 32, 32, 128, 3, 3, 128, unit=VECTOR_UNITS["x86-64-v3"]).pack_rows == 32
    # the packing is paid once per parallel iteration: few pixels per iteration keep the slice in
    # place (one 7x7 image of 512 channels: the 64-pixel blocks' estimate beats packing 49 pixels)
    assert choose_conv_tiles(1, 7, 7, 512, 3, 3, 512).pack_rows == 7
    assert packed_cost(8, 2, 16, 49, 1 << 19, VECTOR_UNITS["x86-64-v4"]) > \
        packed_cost(8, 2, 16, 784, 1 << 19, VECTOR_UNITS["x86-64-v4"]) == block_cost(8, 2, False) + 16 / 784


def test_avx2_packs_only_where_the_copy_pays():
    # packing a slice of 32-byte row pieces cost 14 cycles per element on an AVX2-only Zen 2: packed
    # per 49 pixels a 3x3 512 -> 32 stride-2 conv ran 2.3 ms against 1.1 in place, and a filter
    # gradient's 1.5 MB slices packed per 36 pixels 14.7 ms against 7.0; per 1568 pixels (8 images
    # of 14x14, 256 -> 512) packing still pays: 30 ms against 49 in place
    avx2, avx512 = VECTOR_UNITS["x86-64-v3"], VECTOR_UNITS["x86-64-v4"]
    assert avx2.pack_cycles_per_element == 14 * avx512.pack_cycles_per_element
    assert choose_conv_tiles(4, 7, 7, 32, 3, 3, 512, unit=avx2).pack_rows == 0
    assert choose_conv_tiles(16, 3, 3, 32, 32, 32, 48, unit=avx2).pack_rows == 0
    assert choose_conv_tiles(8, 14, 14, 512, 3, 3, 256, unit=avx2).pack_rows == 14
    cheap = avx2.replaced(pack_cycles_per_element=avx512.pack_cycles_per_element)
    assert cheap.direct_conv_factor == avx2.direct_conv_factor and cheap.bits == avx2.bits
    assert choose_conv_tiles(4, 7, 7, 32, 3, 3, 512, unit=cheap).pack_rows > 0
    difference = packed_cost(8, 1, 8, 49, 1 << 17, avx2) - packed_cost(8, 1, 8, 49, 1 << 17, cheap)
    assert difference == pytest.approx(13 * 8 / 49)


def test_pack_rows_keep_iterations_for_the_threads():
    # as many output rows per iteration as leave PACK_MIN_ITERATIONS iterations, else one
    assert pack_rows(8, 14, 256, 4, 32) == 14                # 2 x 8 slabs: whole images
    assert pack_rows(1, 16, 64, 1, 32) == 2                  # 2 slabs x 8 row blocks of 2
    assert pack_rows(1, 7, 64, 1, 64) == 1                   # 7 iterations at most
    for n, oh, f, tn, tf in [(8, 14, 256, 4, 32), (1, 28, 128, 1, 16), (2, 9, 64, 2, 16), (3, 5, 96, 1, 32)]:
        rows = pack_rows(n, oh, f, tn, tf)
        assert oh % rows == 0
        assert rows == 1 or (n // tn) * (oh // rows) * (f // tf) >= PACK_MIN_ITERATIONS


def test_packed_section_text():
    s = conv_section(2, ConvTiles(2, 32, 1, 4, 14), pad_value="0.0 : f64")
    assert "transform.structured.tile_using_forall %cv2 tile_sizes [4, 14, 0, 32]" in s
    assert "padding_values = [0.0 : f64, 0.0 : f64, 0.0 : f64]" in s and "nofold_flags = [0, 1, 0]" in s
    assert "transform.structured.fuse %cq2 tile_sizes [4, 1, 2, 0]" in s
    assert "tile_sizes [0, 0, 0, 0, 1, 1, 1]" in s and "transform.structured.decompose" in s
    # an epilogue is not fused into a packed conv's blocks; without a fill nothing fuses
    assert s == conv_section(2, ConvTiles(2, 32, 1, 4, 14), fuse_epilogue=True, pad_value="0.0 : f64")
    assert "fuse_into_containing_op" not in conv_section(0, ConvTiles(1, 16, 1, 1, 3), fuse_fill=False)


def test_avx2_blocks_fit_the_registers():
    # AVX2 (16 ymm): accumulators, the filter row and a broadcast; 3 x 4 vectors (17 registers)
    # spilled and ran 5x slower than 2 x 4
    avx2 = VECTOR_UNITS["x86-64-v3"]
    assert [most_pixels(avx2, v) for v in (1, 2, 4)] == [12, 6, 2]
    assert [most_pixels(VECTOR_UNITS["x86-64-v4"], v) for v in (1, 2, 4)] == [24, 12, 6]
    for shape in [(13, 9, 9, 32, 7, 1, 32), (1, 51, 108, 32, 3, 5, 64), (16, 3, 3, 32, 32, 32, 48),
                  (8, 27, 27, 128, 3, 3, 64), (2, 7, 3, 96, 3, 3, 8)]:
        for bits in (32, 64):
            t = choose_conv_tiles(*shape, elem_bits=bits, unit=avx2)
            vecs = -(-t.f // avx2.lanes(bits))
            assert t.n * t.ow * vecs + vecs + 1 <= avx2.registers, (shape, bits, t)


def test_avx2_prefers_rows_of_several_vectors():
    # OW = 112 / 64, F = 32: 2 x 4 ymm over 8 x 1 (9 loads per 8 FMAs; measured 5-12 % slower)
    avx2 = VECTOR_UNITS["x86-64-v3"]
    assert choose_conv_tiles(4, 112, 112, 32, 3, 3, 16, unit=avx2) == ConvTiles(ow=2, f=32, c=1)
    assert choose_conv_tiles(4, 64, 64, 32, 3, 3, 32, unit=avx2) == ConvTiles(ow=2, f=32, c=1)


def test_tiles_take_several_images():
    # a filter gradient: 3 x 3 output pixels, the "filter" (the output gradient) megabytes; 4 images
    # x 3 pixels x 2 vectors (24 accumulators), each filter vector serving 12 FMAs instead of 3
    assert choose_conv_tiles(16, 3, 3, 32, 32, 32, 48) == ConvTiles(ow=3, f=32, c=1, n=4)
    assert choose_conv_tiles(3, 3, 3, 16, 64, 64, 48) == ConvTiles(ow=3, f=16, c=1, n=3)
    # with a filter in L2 as fast by the estimate as one image's 3 x 2: more accumulators win the tie
    # (the suite's stride-2 conv, 27-pixel rows: 3 pixels of 4 images x 2 zmm against 9 x 2 of one,
    # 4.27 -> 3.95 ms on 2 threads); equal cost and accumulators: one image
    assert choose_conv_tiles(16, 3, 3, 32, 3, 3, 48) == ConvTiles(ow=3, f=32, c=1, n=4)
    assert choose_conv_tiles(8, 27, 27, 128, 3, 3, 64) == ConvTiles(ow=3, f=32, c=1, n=4)
    assert choose_conv_tiles(16, 3, 30, 32, 32, 32, 48) == ConvTiles(ow=6, f=32, c=1, n=2)
    assert choose_conv_tiles(8, 56, 56, 64, 3, 3, 64) == ConvTiles(ow=4, f=64, c=1)
    # AVX2, OW = 27 (3 x 9): 9 x 1 vector (10 loads per 9 FMAs) or 3 x 2 (3 pixels per filter
    # vector) of one image; 3 pixels of 2 images x 2 vectors, 12 accumulators, is 13-25 % faster
    avx2 = VECTOR_UNITS["x86-64-v3"]
    assert choose_conv_tiles(8, 27, 27, 128, 3, 3, 64, unit=avx2) == ConvTiles(ow=3, f=16, c=1, n=2)
    assert choose_conv_tiles(32, 27, 27, 32, 3, 3, 16, unit=avx2) == ConvTiles(ow=3, f=16, c=1, n=2)
    assert choose_conv_tiles(1, 27, 27, 128, 3, 3, 64, unit=avx2) == ConvTiles(ow=9, f=8, c=1)


def test_direct_estimate_rates_blocks():
    assert direct_estimate(8, 54, 54, 64, 3, 3, 64) == (0.5, 24)
    assert direct_estimate(1, 29, 29, 48, 1, 1, 24)[0] > 1.0   # prime width: 1-pixel blocks
    assert direct_estimate(1, 0, 4, 4, 1, 1, 1) == (float("inf"), 0)
    # a filter larger than L2 (AVX2's 512 KB): its rows, F apart, fill the cache's sets as the whole
    # filter does, whatever the slice f of F a block reads; streamed from L3
    avx2 = VECTOR_UNITS["x86-64-v3"]
    assert direct_estimate(8, 14, 14, 512, 1, 1, 512, unit=avx2)[0] > 0.5
    assert direct_estimate(8, 14, 14, 512, 1, 1, 128, unit=avx2)[0] == 0.5


def test_gemm_of_shapes_is_the_cost_models_choice():
    V4 = "x86-64-v4"
    pixels, images = "[[0, 1, 2], [3]]", "[[0], [1, 2, 3]]"
    # a whole-window conv (the filter gradient of a 1x1 conv) is always a GEMM of one row per image
    assert gemm_of_shapes([512, 14, 14, 8], [14, 14, 8, 512], [512, 1, 1, 512], [1, 1], [1, 1], "f32", V4) == \
        ConvGemm(512, 512, 1568, (images, pixels, images))
    # a 1x1 conv: the GEMM where the direct block is estimated slower (a prime width), or as fast
    # with fewer accumulators than the GEMM's tile (6 x 4 zmm; 6 x 2 ymm on AVX2)
    assert gemm_of_shapes([1, 29, 29, 24], [1, 1, 24, 48], [1, 29, 29, 48], [1, 1], [1, 1], "f32", V4) == \
        ConvGemm(841, 48, 24, (pixels, pixels, pixels))
    big = ([8, 56, 56, 64], [1, 1, 64, 256], [8, 56, 56, 256], [1, 1], [1, 1])
    for isa in (V4, "x86-64-v3"):  # the direct block's 8 x 2 zmm (8 ymm): fewer than the GEMM's
        assert gemm_of_shapes(*big, "f32", isa) == ConvGemm(25088, 256, 64, (pixels, pixels, pixels))
    wide = ([8, 14, 14, 512], [1, 1, 512, 512], [8, 14, 14, 512], [1, 1], [1, 1])
    for isa in (V4, "x86-64-v3"):  # 16 accumulators (2 pixels of 4 images x 2 zmm): fewer than 24
        assert gemm_of_shapes(*wide, "f32", isa) == ConvGemm(1568, 512, 512, (pixels, pixels, pixels))
    # f64 on AVX-512: the same tile, 6 x 4 zmm
    assert gemm_of_shapes(*big, "f64", V4) == ConvGemm(25088, 256, 64, (pixels, pixels, pixels))
    # strided 1x1, a dilated whole window, a window smaller than the input: not a matmul of the tensors
    assert gemm_of_shapes([1, 29, 29, 24], [1, 1, 24, 48], [1, 15, 15, 48], [2, 2], [1, 1], "f32", V4) is None
    assert gemm_of_shapes([2, 5, 5, 3], [5, 5, 3, 4], [2, 1, 1, 4], [1, 1], [2, 2], 32, V4) is None
    assert gemm_of_shapes([2, 5, 5, 3], [4, 5, 3, 4], [2, 2, 1, 4], [1, 1], [1, 1], "f32", V4) is None


def test_axis_phases_of_an_input_gradient():
    # the input gradient of a stride-2 3x3 "same" conv over 64 rows: 32 gradient rows dilated by 2,
    # padded (2, 1); even output rows take taps 0 and 2, odd ones tap 1
    ph = axis_phases(32, 64, 3, 2, 1, 2)
    assert ph == [AxisPhase(p=0, out=32, k0=0, step=2, taps=2, first=-1, dilation=1),
                  AxisPhase(p=1, out=32, k0=1, step=2, taps=1, first=0, dilation=1)]
    assert phase_padding(32, ph) == (1, 0)
    # filter dilation 2 with input dilation 2: every tap lands on the same phase (step 1, dilation 1)
    ph = axis_phases(5, 9, 2, 2, 2, 0)
    assert [(a.p, a.k0, a.step, a.taps, a.dilation) for a in ph] == [(0, 0, 1, 2, 1)]
    # a 1x1 filter with input dilation 3: one phase in three computes something
    assert [a.p for a in axis_phases(4, 10, 1, 3, 1, 0)] == [0]


def test_block_width_widens_prime_widths():
    assert [block_width(w) for w in (7, 13, 23, 24, 25, 26, 29, 31, 37, 49, 58, 64)] == \
        [7, 13, 23, 24, 25, 26, 32, 32, 40, 49, 60, 64]
    # AVX2's 12 accumulators: 13, 17, 26 = 2 x 13 and 38 = 2 x 19 have no block of 4-12 pixels
    assert [block_width(w, 12) for w in (7, 12, 13, 17, 24, 26, 38, 49)] == [7, 12, 16, 20, 24, 28, 40, 49]


def test_conv_width_follows_the_targets_registers():
    """The stem's width of 26 (2 x 13): kept for AVX-512's 24-pixel blocks, computed 28 wide for AVX2's
    12 (blocks of 7 or 14 pixels, not 2)."""
    from mind.compiler.backend.cpu.api import emit_cpu_mlir

    fn, _ = _conv_fn((2, 51, 51, 3), (7, 7, 3, 43), "f32", strides=(2, 2), padding=((3, 3), (3, 3)))
    assert "tensor<2x26x26x48xf32>" in emit_cpu_mlir(fn, {}, None, "x86-64-v4")[0]
    assert "tensor<2x26x28x48xf32>" in emit_cpu_mlir(fn, {}, None, "x86-64-v3")[0]


def test_block_channels_pads_channels_whose_rows_waste_lanes():
    # prime 31, 43, 17: rows of one lane -> 32, 48, 32; 100: rows of 10 lanes -> 112 (7 whole vectors);
    # up to a vector, and 20, 24, 65 (rows of 10, 12, 13 lanes: as many lanes as padded), stay
    assert [block_channels(f) for f in (1, 3, 10, 13, 16, 17, 20, 24, 31, 43, 48, 65, 100, 128)] == \
        [1, 3, 10, 13, 16, 32, 20, 24, 32, 48, 48, 65, 112, 128]


def test_padded_channels_conv_computes_whole_vectors():
    """A prime F: the conv computes a multiple of 16 channels (the filter padded with zero columns in
    front, the result the last F), its register rows whole vectors, not one lane."""
    from mind.compiler.backend.linalg.emit import emit_mlir

    fn, _ = _conv_fn((2, 11, 11, 3), (7, 7, 3, 43), "f32", strides=(2, 2), padding=((3, 3), (3, 3)))
    text, _name = emit_mlir(fn, {})
    assert "tensor<7x7x3x48xf32>) outs(" in text and "[0, 0, 0, 5] [2, 6, 6, 43]" in text
    for xs, ws in (((1, 4, 8, 4), (1, 1, 4, 43)),     # a matmul: the GEMM takes any F
                   ((3, 5, 5, 2), (5, 5, 2, 43))):    # a whole window: the filter as large as the work
        fn, _ = _conv_fn(xs, ws, "f32")
        assert "x48x" not in emit_mlir(fn, {})[0]
    # an input-dilated conv (the input gradient of a strided conv): its phases share one padding
    fn, _ = _conv_fn((1, 5, 4, 2), (3, 2, 2, 31), "f32", lhs_dil=(2, 2), padding=((2, 1), (1, 1)))
    text = emit_mlir(fn, {})[0]
    assert "tensor<3x2x2x32xf32>" in text and "[0, 0, 0, 1] [1, 10, 8, 31]" in text


@pytest.mark.parametrize("bits", [32, 64])
def test_tiles_divide_and_fit_registers(bits):
    lanes = 512 // bits
    for ow in range(1, 60):
        for f in (1, 2, 3, 7, 8, 12, 16, 20, 24, 32, 48, 64, 80, 96, 100, 128, 192, 256):
            t = choose_conv_tiles(1, 1, ow, f, 1, 1, 1, bits)
            assert t is not None and ow % t.ow == 0 and f % t.f == 0
            vecs = -(-t.f // lanes)
            assert t.ow <= 24 and vecs in (1, 2, 4) and t.ow * vecs <= 24
            assert t.f <= lanes or t.f % lanes == 0  # whole vectors, or one narrow one


def test_section_text():
    s = conv_section(3, ConvTiles(6, 64, 1))
    assert "attributes {mind.sched = 3 : i64}" in s
    assert "tile_sizes [1, 1, 6, 64]" in s and "tile_sizes [0, 0, 0, 0, 1, 1, 1]" in s
    assert "fuse_into_containing_op" in s and "transform.structured.decompose" in s
    assert "fuse_into_containing_op" not in conv_section(0, ConvTiles(1, 1, 1), fuse_fill=False)


# ------------------------------------------------------------------------------ compiled vs reference

def _conv_fn(xs, ws, dt, strides=(1, 1), padding=((0, 0), (0, 0)), lhs_dil=(1, 1), rhs_dil=(1, 1),
             epilogue=False):
    x = np.zeros(xs)
    w = np.zeros(ws)
    out = ref_conv2d(x, w, strides=strides, padding=padding, lhs_dilation=lhs_dil, rhs_dilation=rhs_dil).shape
    ty = lambda s: f"{dt}[{', '.join(map(str, s))}]"  # noqa: E731
    pad = "[" + ", ".join(f"[{a}, {b}]" for a, b in padding) + "]"
    attrs = (f"{{strides = [{strides[0]}, {strides[1]}], padding = {pad}, lhs_dilation = [{lhs_dil[0]}, "
             f"{lhs_dil[1]}], rhs_dilation = [{rhs_dil[0]}, {rhs_dil[1]}]}}")
    params = f"%x: {ty(xs)}, %w: {ty(ws)}"
    body = f"  %0 = conv2d(%x, %w) {attrs} : {ty(out)}\n"
    res = "%0"
    if epilogue:  # relu(conv + b)
        params += f", %b: {ty((ws[3],))}"
        zero = "0.0" if dt.startswith("f") else "0"
        body += (f"  %1 = add(%0, %b) : {ty(out)}\n  %2 = const {{value = {zero}}} : {dt}[]\n"
                 f"  %3 = compare(%1, %2) {{direction = le}} : bool{ty(out)[len(dt):]}\n"
                 f"  %4 = select(%3, %2, %1) : {ty(out)}\n")
        res = "%4"
    text = f"func @main({params}) -> ({ty(out)}) {{\n{body}  return {res}\n}}\n"
    return select_function(parse_module(text, "t"), None), out


def _data(rng, shape, dt):
    if dt.startswith("f"):
        return rng.standard_normal(shape).astype(_NP[dt])
    info = np.iinfo(_NP[dt])
    return rng.integers(info.min, info.max, size=shape, dtype=_NP[dt], endpoint=True)


CASES = [
    # name, x shape, w shape, dtype, kwargs
    ("bench-like", (1, 8, 8, 64), (3, 3, 64, 64), "f32", {}),
    ("odd", (2, 7, 9, 5), (3, 2, 5, 20), "f32", {}),
    ("stride2", (1, 9, 11, 8), (3, 3, 8, 16), "f32", {"strides": (2, 2)}),
    ("stride21-pad", (1, 7, 8, 3), (3, 3, 3, 32), "f32", {"strides": (2, 1), "padding": ((0, 2), (1, 0))}),
    ("dilation", (1, 10, 10, 4), (3, 3, 4, 32), "f32", {"rhs_dil": (2, 3)}),
    ("same", (1, 6, 6, 3), (3, 3, 3, 16), "f32", {"padding": ((1, 1), (1, 1))}),
    ("same-batch3", (3, 5, 7, 4), (3, 3, 4, 16), "f32", {"padding": ((1, 1), (1, 1))}),
    ("one-tile", (1, 3, 3, 2), (3, 3, 2, 5), "f32", {}),
    ("lhs-dilation", (1, 4, 5, 2), (2, 2, 2, 16), "f32", {"lhs_dil": (2, 2), "padding": ((1, 1), (1, 1))}),
    ("c1", (2, 5, 5, 1), (2, 2, 1, 16), "f32", {}),
    ("f1", (2, 5, 5, 3), (3, 3, 3, 1), "f32", {}),
    ("1x1", (1, 4, 4, 8), (1, 1, 8, 8), "f32", {}),
    ("window-is-input", (3, 3, 3, 2), (3, 3, 2, 5), "f32", {}),
    ("f64", (1, 5, 6, 4), (3, 3, 4, 8), "f64", {}),
    ("i32-wraps", (1, 5, 6, 3), (2, 3, 3, 17), "i32", {"strides": (1, 2)}),
    ("i64", (2, 4, 4, 2), (2, 2, 2, 8), "i64", {"padding": ((1, 0), (0, 1))}),
    # register blocks of the power-of-two / narrow-f / up-to-24-pixel rule
    ("ow13-f16", (1, 4, 15, 8), (3, 3, 8, 32), "f32", {}),             # 13 x 16
    ("f24-narrow", (2, 5, 16, 3), (3, 3, 3, 24), "f32", {}),           # 14 x 12 (one narrow vector)
    ("f48-one-vec", (1, 4, 8, 4), (3, 3, 4, 48), "f32", {}),           # 6 x 16, not 6 x 48
    ("ow24-f16", (1, 3, 26, 5), (3, 3, 5, 16), "f32", {}),             # 24 x 16
    ("f64-narrow", (1, 4, 9, 3), (3, 3, 3, 12), "f64", {}),            # 7 x 6
    # input-dilated convs: one conv per output phase (taps by phase, windows padded once)
    ("lhs-dil-phases", (2, 6, 5, 3), (3, 3, 3, 16), "f32", {"lhs_dil": (2, 2), "padding": ((2, 1), (2, 1))}),
    ("lhs-dil-3x2-rhs", (1, 5, 4, 2), (3, 2, 2, 8), "f32",
     {"lhs_dil": (3, 2), "rhs_dil": (2, 3), "padding": ((4, 0), (1, 3))}),
    ("lhs-dil-empty-phases", (1, 4, 4, 3), (1, 1, 3, 16), "f32", {"lhs_dil": (3, 3)}),
    ("lhs-dil-f64", (1, 3, 4, 2), (2, 3, 2, 8), "f64", {"lhs_dil": (2, 1), "padding": ((1, 1), (0, 2))}),
    # convs that are matmuls (the prebuilt GEMM): a 1x1 conv of prime width, whole windows
    ("1x1-prime-width", (2, 3, 29, 8), (1, 1, 8, 48), "f32", {}),
    ("whole-window-f64", (4, 3, 5, 2), (3, 5, 2, 7), "f64", {}),
    # a filter streamed from L3: blocks of several images
    ("l3-filter-images", (4, 34, 34, 16), (32, 32, 16, 32), "f32", {}),
    # prime output widths: computed 32 (40) wide, the first 29 (37) columns kept
    ("prime-width-valid", (1, 4, 31, 24), (3, 3, 24, 48), "f32", {}),
    ("prime-width-same-s2", (2, 3, 73, 5), (3, 3, 5, 16), "f32", {"strides": (1, 2), "padding": ((1, 1), (1, 1))}),
    ("prime-width-i32", (1, 3, 31, 2), (1, 3, 2, 8), "i32", {"rhs_dil": (1, 1)}),
    # output channels padded to whole vectors (block_channels): 43 -> 48, 31 -> 32 with a prime width
    ("prime-channels-stem", (2, 11, 11, 3), (7, 7, 3, 43), "f32", {"strides": (2, 2), "padding": ((3, 3), (3, 3))}),
    ("prime-channels-width-f64", (1, 3, 33, 13), (3, 3, 13, 31), "f64", {}),
    ("lhs-dil-prime-channels", (2, 5, 6, 3), (3, 3, 3, 43), "f32", {"lhs_dil": (2, 2), "padding": ((2, 1), (2, 1))}),
    ("channels-100-i64", (2, 4, 6, 2), (2, 2, 2, 100), "i64", {"strides": (1, 2), "padding": ((1, 0), (0, 1))}),
]


def _calls_the_gemm(fn) -> bool:
    from mind.compiler.backend.cpu.engine import mlir_to_llvm_ir
    from mind.compiler.backend.cpu.options import CpuOptions
    from mind.compiler.backend.linalg.emit import emit_mlir

    text, name = emit_mlir(fn, {})
    return "call void @mind_gemm_f" in mlir_to_llvm_ir(text, name, CpuOptions.resolve(threads=1)).llvm_ir


@pytest.mark.parametrize("name,xs,ws,dt,kw", CASES, ids=[c[0] for c in CASES])
def test_scheduled_conv_matches_reference(name, xs, ws, dt, kw):
    fn, out_shape = _conv_fn(xs, ws, dt, **kw)
    rng = np.random.default_rng(len(name))
    x, w = _data(rng, xs, dt), _data(rng, ws, dt)
    run = compile_function(fn, threads=1)
    k = run.kernel({})
    attrs = {"strides": kw.get("strides", (1, 1)), "padding": kw.get("padding", ((0, 0), (0, 0))),
             "lhs_dilation": kw.get("lhs_dil", (1, 1)), "rhs_dilation": kw.get("rhs_dil", (1, 1))}
    assert k.scheduled or _calls_the_gemm(fn)  # a conv that is a matmul (or whose phases all are)
    got = np.empty(out_shape, _NP[dt])
    k(x, w, out=[got])
    want = ref_conv2d(x, w, **attrs)
    # the spec's accuracy class of conv2d (exact for integers, a dot-product bound for floats)
    assert check_op("conv2d", [x, w], attrs, got, want) is None


@pytest.mark.parametrize("dt,xs,ws,pad", [
    ("f32", (2, 6, 14, 16), (3, 3, 16, 32), 0),
    ("i32", (2, 6, 14, 16), (3, 3, 16, 32), 0),
    ("f32", (2, 5, 15, 8), (3, 3, 8, 24), 0),    # 13 x 12: a narrow f row, more than 12 pixels
    ("f32", (3, 4, 16, 4), (3, 3, 4, 48), 0),    # 14 x 16: F = 48 as one-vector blocks
    ("f32", (2, 5, 12, 8), (3, 3, 8, 64), 1),    # "same" padding (the copy is split over the batch)
    ("f32", (2, 5, 9, 3), (3, 3, 3, 31), 1),     # F = 31 computed as 32: the epilogue reads the slice
])
def test_conv_bias_relu_two_threads(dt, xs, ws, pad):
    padding = ((pad, pad), (pad, pad))
    fn, out_shape = _conv_fn(xs, ws, dt, padding=padding, epilogue=True)
    rng = np.random.default_rng(7)
    x, w = _data(rng, xs, dt), _data(rng, ws, dt)
    b = _data(rng, (ws[3],), dt)
    run = compile_function(fn, threads=2)
    got = run([x, w, b])[0]
    assert next(iter(run._kernels.values())).scheduled
    c = ref_conv2d(x, w, strides=(1, 1), padding=padding, lhs_dilation=(1, 1), rhs_dilation=(1, 1))
    assert c.shape == out_shape
    with np.errstate(over="ignore"):
        want = np.maximum(c + b, 0)
    if dt == "f32":
        scale = ref_conv2d(np.abs(x), np.abs(w), strides=(1, 1), padding=padding, lhs_dilation=(1, 1),
                           rhs_dilation=(1, 1)) + np.abs(b)
        assert np.all(np.abs(got - want) <= 1e-5 * scale)
    else:
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("cpu", HOST_LEVELS)
@pytest.mark.parametrize("dt,xs,ws,strides,padding,epilogue,threads", [
    ("f32", (2, 7, 7, 128), (3, 3, 128, 256), (2, 2), ((1, 1), (1, 1)), False, 2),
    ("f32", (2, 7, 7, 128), (3, 3, 128, 256), (2, 2), ((1, 1), (1, 1)), True, 1),
    ("f64", (1, 6, 7, 128), (3, 3, 128, 128), (1, 2), ((0, 0), (0, 0)), False, 2),
    ("i32", (2, 5, 5, 128), (3, 3, 128, 256), (2, 2), ((0, 1), (1, 0)), True, 2),
])
def test_packed_filter_slices_match_reference(cpu, dt, xs, ws, strides, padding, epilogue, threads, monkeypatch):
    # filters of 1.2 MB (more than either level's L2): each parallel iteration packs its slice, at
    # AVX-512's packing cost on every level (AVX2's own packs these small images in place)
    from mlir import ir

    from mind.compiler.backend.cpu.transforms import schedule
    from mind.compiler.backend.linalg.emit import emit_mlir
    needs_level(cpu)
    monkeypatch.setitem(VECTOR_UNITS, cpu, VECTOR_UNITS[cpu].replaced(pack_cycles_per_element=1.0))
    fn, out_shape = _conv_fn(xs, ws, dt, strides=strides, padding=padding, epilogue=epilogue)
    with ir.Context(), ir.Location.unknown():
        script = schedule(ir.Module.parse(emit_mlir(fn, {})[0]), unit=vector_unit(cpu), threads=threads)
    assert script is not None and "transform.structured.pad" in script
    rng = np.random.default_rng(11)
    x, w, b = _data(rng, xs, dt), _data(rng, ws, dt), _data(rng, (ws[3],), dt)
    run = compile_function(fn, threads=threads, cpu=cpu, cache=False)
    got = run([x, w, b] if epilogue else [x, w])[0]
    attrs = {"strides": strides, "padding": padding, "lhs_dilation": (1, 1), "rhs_dilation": (1, 1)}
    want = ref_conv2d(x, w, **attrs)
    if not epilogue:
        assert check_op("conv2d", [x, w], attrs, got, want) is None
        return
    with np.errstate(over="ignore"):
        want = np.maximum(want + b, 0)
    if dt == "i32":
        np.testing.assert_array_equal(got, want)
    else:
        scale = ref_conv2d(np.abs(x), np.abs(w), **attrs) + np.abs(b)
        assert np.all(np.abs(got - want) <= 1e-5 * scale)


def test_schedule_module_tags_the_conv():
    from mlir import ir

    from mind.compiler.backend.linalg.emit import emit_mlir
    from mind.compiler.backend.cpu.transforms import schedule

    fn, _ = _conv_fn((1, 6, 8, 4), (3, 3, 4, 16), "f32", strides=(1, 2))
    text, _name = emit_mlir(fn, {})
    assert "linalg.conv_2d_nhwc_hwcf" in text and "strides = dense<[1, 2]>" in text
    with ir.Context(), ir.Location.unknown():
        script = schedule(ir.Module.parse(text), min_work=0)  # a small shape: no cost model
    assert script is not None and "linalg.conv_2d_nhwc_hwcf" in script
    assert "tile_sizes [1, 1, 3, 16]" in script


def test_conv_padding_is_a_pad():
    # the padded input is the pad op's form (border fills, a copy, an insert_slice), not a generic
    # writing through an offset output map, which the vectorizer does not take
    from mind.compiler.backend.linalg.emit import emit_mlir
    for lhs_dil in ((1, 1), (2, 1)):
        fn, _ = _conv_fn((2, 5, 6, 4), (3, 3, 4, 16), "f32", padding=((0, 1), (1, 1)), lhs_dil=lhs_dil,
                         strides=(2, 2) if lhs_dil != (1, 1) else (1, 1))
        text = emit_mlir(fn, {}, pad_border=True)[0]
        assert "tensor.insert_slice" in text and "linalg.copy" in text
        assert "d1 + 1" not in text and "d2 + 1" not in text


def test_unscheduled_conv_still_correct():
    fn, out_shape = _conv_fn((1, 5, 5, 3), (2, 2, 3, 4), "f32", strides=(2, 1))
    rng = np.random.default_rng(3)
    x, w = _data(rng, (1, 5, 5, 3), "f32"), _data(rng, (2, 2, 3, 4), "f32")
    run = compile_function(fn, threads=1, schedule=False)
    got = run([x, w])[0]
    assert not next(iter(run._kernels.values())).scheduled
    attrs = {"strides": (2, 1), "padding": ((0, 0), (0, 0)), "lhs_dilation": (1, 1), "rhs_dilation": (1, 1)}
    assert check_op("conv2d", [x, w], attrs, got, ref_conv2d(x, w, **attrs)) is None


def test_two_convs_sharing_an_init_and_a_chain():
    # CSE merges the two zero fills of equal shape; the second conv consumes a scheduled conv
    text = ("func @main(%x: f32[1, 8, 10, 4], %w1: f32[3, 3, 4, 16], %w2: f32[3, 3, 4, 16], "
            "%w3: f32[1, 3, 16, 8]) -> (f32[1, 6, 6, 8]) {\n"
            "  %0 = conv2d(%x, %w1) {strides = [1, 1], padding = [[0, 0], [0, 0]], lhs_dilation = [1, 1], "
            "rhs_dilation = [1, 1]} : f32[1, 6, 8, 16]\n"
            "  %1 = conv2d(%x, %w2) {strides = [1, 1], padding = [[0, 0], [0, 0]], lhs_dilation = [1, 1], "
            "rhs_dilation = [1, 1]} : f32[1, 6, 8, 16]\n"
            "  %2 = add(%0, %1) : f32[1, 6, 8, 16]\n"
            "  %3 = conv2d(%2, %w3) {strides = [1, 1], padding = [[0, 0], [0, 0]], lhs_dilation = [1, 1], "
            "rhs_dilation = [1, 1]} : f32[1, 6, 6, 8]\n"
            "  return %3\n}\n")
    fn = select_function(parse_module(text, "t"), None)
    rng = np.random.default_rng(11)
    x = _data(rng, (1, 8, 10, 4), "f32")
    w1, w2, w3 = _data(rng, (3, 3, 4, 16), "f32"), _data(rng, (3, 3, 4, 16), "f32"), _data(rng, (1, 3, 16, 8), "f32")
    run = compile_function(fn, threads=1)
    got = run([x, w1, w2, w3])[0]
    assert next(iter(run._kernels.values())).scheduled
    attrs = {"strides": (1, 1), "padding": ((0, 0), (0, 0)), "lhs_dilation": (1, 1), "rhs_dilation": (1, 1)}
    h = (ref_conv2d(x, w1, **attrs).astype(np.float64) + ref_conv2d(x, w2, **attrs)).astype(np.float32)
    want = ref_conv2d(h, w3, **attrs)
    scale = ref_conv2d(np.abs(h), np.abs(w3), **attrs) + 1.0
    assert np.all(np.abs(got - want) <= 1e-4 * scale)


def _script(fn):
    from mlir import ir
    from mlir.passmanager import PassManager

    from mind.compiler.backend.linalg.emit import emit_mlir
    from mind.compiler.backend.linalg.pipeline import prefusion
    from mind.compiler.backend.cpu.transforms import schedule

    text, _name = emit_mlir(fn, {})
    with ir.Context(), ir.Location.unknown():
        m = ir.Module.parse(text)
        PassManager.parse(prefusion().render()).run(m.operation)
        return schedule(m, min_work=0)  # small shapes: no cost model


def test_bias_relu_epilogue_is_fused_into_the_conv_tile():
    fn, _ = _conv_fn((2, 6, 14, 16), (3, 3, 16, 32), "f32", epilogue=True)
    script = _script(fn)
    assert "get_consumers_of_result %cv0[0]" in script
    assert "fuse_into_containing_op %cv0 into" in script
    # conv + conv into one add: neither is fused (both would claim the add)
    text = ("func @main(%x: f32[1, 6, 8, 4], %w1: f32[3, 3, 4, 16], %w2: f32[3, 3, 4, 16]) -> (f32[1, 4, 6, 16]) {\n"
            "  %0 = conv2d(%x, %w1) {strides = [1, 1], padding = [[0, 0], [0, 0]], lhs_dilation = [1, 1], "
            "rhs_dilation = [1, 1]} : f32[1, 4, 6, 16]\n"
            "  %1 = conv2d(%x, %w2) {strides = [1, 1], padding = [[0, 0], [0, 0]], lhs_dilation = [1, 1], "
            "rhs_dilation = [1, 1]} : f32[1, 4, 6, 16]\n"
            "  %2 = add(%0, %1) : f32[1, 4, 6, 16]\n  return %2\n}\n")
    assert "get_consumers_of_result" not in _script(select_function(parse_module(text, "t"), None))


def _bufferized(fn) -> tuple[str, str]:
    from mlir import ir
    from mlir.passmanager import PassManager

    from mind.compiler.backend.linalg.emit import emit_mlir
    from mind.compiler.backend.linalg.pipeline import bufferize, prefusion
    from mind.compiler.backend.cpu.transforms import schedule
    from mind.compiler.backend.linalg.payload import untie_shared_inits
    from mind.compiler.backend.linalg.transform_script import apply_script

    text, _name = emit_mlir(fn, {})
    with ir.Context(), ir.Location.unknown():
        m = ir.Module.parse(text)
        PassManager.parse(prefusion().render()).run(m.operation)
        untie_shared_inits(m, tag_empties=True)
        script = schedule(m, min_work=0)
        apply_script(m, script)
        untie_shared_inits(m)
        PassManager.parse(bufferize().render()).run(m.operation)
        return script, str(m)


def test_fused_epilogue_accumulator_has_no_tile_buffer():
    # the fill's zeros fold into the accumulator: no per-tile alloc (malloc/free + zero stores)
    fn, _ = _conv_fn((2, 6, 14, 16), (3, 3, 16, 32), "f32", epilogue=True)
    script, text = _bufferized(fn)
    assert "cast_away_vector_leading_one_dim" in script
    assert "memref.alloc" not in text and "linalg.fill" not in text
    # without an epilogue the fill writes the output tile itself (no buffer): left as it was
    fn, _ = _conv_fn((2, 6, 14, 16), (3, 3, 16, 32), "f32")
    script, text = _bufferized(fn)
    assert "cast_away_vector_leading_one_dim" not in script and "memref.alloc" not in text


@pytest.mark.parametrize("xs,ws,threads", [
    ((2, 3, 29, 8), (1, 1, 8, 48), 1),        # a 1x1 conv of prime width: [174, 8] @ [8, 48]
    ((64, 7, 7, 8), (7, 7, 8, 64), 2),        # a whole window: [64, 392] @ [392, 64], split by threads
])
def test_matmul_convs_call_the_gemm(xs, ws, threads):
    from mind.compiler.backend.cpu.engine import mlir_to_llvm_ir
    from mind.compiler.backend.cpu.kernel_library import host_isa
    from mind.compiler.backend.cpu.options import CpuOptions
    from mind.compiler.backend.linalg.emit import emit_mlir

    if host_isa() is None:
        pytest.skip("this CPU runs none of the prebuilt GEMM's instruction sets")
    fn, out_shape = _conv_fn(xs, ws, "f32")
    text, name = emit_mlir(fn, {})
    llvm_ir = mlir_to_llvm_ir(text, name, CpuOptions.resolve(threads=threads)).llvm_ir
    assert "call void @mind_gemm_f32" in llvm_ir
    assert "store <" not in llvm_ir  # no zero fill of the output: the call overwrites it
    rng = np.random.default_rng(5)
    x, w = _data(rng, xs, "f32"), _data(rng, ws, "f32")
    got = compile_function(fn, threads=threads)([x, w])[0]
    attrs = {"strides": (1, 1), "padding": ((0, 0), (0, 0)), "lhs_dilation": (1, 1), "rhs_dilation": (1, 1)}
    assert check_op("conv2d", [x, w], attrs, got, ref_conv2d(x, w, **attrs)) is None


@pytest.mark.parametrize("xs,ws,epilogue", [
    ((2, 3, 29, 4), (3, 3, 4, 32), False),    # OW = 27: 3 pixels of 2 images x 2 ymm
    ((4, 4, 29, 3), (3, 3, 3, 32), True),     # the same blocks with a fused bias + relu
    ((6, 3, 11, 2), (3, 3, 2, 32), False),    # OW = 9: 3 pixels of 2 of the 6 images
])
def test_avx2_image_blocks_match_reference(xs, ws, epilogue):
    """Blocks of the same pixels of several images on a partial row (AVX2's units: 12 accumulators
    where a row of 27 or 9 has no such block of one image), on two threads."""
    from mind.compiler.backend.cpu.vector_unit import runs_isa
    if not runs_isa("x86-64-v3"):
        pytest.skip("this CPU does not run AVX2 code (x86-64-v3)")
    avx2 = VECTOR_UNITS["x86-64-v3"]
    fn, out_shape = _conv_fn(xs, ws, "f32", epilogue=epilogue)
    n, _, ow, f = out_shape
    t = choose_conv_tiles(n, out_shape[1], ow, f, ws[0], ws[1], ws[2], unit=avx2)
    assert t.n > 1 and t.ow < ow, t
    rng = np.random.default_rng(11)
    args = [_data(rng, xs, "f32"), _data(rng, ws, "f32")] + ([_data(rng, (f,), "f32")] if epilogue else [])
    run = compile_function(fn, threads=2, cpu="x86-64-v3")
    got = run(args)[0]
    assert next(iter(run._kernels.values())).scheduled
    attrs = {"strides": (1, 1), "padding": ((0, 0), (0, 0)), "lhs_dilation": (1, 1), "rhs_dilation": (1, 1)}
    c = ref_conv2d(args[0], args[1], **attrs)
    if not epilogue:
        assert check_op("conv2d", args[:2], attrs, got, c) is None
    else:
        scale = ref_conv2d(np.abs(args[0]), np.abs(args[1]), **attrs) + np.abs(args[2])
        assert np.all(np.abs(got - np.maximum(c + args[2], 0)) <= 1e-5 * scale)


def test_pointwise_conv_with_fewer_accumulators_calls_the_gemm():
    """A 1x1 conv whose direct blocks hold fewer accumulators than the GEMM's register tile (AVX2's
    8 against 6 x 2 ymm, AVX-512's 16 against 6 x 4 zmm) calls the GEMM, and computes the reference's
    values on both levels."""
    from mind.compiler.backend.cpu.engine import mlir_to_llvm_ir
    from mind.compiler.backend.cpu.options import CpuOptions
    from mind.compiler.backend.cpu.vector_unit import runs_isa
    from mind.compiler.backend.linalg.emit import emit_mlir

    if not any(runs_isa(cpu) for cpu in ("x86-64-v3", "x86-64-v4")):
        pytest.skip("this CPU runs neither AVX2 (x86-64-v3) nor AVX-512 (x86-64-v4) code")
    xs, ws = (2, 4, 8, 64), (1, 1, 64, 256)
    fn, _ = _conv_fn(xs, ws, "f32")
    text, name = emit_mlir(fn, {})
    rng = np.random.default_rng(3)
    x, w = _data(rng, xs, "f32"), _data(rng, ws, "f32")
    attrs = {"strides": (1, 1), "padding": ((0, 0), (0, 0)), "lhs_dilation": (1, 1), "rhs_dilation": (1, 1)}
    for cpu in ("x86-64-v3", "x86-64-v4"):
        if not runs_isa(cpu):
            continue
        llvm_ir = mlir_to_llvm_ir(text, name, CpuOptions.resolve(threads=1, cpu=cpu)).llvm_ir
        assert "call void @mind_gemm_f32" in llvm_ir, cpu
        got = compile_function(fn, threads=2, cpu=cpu)([x, w])[0]
        assert check_op("conv2d", [x, w], attrs, got, ref_conv2d(x, w, **attrs)) is None, cpu


def test_input_dilated_conv_has_no_dilated_copy():
    # the input gradient of a stride-2 conv: four convs of the undilated input (one per phase),
    # two of them with one tap per dim; no conv over the dilated input
    from mind.compiler.backend.linalg.emit import emit_mlir

    fn, _ = _conv_fn((2, 8, 8, 16), (3, 3, 16, 8), "f32", lhs_dil=(2, 2), padding=((2, 1), (2, 1)))
    text, _name = emit_mlir(fn, {})
    convs = [ln for ln in text.splitlines() if "linalg.conv_2d_nhwc_hwcf" in ln]
    assert len(convs) == 4
    assert all("tensor<2x16x16x16xf32>" not in ln and "tensor<2x17x17x16xf32>" not in ln for ln in convs)
    assert sum("tensor<1x1x16x8xf32>" in ln for ln in convs) == 1 and sum("tensor<2x2x16x8xf32>" in ln for ln in convs) == 1


def test_transposed_padding_is_a_transpose_then_a_copy():
    # a filter gradient's input layout ([3, 1, 2, 0]): the transpose stays an op of its own, tiled
    # one vector by one vector on its transposing plane (transposed in registers), where fused into
    # the padding copy it was a scalar transposing loop nest
    text = ("func @main(%x: f32[4, 6, 6, 16], %w: f32[3, 3, 4, 8]) -> (f32[16, 6, 6, 8]) {\n"
            "  %0 = transpose(%x) {permutation = [3, 1, 2, 0]} : f32[16, 6, 6, 4]\n"
            "  %1 = conv2d(%0, %w) {strides = [1, 1], padding = [[1, 1], [1, 1]], lhs_dilation = [1, 1], "
            "rhs_dilation = [1, 1]} : f32[16, 6, 6, 8]\n  return %1\n}\n")
    fn = select_function(parse_module(text, "t"), None)
    script = _script(fn)
    assert "tile_sizes [16, 1, 1, 4]" in script and "iterator_interchange" not in script
    rng = np.random.default_rng(2)
    x, w = _data(rng, (4, 6, 6, 16), "f32"), _data(rng, (3, 3, 4, 8), "f32")
    xt = np.ascontiguousarray(x.transpose(3, 1, 2, 0))
    attrs = {"strides": (1, 1), "padding": ((1, 1), (1, 1)), "lhs_dilation": (1, 1), "rhs_dilation": (1, 1)}
    for cpu in ("host", "x86-64-v3"):
        got = compile_function(fn, threads=2, cpu=cpu)([x, w])[0]
        assert check_op("conv2d", [xt, w], attrs, got, ref_conv2d(xt, w, **attrs)) is None


def test_input_dilated_conv_on_two_threads_with_a_gemm_phase():
    # a phase with one tap per dim is a 1x1 conv the GEMM computes (threaded driver: >= 2^20
    # multiply-adds) while the other phases are parallel loops: the kernel both forks and calls the
    # driver, which once defined the serial switch twice (E6012 'redefinition of global')
    fn, out_shape = _conv_fn((8, 16, 32, 32), (3, 3, 32, 16), "f32", lhs_dil=(2, 2), padding=((2, 1), (2, 1)))
    rng = np.random.default_rng(9)
    x, w = _data(rng, (8, 16, 32, 32), "f32"), _data(rng, (3, 3, 32, 16), "f32")
    got = compile_function(fn, threads=2)([x, w])[0]
    attrs = {"strides": (1, 1), "padding": ((2, 1), (2, 1)), "lhs_dilation": (2, 2), "rhs_dilation": (1, 1)}
    assert check_op("conv2d", [x, w], attrs, got, ref_conv2d(x, w, **attrs)) is None


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_input_dilated_conv_keeps_the_nans_of_zeros_times_infinities(bad):
    # the taps a phase leaves out multiply the dilation's zeros: 0 * inf is NaN in the conv over the
    # dilated input, so the outputs those taps reach are NaN (found by test_differential.py: a
    # [1, 1, 2, 1] filter holding a NaN, lhs_dilation (2, 1))
    for xs, ws, kw in (((1, 2, 1, 2), (1, 1, 2, 1), {"lhs_dil": (2, 1)}),
                       ((2, 5, 6, 3), (3, 3, 3, 4), {"lhs_dil": (2, 2), "padding": ((2, 1), (2, 1))}),
                       ((1, 4, 4, 2), (1, 1, 2, 3), {"lhs_dil": (3, 3)}),
                       ((1, 5, 4, 2), (3, 2, 2, 31), {"lhs_dil": (2, 2), "padding": ((2, 1), (1, 1))})):
        fn, out_shape = _conv_fn(xs, ws, "f32", **kw)
        rng = np.random.default_rng(4)
        x, w = _data(rng, xs, "f32"), _data(rng, ws, "f32")
        w.flat[w.size // 2] = bad
        got = compile_function(fn, threads=1)([x, w])[0]
        attrs = {"strides": (1, 1), "padding": kw.get("padding", ((0, 0), (0, 0))), "lhs_dilation": kw["lhs_dil"],
                 "rhs_dilation": (1, 1)}
        want = ref_conv2d(x, w, **attrs)
        assert np.isnan(want).any()
        assert check_op("conv2d", [x, w], attrs, got, want) is None


def test_rows_of_shapes_is_the_cost_models_choice():
    """A stride-1 conv whose W taps are adjacent, of enough channels, is KH matmuls of filter rows
    where the matmuls are estimated faster than the direct blocks: on AVX2 (whose direct blocks
    run at ``direct_conv_factor`` times their estimate) a 3x3 conv of 128 channels, with an H
    dilation too (filter rows 2 input rows apart); on AVX-512 only where the direct blocks are poor
    (a 7x7 image of 512 channels).  Never for a stride, a W dilation, a 1x1 or whole-window conv
    (``gemm_of_shapes``) or few channels (the output's pass per filter row dominates)."""
    v3, v4 = "x86-64-v3", "x86-64-v4"
    x, w, out = [2, 34, 34, 128], [3, 3, 128, 128], [2, 32, 32, 128]
    # rows of the padded input up to the last valid pixel: 2*34*34 - 2*34 - 2
    assert rows_of_shapes(x, w, out, [1, 1], [1, 1], "f32", v3) == \
        ConvRows(2242, 128, 384, 128, 3, 34, (2, 34, 34), (32, 32))
    assert rows_of_shapes(x, w, [2, 30, 32, 128], [1, 1], [2, 1], "f64", v3) == \
        ConvRows(2174, 128, 384, 128, 3, 68, (2, 34, 34), (30, 32))
    assert rows_of_shapes(x, w, out, [1, 1], [1, 1], "f32", v4) is None
    assert rows_of_shapes([1, 9, 9, 512], [3, 3, 512, 512], [1, 7, 7, 512], [1, 1], [1, 1], "f32", v4) == \
        ConvRows(61, 512, 1536, 512, 3, 9, (1, 9, 9), (7, 7))
    for isa in (v3, v4):
        assert rows_of_shapes(x, w, [2, 16, 16, 128], [2, 2], [1, 1], "f32", isa) is None
        assert rows_of_shapes(x, w, [2, 32, 30, 128], [1, 1], [1, 2], "f32", isa) is None
        assert rows_of_shapes([2, 32, 32, 128], [1, 1, 128, 128], [2, 32, 32, 128], [1, 1], [1, 1], "f32",
                              isa) is None
        assert rows_of_shapes([2, 3, 3, 128], [3, 3, 128, 128], [2, 1, 1, 128], [1, 1], [1, 1], "f32", isa) is None
        assert rows_of_shapes([2, 34, 34, 4], [3, 3, 4, 32], [2, 32, 32, 32], [1, 1], [1, 1], "f32", isa) is None


_ROWS_KERNEL = """
func.func @cv(%xb: tensor<2x{hb}x18x{c}x{e}>, %w: tensor<3x3x{c}x{f}x{e}>, %b: tensor<2x{oh}x16x{f}x{e}>,
              %out: memref<2x{oh}x16x{f}x{e}>) {{
  %x = tensor.extract_slice %xb[0, {skip}, 0, 0] [2, 18, 18, {c}] [1, 1, 1, 1] : tensor<2x{hb}x18x{c}x{e}> to tensor<2x18x18x{c}x{e}>
{init}
  %r = linalg.conv_2d_nhwc_hwcf {{dilations = dense<[{dh}, 1]> : tensor<2xi64>, strides = dense<1> : tensor<2xi64>}}
    ins(%x, %w : tensor<2x18x18x{c}x{e}>, tensor<3x3x{c}x{f}x{e}>) outs({acc} : tensor<2x{oh}x16x{f}x{e}>) -> tensor<2x{oh}x16x{f}x{e}>
  bufferization.materialize_in_destination %r in restrict writable %out : (tensor<2x{oh}x16x{f}x{e}>, memref<2x{oh}x16x{f}x{e}>) -> ()
  return
}}
"""


@pytest.mark.parametrize("elem,accumulate,skip,dh", [("f32", False, 0, 1), ("f32", True, 1, 1), ("f64", True, 0, 2),
                                                     ("f64", False, 1, 1)])
def test_convs_as_filter_rows_match_reference(elem, accumulate, skip, dh):
    """A 3x3 conv of 128 channels on AVX2 runs as three GEMM calls (one per filter row) into the
    extended output, whose window is the result: from a dense input and from a slice of a larger
    one (copied dense first), into a zero output and added to the tensor that is its init, with an
    H dilation too; the reference's values within the GEMM's bound, on 1 and 2 threads."""
    from mind.compiler.backend.cpu.engine import compile_kernel, mlir_to_llvm_ir
    from mind.compiler.backend.cpu.options import CpuOptions
    needs_level("x86-64-v3")
    c = f = 128
    oh = 18 - 2 * dh
    out_t = f"tensor<2x{oh}x16x{f}x{elem}>"
    init = "" if accumulate else (f"  %z = arith.constant 0.0 : {elem}\n  %e0 = tensor.empty() : {out_t}\n"
                                  f"  %i = linalg.fill ins(%z : {elem}) outs(%e0 : {out_t}) -> {out_t}")
    text = _ROWS_KERNEL.format(hb=18 + skip, c=c, f=f, e=elem, oh=oh, skip=skip, dh=dh, init=init,
                               acc="%b" if accumulate else "%i")
    assert rows_of_shapes([2, 18, 18, c], [3, 3, c, f], [2, oh, 16, f], [1, 1], [dh, 1], elem, "x86-64-v3")
    options = CpuOptions.resolve(threads=1, cpu="x86-64-v3", cache=False)
    assert mlir_to_llvm_ir(text, "cv", options).llvm_ir.count(f"call void @mind_gemm_{elem}(") == 3
    rng = np.random.default_rng(7)
    xb, w, b = (_data(rng, s, elem) for s in ((2, 18 + skip, 18, c), (3, 3, c, f), (2, oh, 16, f)))
    attrs = {"strides": (1, 1), "padding": ((0, 0), (0, 0)), "lhs_dilation": (1, 1), "rhs_dilation": (dh, 1)}
    x = xb[:, skip:]
    want = ref_conv2d(x.astype(np.float64), w.astype(np.float64), **attrs) + (b if accumulate else 0)
    scale = ref_conv2d(np.abs(x).astype(np.float64), np.abs(w).astype(np.float64), **attrs) + np.abs(b)
    eps = np.finfo(_NP[elem]).eps
    for threads in (1, 2):
        kern = compile_kernel(text, "cv", CpuOptions.resolve(threads=threads, cpu="x86-64-v3", cache=False))
        got = kern(xb, w, b)
        assert np.all(np.abs(got - want) <= (9 * c + 2) * eps * scale), (threads, np.abs(got - want).max())


def test_replaced_unit_keeps_the_fields_it_does_not_name():
    # conv_rows.py --force and the packing tests vary one figure of a level's unit; every other
    # figure, the packing cost added after the factor included, must stay the level's
    avx2 = VECTOR_UNITS["x86-64-v3"]
    forced = avx2.replaced(direct_conv_factor=100.0)
    assert forced.direct_conv_factor == 100.0 and avx2.direct_conv_factor == 1.6
    assert [getattr(forced, k) for k in avx2.__slots__ if k != "direct_conv_factor"] == \
        [getattr(avx2, k) for k in avx2.__slots__ if k != "direct_conv_factor"]
    assert avx2.replaced() == avx2
    with pytest.raises(TypeError):
        avx2.replaced(vector_bits=512)
