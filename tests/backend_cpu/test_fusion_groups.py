"""Fusion groups (``compiler/backend/cpu/fusion_groups.py``): a reduction fused with the consumer that
reads it as a broadcast, one forall over blocks of rows.  Each program kind is compared with the
reference interpreter, on the host's vector unit and on AVX2 (``cpu="x86-64-v3"``), with rows that
have a whole-vector divisor and rows that need a masked last tile; each test asserts that the group
was (or, where no leading loop is shared, was not) formed.
"""

from __future__ import annotations

import contextlib
import os
import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import mind
import mind.compiler.backend.cpu.lowering as lowering
from mind.compiler.backend.cpu import fusion_groups
from mind.compiler.backend.cpu.fusion_groups import (_chained_rows, _masked_vectors, block_rows, carried_row_tile,
                                                     elementwise_row_tile, masked_cover, per_row_tile, reduction_tile,
                                                     row_tile, Group)
from mind.compiler.backend.cpu.vector_unit import VECTOR_UNITS, runs_isa, vector_unit

EPS = 1e-5
_CI = os.environ.get("MIND_HYPOTHESIS_PROFILE", "ci") == "ci"
CPUS = ["host"] + (["x86-64-v3"] if runs_isa("x86-64-v3") else [])


def T(dt: str, *shape: int) -> str:
    return f"Tensor<{dt}, [{', '.join(map(str, shape))}]>"


def softmax_src(kind: str, dt: str, shape: tuple[int, ...], axis: int = -1) -> str:
    return f"fn f(x: {T(dt, *shape)}) -> {T(dt, *shape)} {{ {kind}(x, axis={axis}) }}"


def layer_norm_src(dt: str, shape: tuple[int, ...]) -> str:
    ax = len(shape) - 1
    return (f"fn f(x: {T(dt, *shape)}, g: {T(dt, shape[-1])}, b: {T(dt, shape[-1])}) -> {T(dt, *shape)} {{\n"
            f"  let m = mean(x, axes=[{ax}], keepdims=true);\n  let d = x - m;\n"
            f"  let v = mean(d * d, axes=[{ax}], keepdims=true);\n  d / sqrt(v + {EPS}) * g + b\n}}")


def rms_norm_src(dt: str, shape: tuple[int, ...]) -> str:
    ax = len(shape) - 1
    return (f"fn f(x: {T(dt, *shape)}, g: {T(dt, shape[-1])}) -> {T(dt, *shape)} {{\n"
            f"  x / sqrt(mean(x * x, axes=[{ax}], keepdims=true) + {EPS}) * g\n}}")


@contextlib.contextmanager
def applied_scripts(modules: list[str] | None = None):
    """The transform scripts that the lowerings inside the block applied, those that MLIR rejected
    prefixed with "failed: " (such a kernel runs as scalar loops: correct, but not what is tested);
    ``modules`` gets the payload's text after each script that formed a group."""
    seen: list[str] = []
    real = lowering.apply_script

    def spy(module, script):
        try:
            real(module, script)
        except Exception:
            seen.append("failed: " + script)
            raise
        seen.append(script)
        if modules is not None and "fuse_into_containing_op" in script:
            modules.append(str(module))
    lowering.apply_script = spy
    try:
        yield seen
    finally:
        lowering.apply_script = real


@pytest.fixture
def scripts():
    with applied_scripts() as seen:
        yield seen


def _args(shapes: list[tuple[int, ...]], dt: str, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    np_dt = np.float32 if dt == "f32" else np.float64
    return [(rng.standard_normal(s) * 3).astype(np_dt) for s in shapes]


def _compare(src: str, args: list[np.ndarray], cpu: str, threads: int = 2) -> None:
    got = mind.compile(src, fn="f", threads=threads, cpu=cpu, cache=False)(*args)
    want = mind.compile(src, fn="f", backend="reference")(*args)
    tol = 2e-5 if args[0].dtype == np.float32 else 1e-12
    for g, w in zip(got if isinstance(got, tuple) else [got], want if isinstance(want, tuple) else [want]):
        np.testing.assert_allclose(g, w, rtol=tol, atol=tol)


def _grouped(scripts: list[str]) -> bool:
    assert not any(s.startswith("failed") for s in scripts)
    return any("fuse_into_containing_op" in s for s in scripts)


CASES = [
    ("softmax", (256, 512)), ("softmax", (64, 1000)), ("softmax", (37, 1001)), ("log_softmax", (128, 777)),
    ("log_softmax", (96, 45)), ("layer_norm", (64, 768)), ("layer_norm", (3, 29, 101)), ("rms_norm", (100, 640)),
    ("rms_norm", (5, 7, 66)),
]


def _src(kind: str, dt: str, shape: tuple[int, ...]) -> tuple[str, list[tuple[int, ...]]]:
    if kind in ("softmax", "log_softmax"):
        return softmax_src(kind, dt, shape), [shape]
    if kind == "layer_norm":
        return layer_norm_src(dt, shape), [shape, shape[-1:], shape[-1:]]
    return rms_norm_src(dt, shape), [shape, shape[-1:]]


@pytest.mark.parametrize("cpu", CPUS)
@pytest.mark.parametrize("kind,shape", CASES)
def test_group_matches_reference(scripts, kind, shape, cpu):
    src, shapes = _src(kind, "f32", shape)
    _compare(src, _args(shapes, "f32"), cpu)
    assert _grouped(scripts)


@pytest.mark.parametrize("cpu", CPUS + ["generic"])
@pytest.mark.parametrize("kind,shape", [("softmax", (60, 333)), ("layer_norm", (48, 1000))])
def test_group_f64(scripts, kind, shape, cpu):
    # "generic" (SSE2) has no masked loads: LLVM expands the masked last tiles
    src, shapes = _src(kind, "f64", shape)
    _compare(src, _args(shapes, "f64"), cpu)
    assert _grouped(scripts)


@pytest.mark.parametrize("cpu", CPUS)
@pytest.mark.parametrize("kind,shape", [("softmax", (95, 1, 48)), ("log_softmax", (30, 1, 100)),
                                        ("layer_norm", (64, 1, 768)), ("rms_norm", (7, 1, 3, 1, 40))])
def test_a_unit_dim_before_the_row_keeps_the_row_reductions(scripts, kind, shape, cpu):
    # elementwise fusion folds the reshapes of a [R, 1, C] softmax into its reductions, which then
    # reduce the unit dim with the row: still a reduction along the row (tile_reduction_using_for),
    # not a middle-axis reduction of tiles [5, 1, 24] (0.57x torch eager before)
    src, shapes = _src(kind, "f32", shape)
    _compare(src, _args(shapes, "f32"), cpu)
    assert _grouped(scripts) and any("tile_reduction_using_for" in s for s in scripts)


def test_one_thread_and_special_values(scripts):
    x = _args([(40, 300)], "f32")[0]
    x[3, 7] = np.inf
    x[5, :] = -np.inf
    x[9, 11] = np.nan
    _compare(softmax_src("softmax", "f32", (40, 300)), [x], "host", threads=1)
    assert _grouped(scripts)


def test_softmax_along_a_leading_axis_is_not_grouped(scripts):
    # the reduction runs over the consumer's first loop: no leading loop is shared, per-op plans
    _compare(softmax_src("softmax", "f32", (300, 64), axis=0), _args([(300, 64)], "f32"), "host")
    assert scripts and not _grouped(scripts)


def test_softmax_along_a_middle_axis_tiles_the_leading_one(scripts):
    _compare(softmax_src("softmax", "f32", (6, 300, 40), axis=1), _args([(6, 300, 40)], "f32"), "host")


def _yielded_intermediates(text: str) -> int:
    """How many values besides its consumer's result the first group's forall yields (in the module
    as the group's script left it)."""
    head = re.search(r"scf\.forall \(.*?\) in \(.*?\) shared_outs\((.*?)\) ->", text)
    assert head is not None
    return head.group(1).count("%") // 2 - 1


@pytest.fixture
def grouped_modules():
    """The payload module's text after each script that formed a group."""
    modules: list[str] = []
    with applied_scripts(modules):
        yield modules


def xent_grad_src(n: int, c: int) -> str:
    return (f"fn loss(z: {T('f32', n, c)}, y: {T('f32', n, c)}) -> f32 {{\n"
            f"  mean(-sum(y * log_softmax(z, axis=-1), axes=[1], keepdims=false), axes=[0], keepdims=false)\n}}\n"
            f"fn f(z: {T('f32', n, c)}, y: {T('f32', n, c)}) -> (f32, {T('f32', n, c)}) {{\n"
            f"  let l = loss(z, y);\n  let (g,) = grad(l, wrt=[z]);\n  (l, g)\n}}\n")


@pytest.mark.parametrize("shape", [(64, 300), (37, 1001)])
def test_gradient_of_softmax_cross_entropy(grouped_modules, shape):
    # the backward pass reads the log-softmax's intermediates (the row max, the exponentials): the
    # forward group yields them from its forall instead of being refused
    n, c = shape
    z, _ = _args([(n, c), (n, c)], "f32")
    y = np.eye(c, dtype=np.float32)[np.arange(n) * 7 % c]
    for cpu in CPUS:
        _compare(xent_grad_src(n, c), [z, y], cpu)
    assert grouped_modules and _yielded_intermediates(grouped_modules[0]) >= 1
    # and not computed a second time outside it for the backward pass: nothing precedes the forall
    text = grouped_modules[0]
    assert "linalg.generic" not in text[:text.index("scf.forall")]


def test_gradient_of_mlp_with_layer_norm(grouped_modules):
    b, d, h, c = 48, 40, 136, 10
    src = (f"fn loss(x: {T('f32', b, d)}, y: {T('f32', b, c)}, w1: {T('f32', d, h)}, w2: {T('f32', h, c)}) -> f32 {{\n"
           f"  let hp = matmul(x, w1);\n  let m = mean(hp, axes=[1], keepdims=true);\n  let e = hp - m;\n"
           f"  let a = relu(e / sqrt(mean(e * e, axes=[1], keepdims=true) + {EPS}));\n"
           f"  mean(-sum(y * log_softmax(matmul(a, w2), axis=-1), axes=[1], keepdims=false), axes=[0], keepdims=false)\n}}\n"
           f"fn f(x: {T('f32', b, d)}, y: {T('f32', b, c)}, w1: {T('f32', d, h)}, w2: {T('f32', h, c)})"
           f" -> (f32, {T('f32', d, h)}, {T('f32', h, c)}) {{\n"
           f"  let l = loss(x, y, w1, w2);\n  let (g1, g2) = grad(l, wrt=[w1, w2]);\n  (l, g1, g2)\n}}\n")
    x, w1, w2 = _args([(b, d), (d, h), (h, c)], "f32")
    y = np.eye(c, dtype=np.float32)[np.arange(b) * 3 % c]
    for cpu in CPUS:
        got = mind.compile(src, fn="f", threads=2, cpu=cpu, schedule="all", cache=False)(x, y, w1 * 0.2, w2 * 0.2)
        want = mind.compile(src, fn="f", backend="reference")(x, y, w1 * 0.2, w2 * 0.2)
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5)
    assert grouped_modules and any(_yielded_intermediates(m) >= 1 for m in grouped_modules)


@given(rows=st.integers(1, 40), cols=st.integers(1, 300), kind=st.sampled_from(["softmax", "log_softmax",
                                                                             "layer_norm", "rms_norm"]))
@settings(max_examples=12, deadline=None) if _CI else settings(max_examples=300, deadline=None)
def test_group_any_shape(rows, cols, kind):
    # shapes small enough that every op is scheduled only with schedule="all": the groups' tiles
    # (masked last tiles, one-row blocks) on whatever a row length draws
    src, shapes = _src(kind, "f32", (rows, cols))
    args = _args(shapes, "f32", seed=rows * 1000 + cols)
    with applied_scripts() as seen:
        got = mind.compile(src, fn="f", threads=2, schedule="all", cache=False)(*args)
    assert not any(s.startswith("failed") for s in seen)
    want = mind.compile(src, fn="f", backend="reference")(*args)
    np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-5)


def test_row_tile_is_whole_vectors():
    assert row_tile(1024, 16) == (64, False)
    assert row_tile(1000, 16) == (64, True)   # masked last tile, not tiles of 50
    assert row_tile(1000, 8) == (32, True)
    assert row_tile(48, 16) == (48, False)
    assert row_tile(13, 16) == (13, False)
    assert row_tile(20, 16) == (16, True)
    # a short row whose 4-vector tiles would leave most of the last one empty takes fewer vectors
    assert row_tile(83, 16) == (32, True)     # 96 lanes for 83, not 128
    assert row_tile(37, 16) == (16, True)
    assert row_tile(80, 16) == (16, False)    # 5 whole vectors, not 2 tiles of 64 lanes


def test_a_carried_row_is_one_two_or_four_vectors():
    # accumulators carried along a reduction loop outside the row stay in registers as 1, 2 or 4
    # vectors: 3 whole vectors take the most of 4, 2, 1 that divide the row; a row of 1 to 4 vectors
    # that no vector divides is one masked tile covering it; other rows keep row_tile's tiles
    assert row_tile(48, 16) == (48, False) and carried_row_tile(48, 16) == (16, False)
    assert row_tile(96, 16) == (48, False) and carried_row_tile(96, 16) == (32, False)
    assert carried_row_tile(24, 8) == (8, False)   # 3 AVX2 vectors
    assert carried_row_tile(40, 16) == (64, True) and carried_row_tile(24, 16) == (32, True)
    assert carried_row_tile(20, 8) == (32, True) and carried_row_tile(17, 16) == (32, True)
    for n, lanes in [(64, 16), (32, 16), (12, 16), (16, 16), (784, 16), (100, 16), (1000, 16), (20, 4), (8, 4)]:
        assert carried_row_tile(n, lanes) == row_tile(n, lanes), (n, lanes)
    for n, lanes in [(40, 16), (24, 16), (17, 16), (33, 16), (5, 4), (11, 8), (63, 16)]:
        t = masked_cover(n, lanes)
        assert t >= n and t // lanes in (1, 2, 4) and t // 2 < n, (n, lanes, t)


def test_an_elementwise_row_shorter_than_two_vectors_is_one_tile():
    # a masked vector and its peeled masked tail would compile the body twice for at most 2 vectors
    # of work; nothing is carried from tile to tile, so the odd width costs no registers across steps
    assert elementwise_row_tile(20, 16) == (20, False)
    assert elementwise_row_tile(31, 16) == (31, False)
    assert elementwise_row_tile(10, 8) == (10, False)
    assert elementwise_row_tile(32, 16) == (32, False)
    assert elementwise_row_tile(33, 16) == row_tile(33, 16) == (16, True)
    assert elementwise_row_tile(1000, 16) == row_tile(1000, 16)


def test_an_op_over_the_block_rows_alone_takes_one_vector_per_tile():
    assert per_row_tile(10, 8) == (10, False)    # shorter than 2 vectors: one tile
    assert per_row_tile(32, 8) == (8, False)     # not 4 vectors of an f64 exp and log
    assert per_row_tile(60, 16) == (16, True)
    assert per_row_tile(64, 16) == (16, False)


def test_reduction_tiles_cover_short_rows_without_waste_and_divide_when_they_can():
    assert reduction_tile(2048, 16) == (64, False)
    assert reduction_tile(1000, 16) == (64, True)  # 64 vectors against the fewest, 63: 4 accumulators
    assert reduction_tile(96, 16) == (32, False)   # 2 vectors divide 96: no peel, no mask
    assert reduction_tile(100, 8) == (16, True)    # f64 rows of 100: 14 vectors of work, not 16
    assert reduction_tile(130, 8) == (16, True)
    for n in range(1, 700):
        v = _masked_vectors(n, 16)
        fewest = min(-(-n // (w * 16)) * w for w in (4, 2, 1) if n >= w * 16 or w == 1)
        assert v in (4, 2, 1) and -(-n // (v * 16)) * v * 8 <= fewest * 9


def test_a_reduction_row_is_never_one_whole_tile_and_a_masked_one():
    # a loop of one whole tile is folded away, a max's -inf start with it, and the peeled tile then
    # updated the row's own slice: a copy of it per row (a softmax over rows of 62: 1.9x slower)
    for lanes in (16, 8, 4):
        for n in range(2 * lanes, 64 * lanes):
            t, masked = reduction_tile(n, lanes)
            assert masked == (n % t != 0) and not (masked and t < n < 2 * t and t > lanes), (n, lanes, t)
    assert reduction_tile(62, 16) == (16, True)   # three whole vectors and a masked one, not 32 + 30
    assert reduction_tile(120, 16) == (32, True)  # three whole tiles of 2 vectors, not 64 + 56
    assert reduction_tile(64, 16) == (64, False)  # whole rows are unchanged
    assert reduction_tile(1000, 16) == (64, True)


@pytest.mark.parametrize("kind,dt,shape", [("softmax", "f32", (7, 9, 62)), ("log_softmax", "f32", (40, 120)),
                                           ("softmax", "f64", (50, 30)), ("softmax", "f32", (3, 11, 53))])
def test_rows_of_one_tile_and_a_masked_one_copy_nothing(kind, dt, shape):
    """The kernel of a grouped softmax over rows that ``reduction_tile`` cut into one whole tile and
    a masked one copies nothing (it copied each row's slice into a fresh buffer: the host's LLVM IR
    is read), and matches the reference on every level of ``CPUS``."""
    from mind.compiler.backend.cpu.api import emit_stage
    from mind.compiler.frontend.api import compile_source

    src = softmax_src(kind, dt, shape)
    with applied_scripts() as seen:
        for cpu in CPUS:
            _compare(src, _args([shape], dt), cpu, threads=1)
    assert _grouped(seen)
    llvm = emit_stage(compile_source(src), "llvm")
    assert "@llvm.memcpy" not in llvm


def test_blocks_fit_l2_and_outnumber_threads():
    unit = VECTOR_UNITS["x86-64-v4"]
    g = Group([], 1, [4096, 1000], 3 * 4000)
    rows = block_rows(g, unit)
    assert rows[1] == 0 and 4096 // rows[0] >= 16 and rows[0] * g.row_bytes <= (1 << 20) // 2
    g3 = Group([], 2, [3, 29, 101], 3 * 404)
    assert block_rows(g3, unit)[0] == 1 and block_rows(g3, unit)[2] == 0
    # a prime row count gave blocks of one row (796 of 664 bytes for a 4x199x83 softmax): blocks
    # of at least MIN_BLOCK_BYTES where the loops outside still make two blocks or more
    prime = Group([], 2, [4, 199, 83], 2 * 332)
    assert block_rows(prime, unit) == [1, 199, 0]
    assert block_rows(Group([], 2, [1, 199, 83], 2 * 332), unit) == [1, 1, 0]  # one block would idle a thread
    assert block_rows(Group([], 2, [4, 64, 64], 2 * 256), unit) == [1, 16, 0]  # 8 KiB blocks: unchanged
    # short rows of whole vectors: a block is one tile of ROWS_PER_SHORT_TILE rows (495 = 3 x 165: 3)
    assert block_rows(Group([], 1, [495, 48], 3 * 192), unit) == [3, 0]
    assert block_rows(Group([], 1, [512, 32], 3 * 128), unit) == [4, 0]
    assert block_rows(Group([], 1, [495, 40], 3 * 160), unit)[0] > 3  # a masked last vector: as before


def test_operand_computed_without_the_rows_stays_outside_the_group(scripts):
    # the gain is computed elementwise over the columns only: computed once before the forall,
    # while the statistics and the normalization are fused
    src = (f"fn f(x: {T('f32', 64, 200)}, g: {T('f32', 200)}) -> {T('f32', 64, 200)} {{\n"
           f"  let h = exp(g) * 0.5;\n"
           f"  x / sqrt(mean(x * x, axes=[1], keepdims=true) + {EPS}) * h\n}}")
    _compare(src, _args([(64, 200), (200,)], "f32"), "host")
    assert _grouped(scripts)


def test_attention_softmax_between_matmuls(scripts):
    t = T("f32", 4, 96, 40)
    src = (f"fn f(q: {t}, k: {t}, v: {t}) -> {t} {{\n"
           f"  let s = matmul(q, transpose(k, permutation=[0, 2, 1])) * 0.125;\n"
           f"  matmul(softmax(s, axis=-1), v)\n}}")
    for cpu in CPUS:
        _compare(src, _args([(4, 96, 40)] * 3, "f32"), cpu)
    assert _grouped(scripts)


def test_blocked_sum_first_level_takes_several_rows_per_tile():
    # [rows, q, n/q] adding q runs into n/q partial sums: one row is one dependent chain of vector<4>
    # adds, so a tile takes CHAINS rows (each row's order of additions unchanged) within 8 vectors
    par, red = "parallel", "reduction"
    assert _chained_rows([1, 32, 4], [16, 128, 4], [par, red, par], {0: 16}, 16) == [8, 4, 4]
    assert _chained_rows([1, 1, 16, 5], [1, 12, 128, 5], [par, par, red, par], {0: 1, 1: 12}, 8) == [1, 6, 2, 5]
    assert _chained_rows([1, 32, 32], [16, 64, 32], [par, red, par], {0: 16}, 16) == [4, 1, 32]
    # a row reduction along the last loop, or an op with its rows not tiled by one: unchanged
    assert _chained_rows([1, 64], [16, 512], [par, red], {0: 16}, 16) == [1, 64]
    assert _chained_rows([2, 8, 4], [16, 128, 4], [par, red, par], {0: 16}, 16) == [2, 8, 4]


def test_a_level_with_a_prime_count_of_rows_takes_them_all_where_they_fit():
    # 301 = 7 x 43: the rows beside the level's runs are 7, whose largest divisor up to 4 rows is one
    # row, two chains of 2 vectors; all 7 rows make 14 chains within 16 accumulators (half of
    # AVX-512's registers), but not within AVX2's 8; 17 rows fit neither
    par, red = "parallel", "reduction"
    kinds = [par, par, red, par]
    assert _chained_rows([1, 1, 1, 32], [1, 7, 43, 82], kinds, {0: 1}, 16, 16) == [1, 7, 1, 32]
    assert _chained_rows([1, 1, 1, 16], [1, 7, 43, 82], kinds, {0: 1}, 8, 8) == [1, 1, 1, 16]
    assert _chained_rows([1, 1, 1, 32], [1, 17, 17, 82], kinds, {0: 1}, 16, 16) == [1, 1, 1, 32]


def test_row_combination_is_a_tree():
    # a row's vector-wide partial sums are combined with reassociation (LLVM's shuffle tree), not as
    # one dependent scalar add per partial result; the max's combination is exact in any order
    from mind.compiler.backend.cpu.api import emit_stage
    src = softmax_src("softmax", "f32", (128, 77))
    llvm = emit_stage(mind._function_of(src, "f"), "llvm")
    reductions = [line for line in llvm.splitlines() if "call" in line and "llvm.vector.reduce." in line]
    assert any("reduce.fadd" in line for line in reductions)
    assert all("reassoc" in line for line in reductions)
    _compare(src, _args([(128, 77)], "f32"), "host", threads=1)


def _blocked_views(modules: list[str]) -> int:
    """The blocked sums' views (``[rows, q, n / q]``) left in the scheduled payloads."""
    return sum(len(re.findall(r"tensor\.expand_shape", m)) for m in modules)


def _scheduled(kind: str, shape: tuple[int, ...], cpus: list[str]) -> tuple[list[str], list[str]]:
    """(the scripts applied, the payloads after them) of ``kind`` at ``shape`` on one thread, each
    result checked against the reference on every cpu of ``cpus``."""
    src, shapes = _src(kind, "f32", shape)
    modules: list[str] = []
    with applied_scripts(modules) as seen:
        for cpu in cpus:
            _compare(src, _args(shapes, "f32"), cpu, threads=1)
    assert _grouped(seen)
    return seen, modules


@pytest.mark.parametrize("kind,shape", [("layer_norm", (64, 768)), ("log_softmax", (64, 512)),
                                        ("rms_norm", (3, 40, 640))])
def test_blocked_sum_in_a_group_is_one_reduction_along_the_row(kind, shape):
    # a row of 768 is blocked as 128 runs of 6 partial sums; inside a group it becomes one reduction
    # along the row with vector-wide partial sums (each within SUM_RUN terms), which the blocking's
    # handful of 4-lane partial sums cannot keep busy
    _, modules = _scheduled(kind, shape, CPUS)
    assert modules and _blocked_views(modules) == 0


@pytest.mark.parametrize("shape,blocked", [((2, 16384), True), ((16, 1000), False), ((24, 1001), False)])
def test_only_long_rows_keep_the_blocked_sum(shape, blocked):
    # 16384 / 64 partial sums would each add 256 terms, more than a run of the blocking (SUM_RUN):
    # it stays blocked; rows of 1000 or 1001 (no whole-vector tile: the last one is peeled and
    # masked) become one reduction; all match the reference
    _, modules = _scheduled("rms_norm", shape, ["host"])
    assert (_blocked_views(modules) > 0) == blocked


@pytest.mark.parametrize("kind,shape", [("softmax", (40, 1001)), ("log_softmax", (3, 20, 177))])
def test_masked_rows_are_peeled(kind, shape):
    # the row loop of whole vector tiles runs without masks (a reduction's partial sums stay in
    # registers); only the last, partial tile is masked
    seen, modules = _scheduled(kind, shape, CPUS)
    assert all("transform.loop.peel" in s for s in seen if "fuse_into" in s)
    # every row loop of the reductions carries its partial sums as a vector (no masked round trip)
    assert any(re.search(r"scf\.for .* -> \(vector<(1x)+\d+xf32>\)", m) for m in modules)


def test_small_group_with_costly_bodies_is_scheduled(monkeypatch):
    monkeypatch.setenv("MIND_CPU_SCHEDULE", "1")  # the default cost model, not every op
    # 64x77 elements are below the per-op cost model's iterations, but every element of this norm
    # takes an f64 exp in the statistics and in the output: as scalar loops that is a large share of
    # a call, so the group counts its bodies' operations (group_work) and is scheduled
    src = (f"fn f(x: {T('f64', 64, 77)}, g: {T('f64', 77)}) -> {T('f64', 64, 77)} {{\n"
           f"  x / sqrt(mean(exp(x), axes=[1], keepdims=true) + {EPS}) * exp(x) * g\n}}")
    with applied_scripts() as seen:
        _compare(src, _args([(64, 77), (77,)], "f64"), "host", threads=1)
    assert _grouped(seen)
    # a classifier head's log-softmax of 32x10 is still too small to pay for its compile
    with applied_scripts() as seen:
        _compare(softmax_src("log_softmax", "f32", (32, 10)), _args([(32, 10)], "f32"), "host", threads=1)
    assert not _grouped(seen)
    # nor is the plain f64 RMS norm of 64x77: its square root is per row (linalg.hoist), not per element
    src, shapes = _src("rms_norm", "f64", (64, 77))
    with applied_scripts() as seen:
        _compare(src, _args(shapes, "f64"), "host", threads=1)
    assert not _grouped(seen)


@pytest.mark.parametrize("cpu", CPUS)
@pytest.mark.parametrize("kind,shape", [("rms_norm", (4096, 1024)), ("layer_norm", (4096, 768)),
                                        ("rms_norm", (200, 640))])
def test_an_f32_norm_sizes_its_f64_square_root_by_f64_lanes(kind, shape, cpu):
    # an f32 norm's sqrt is exp(log(x) / 2) in f64: the op computing it is sized by the f64 values it
    # makes (payload.compute_bits), one vector per tile over the block's rows, or all of a block
    # shorter than 2 vectors (per_row_tile), not 4 vectors of f32 lanes (64 f64 lanes, 8 AVX-512
    # registers per value)
    import re

    from mind.compiler.backend.cpu.api import emit_cpu_mlir
    from mind.compiler.backend.cpu.engine import mlir_to_llvm_ir
    from mind.compiler.backend.cpu.options import CpuOptions
    from mind.compiler.frontend.api import compile_source
    from mind.calling import select_function
    src, shapes = _src(kind, "f32", shape)
    text, name = emit_cpu_mlir(select_function(compile_source(src, "<test>"), "f"), {}, None)
    llvm_ir = mlir_to_llvm_ir(text, name, CpuOptions.resolve(threads=2, cpu=cpu)).llvm_ir
    # (at most two vectors: a tile of 10 doubles is widened to 16 by exp's vscalef, cpu.scalef)
    widths = [int(n) for n in re.findall(r"<(\d+) x double>", llvm_ir)]
    assert widths and max(widths) <= 2 * vector_unit(cpu).lanes(64)
    _compare(src, _args(shapes, "f32"), cpu)


def logsumexp_src(dt: str, shape: tuple[int, ...]) -> str:
    ax = len(shape) - 1
    kept = shape[:-1] + (1,)
    return (f"fn f(x: {T(dt, *shape)}) -> {T(dt, *kept)} {{\n  let m = max(x, axes=[{ax}], keepdims=true);\n"
            f"  m + log(sum(exp(x - m), axes=[{ax}], keepdims=true))\n}}")


@pytest.mark.parametrize("cpu", CPUS)
@pytest.mark.parametrize("dt,shape", [("f32", (300, 432)), ("f64", (200, 130)), ("f32", (20, 9, 1001)),
                                      ("f64", (7, 1376))])
def test_per_row_consumer_is_grouped(dt, shape, cpu):
    # a logsumexp's consumer (m + log(s), [R, 1]) reads its statistics row by row, not as a
    # broadcast: the group takes all its loops as rows, and the blocked sum of exp becomes one
    # reduction along the row (no view left), through the keepdims view [R] -> [R, 1]
    modules: list[str] = []
    with applied_scripts(modules) as seen:
        _compare(logsumexp_src(dt, shape), _args([shape], dt), cpu)
    assert _grouped(seen)
    # the keepdims views ([R] as [R, 1]) stay; no view splits a row into runs
    views = [v for m in modules for v in re.findall(r"tensor\.expand_shape .* into tensor<([0-9x]+)x", m)]
    assert modules and not [v for v in views if v.count("x") + 1 > len(shape)]


def _forall_row_tiles(scripts: list[str], rank: int) -> list[int]:
    """The forall tile of the rows (the consumer's last tiled loop) of each group in ``scripts``."""
    return [int(t.split(",")[rank - 2]) for s in scripts
            for t in re.findall(r"tile_using_forall %gc\d+ tile_sizes \[([0-9, ]+)\]", s)]


@pytest.mark.parametrize("cpu", CPUS)
@pytest.mark.parametrize("kind,dt,shape", [
    ("logsumexp", "f32", (1009, 64)), ("logsumexp", "f32", (4099, 87)), ("logsumexp", "f64", (509, 100)),
    ("logsumexp", "f32", (2, 4099, 150)), ("softmax", "f32", (4099, 200)), ("softmax", "f32", (5, 1031, 96)),
    ("log_softmax", "f64", (2053, 77)), ("layer_norm", "f32", (1009, 128)), ("rms_norm", "f32", (2018, 300)),
])
def test_groups_over_a_row_count_without_a_near_divisor_take_partial_blocks(monkeypatch, kind, dt, shape, cpu):
    """A prime row count (or twice one) has no divisor near the rows a block should have: the group
    of a per-row consumer (a logsumexp) or of one that reads the rows (a softmax, a norm) takes that
    many rows all the same, and a partial last block (the forall's tile does not divide the rows),
    its ops one row at a time there.  The values are the reference's, and the bits those of the
    dividing blocks (one row each for a prime count) it took before: each row's sums in the same
    order."""
    src, shapes = (logsumexp_src(dt, shape), [shape]) if kind == "logsumexp" else _src(kind, dt, shape)
    args = _args(shapes, dt)
    with applied_scripts() as seen:
        got = mind.compile(src, fn="f", threads=2, cpu=cpu, cache=False)(*args)
    assert _grouped(seen)
    tiles = _forall_row_tiles(seen, len(shape))
    assert tiles and all(t > 2 and shape[-2] % t for t in tiles), tiles
    want = mind.compile(src, fn="f", backend="reference")(*args)
    tol = 2e-5 if dt == "f32" else 1e-12
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol)
    monkeypatch.setattr(fusion_groups, "PARTIAL_BLOCK_CONSUMERS", ())
    with applied_scripts() as seen:
        dividing_blocks = mind.compile(src, fn="f", threads=2, cpu=cpu, cache=False)(*args)
    assert _grouped(seen) and all(shape[-2] % t == 0 for t in _forall_row_tiles(seen, len(shape)))
    np.testing.assert_array_equal(got, dividing_blocks)


@pytest.mark.parametrize("kind", ["row_sum", "layer_norm", "mean_mid"])
def test_groups_keep_dividing_blocks_where_partial_ones_gain_nothing(scripts, kind):
    """A row sum of an elementwise chain (the consumer is the reduction) gained nothing from partial
    blocks, nor did a layer norm whose one-row blocks already hold ``SMALL_BLOCK_BYTES`` (61 rows
    of 695 f64), and a mean over a middle axis (its tiles chain several rows) was as often slower:
    all keep blocks that divide their rows, one row each for a prime count."""
    if kind == "row_sum":
        src = "fn f(x: Tensor<f32, [1009, 400]>) -> Tensor<f32, [1009]> { sum(exp(x * 0.5), axes=[1], keepdims=false) }"
        _compare(src, _args([(1009, 400)], "f32"), "host")
    elif kind == "mean_mid":
        src = "fn f(x: Tensor<f32, [3001, 9, 100]>) -> Tensor<f32, [3001, 100]> { mean(x, axes=[1], keepdims=false) }"
        _compare(src, _args([(3001, 9, 100)], "f32"), "host")
    else:
        src, shapes = _src("layer_norm", "f64", (61, 695))
        _compare(src, _args(shapes, "f64"), "host")
    assert _grouped(scripts)
    assert _forall_row_tiles(scripts, 2) == [1]


@pytest.mark.parametrize("kind,dt,shape", [("softmax", "f32", (300, 13)), ("log_softmax", "f64", (40, 18, 7)),
                                           ("logsumexp", "f32", (500, 15)), ("rms_norm", "f32", (64, 3))])
def test_short_rows_are_left_to_the_per_op_plans(kind, dt, shape):
    # rows of fewer than ROW_VECTORS_TO_GROUP vectors: one row per step would be a horizontal reduction
    # per row; the per-op plans take several rows per tile
    if kind == "logsumexp":
        src, shapes = logsumexp_src(dt, shape), [shape]
    elif kind == "rms_norm":
        src, shapes = rms_norm_src(dt, shape), [shape, shape[-1:]]
    else:
        src, shapes = softmax_src(kind, dt, shape), [shape]
    for cpu in CPUS:
        with applied_scripts() as seen:
            _compare(src, _args(shapes, dt), cpu)
        assert not _grouped(seen)




@pytest.mark.parametrize("dt,shape", [("f32", (64, 512)), ("f64", (48, 1001))])
def test_partial_sums_start_at_negative_zero(dt, shape):
    # the backend's sums start at -0 (a row of -0 sums to -0, as outside groups: test_sum_accuracy);
    # a group's vector of partial sums started at +0 (tile_reduction_using_for's identity) and such
    # a row summed to +0 (the spec leaves the sign of a zero sum open: the reference gives +0)
    src = f"fn f(x: {T(dt, *shape)}) -> {T(dt, shape[0], 1)} {{ sum(x, axes=[1], keepdims=true) * 2.0 }}"
    x = _args([shape], dt)[0]
    x[::2] = -0.0
    for cpu in CPUS:
        with applied_scripts() as seen:
            got = mind.compile(src, fn="f", threads=2, cpu=cpu, cache=False)(x)
        assert _grouped(seen)
        assert np.signbit(got[::2]).all() and (got[::2] == 0).all()
        np.testing.assert_allclose(got, mind.compile(src, fn="f", backend="reference")(x), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("red,dt,shape,grouped", [
    ("max", "f64", (300, 432), True), ("sum", "f32", (200, 1376), True), ("sum", "f64", (9, 20, 130), True),
    ("mean", "f32", (150, 1001), True), ("max", "f32", (400, 77), False), ("sum", "f64", (300, 22), False)])
def test_lone_row_reduction(red, dt, shape, grouped):
    # a reduction along the contiguous axis with no consumer is its own group: blocks of rows, each
    # row one reduction of 4 whole vectors of partial results (a blocked sum made one), combined once
    # per row; rows under ROW_VECTORS_TO_GROUP["reduction"] vectors (3 whole tiles) keep the per-op plan (several rows per tile)
    ax = len(shape) - 1
    src = f"fn f(x: {T(dt, *shape)}) -> {T(dt, *shape[:-1])} {{ {red}(x, axes=[{ax}], keepdims=false) }}"
    modules: list[str] = []
    with applied_scripts(modules) as seen:
        _compare(src, _args([shape], dt), "host")
    assert _grouped(seen) == grouped
    if grouped:
        reductions = [s for s in seen if "tile_reduction_using_for" in s]
        assert reductions and all("expand_shape" not in m for m in modules)
        tile, _ = reduction_tile(shape[-1], vector_unit("host").lanes(32 if dt == "f32" else 64))
        assert f"tile_sizes = [{', '.join(['0'] * (len(shape) - 1))}, {tile}]" in reductions[0]


_ONE_ROW_IN_A_CHILD = """
import sys
import numpy as np
sys.path.insert(0, sys.argv[1])
import mind
from test_fusion_groups import _args, _src
src, shapes = _src(sys.argv[2], "f32", (1, int(sys.argv[3])))
args = _args(shapes, "f32", seed=7)
got = mind.compile(src, fn="f", threads=1, schedule="all", cache=False)(*args)
want = mind.compile(src, fn="f", backend="reference")(*args)
np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-5)
print("ok")
"""


@pytest.mark.parametrize("kind,cols", [("softmax", 256), ("layer_norm", 276), ("log_softmax", 290)])
def test_one_row_reductions_stay_per_op_and_do_not_abort(kind, cols):
    # A row reduction of one row as its own group (a max, a sum of exp): its [1] result is read as a
    # scalar (tensor.collapse_shape to rank 0) by the ops after it; MLIR folded their vectorized read
    # through the group's forall into a vector.transfer_read with two indices into a 1-D tensor, and
    # convert-vector-to-llvm asserted: the process aborted (found by test_group_any_shape, 1 x 276
    # layer norm).  A reduction that is its own consumer is grouped only over more than one row.
    import subprocess
    import sys
    here = os.path.dirname(os.path.abspath(__file__))
    r = subprocess.run([sys.executable, "-c", _ONE_ROW_IN_A_CHILD, here, kind, str(cols)], capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr[-2000:]


def test_a_reduction_alone_is_grouped_only_over_more_than_one_row():
    for rows, grouped in [(1, False), (2, True), (300, True)]:
        src = f"fn f(x: {T('f32', rows, 512)}) -> {T('f32', rows)} {{ max(x, axes=[1]) }}"
        modules: list[str] = []
        with applied_scripts(modules):
            mind.compile(src, fn="f", threads=1, schedule="all", cache=False)(_args([(rows, 512)], "f32")[0])
        assert bool(modules) == grouped, (rows, modules[:1])


@pytest.mark.parametrize("cpu", CPUS)
@pytest.mark.parametrize("dt,shape", [("f32", (20, 300, 1000)), ("f32", (8, 304, 926)), ("f64", (6, 259, 130)),
                                      ("f32", (104, 59, 23)), ("f32", (64, 50, 48)), ("f32", (16, 30, 40)),
                                      ("f64", (8, 40, 24))])
def test_a_middle_axis_mean_tiles_its_rows_in_whole_vectors(dt, shape, cpu):
    # the mean's division groups the blocked sum over the middle axis; that sum's levels run along
    # the row in whole vectors with a peeled last tile, as the block's elementwise ops do, never as
    # one vector of the whole row (a 1000-lane vector, 8x slower than torch eager)
    src = f"fn f(x: {T(dt, *shape)}) -> {T(dt, shape[0], shape[2])} {{ mean(x, axes=[1], keepdims=false) }}"
    with applied_scripts() as seen:
        _compare(src, _args([shape], dt), cpu)
    assert _grouped(seen)
    lanes = vector_unit(cpu).lanes(32 if dt == "f32" else 64)
    widths = []
    for s in seen:
        fills = set(re.findall(r"%gp(\d+_\d+) = transform\.structured\.match ops\{\[\"linalg\.fill\"\]\}", s))
        widths += [int(w) for h, w in re.findall(r"tile_using_for %gf(\d+_\d+)d tile_sizes \[[^\]]*?(\d+)\]", s)
                   if h not in fills]  # a fill may take its whole row (fill_tiles)
    assert widths and max(widths) <= 4 * lanes
    if lanes < shape[2] < 4 * lanes and shape[2] % lanes:  # one masked tile covers the sum's row: no peel
        cover = masked_cover(shape[2], lanes)
        assert any(re.search(rf"vectorize %gf\d+_\d+i? vector_sizes \[[^\]]*, {cover}\]", s) for s in seen)
    elif shape[2] % lanes:
        assert any("transform.loop.peel" in s for s in seen)


@pytest.mark.parametrize("cpu", CPUS)
@pytest.mark.parametrize("kind,shape", [("softmax", (165, 3, 48)), ("log_softmax", (30, 8, 33)),
                                        ("layer_norm", (20, 6, 40)), ("softmax", (64, 4, 40))])
def test_short_rows_are_tiled_several_at_a_time(monkeypatch, kind, shape, cpu):
    # a block's rows of at most SHORT_ROW_VECTORS vectors are taken ROWS_PER_SHORT_TILE at a time
    # (the largest divisor of the block's rows up to it): 165 blocks of 3 rows of 48 f32 ran 1.56x
    # faster as one tile each than as 3 tiles of one row; the script differs from one row per tile
    # exactly when the rows are short
    import mind.compiler.backend.cpu.fusion_groups as fusion_groups
    src, shapes = _src(kind, "f32", shape)
    short = shape[-1] <= fusion_groups.SHORT_ROW_VECTORS * vector_unit(cpu).lanes(32)
    scripts, several = {}, fusion_groups.ROWS_PER_SHORT_TILE
    for rows in (several, 1):
        monkeypatch.setattr(fusion_groups, "ROWS_PER_SHORT_TILE", rows)
        with applied_scripts() as seen:
            _compare(src, _args(shapes, "f32"), cpu)
        assert _grouped(seen)
        scripts[rows] = seen
    assert (scripts[1] != scripts[several]) == short


def _per_row_program(kind: str, dt: str, shape: tuple[int, ...]) -> str:
    if kind == "logsumexp":
        return logsumexp_src(dt, shape)
    ax, kept = len(shape) - 1, shape[:-1] + (1,)
    return f"fn f(x: {T(dt, *shape)}) -> {T(dt, *kept)} {{ log(sum(x * x, axes=[{ax}], keepdims=true)) }}"


def _with_special_rows(x: np.ndarray) -> np.ndarray:
    """``x`` with rows holding a NaN, +inf, -inf, only -inf, only zeros, and huge values."""
    rows = x.reshape(-1, x.shape[-1])
    rows[1, 3], rows[2, 0], rows[3, -1] = np.nan, np.inf, -np.inf
    rows[4, :], rows[5, :], rows[6, 1] = -np.inf, 0.0, np.finfo(x.dtype).max / 4
    return x


@pytest.mark.parametrize("cpu", CPUS)
@pytest.mark.parametrize("kind,dt,shape", [("logsumexp", "f32", (2600, 64)), ("logsumexp", "f64", (1200, 40)),
                                           ("logsumexp", "f32", (6, 250, 80)), ("log_of_sums", "f32", (2000, 100)),
                                           ("log_of_sums", "f64", (3, 700, 33))])
def test_per_row_values_take_a_vector_of_rows(monkeypatch, kind, dt, shape, cpu):
    """An op of a group over per-row values kept as [R, 1] (a logsumexp's m + log(s), the log of a
    keepdims row sum) takes a vector of the block's rows per tile, its vectors of [N, 1] cast to
    [N]: one row per tile computed each row's log alone in scalar code (the log of 51545 row sums
    took as long as the sums).  The values are the reference's, special ones included, and the bits
    those of one row per tile."""
    src = _per_row_program(kind, dt, shape)
    x = _with_special_rows(_args([shape], dt)[0])
    modules: list[str] = []
    with applied_scripts(modules) as seen:
        got = mind.compile(src, fn="f", threads=2, cpu=cpu, cache=False)(x)
    assert _grouped(seen)
    lanes = vector_unit(cpu).lanes(64 if dt == "f64" else 32)
    tiles = [[int(v) for v in t.split(", ")] for s in seen
             for t in re.findall(r"= transform\.structured\.tile_using_for %gt\d+d tile_sizes \[([0-9, ]+)\]", s)]
    assert tiles and all(t[-1] == 0 and t[-2] >= lanes for t in tiles), tiles
    assert any("drop_unit_dims_with_shape_cast" in s for s in seen)
    assert modules and not any(re.search(r"(math|arith)\.(?!constant)\w+ .*: vector<\d+x1x", m) for m in modules)
    want = mind.compile(src, fn="f", backend="reference")(x)
    tol = 2e-5 if dt == "f32" else 1e-12
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol, equal_nan=True)
    monkeypatch.setattr(fusion_groups, "unit_rows", lambda *a: False)
    with applied_scripts() as seen:
        one_row = mind.compile(src, fn="f", threads=2, cpu=cpu, cache=False)(x)
    assert _grouped(seen) and not any("drop_unit_dims_with_shape_cast" in s for s in seen)
    np.testing.assert_array_equal(got, one_row)
