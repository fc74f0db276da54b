"""The prebuilt GEMM (kernel_library, gemm_kernel, library_calls): reproducible objects, the kernel
itself against float64 numpy on edge shapes, strides and special values, and the calls programs make."""

from __future__ import annotations

import ctypes
import hashlib
import json
import re
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import kernels as K
from mind.compiler.backend.cpu import host
from mind.compiler.backend.cpu import kernel_library as KL
from mind.compiler.backend.cpu.abi import descriptor_type
from mind.compiler.backend.cpu.engine import compile_kernel, mlir_to_llvm_ir
from mind.compiler.backend.cpu.gemm_kernel import (LAYOUTS, PACK_A_MAX_BYTES, PACK_A_MIN_BLOCKS, PACK_A_MIN_K,
                                                   PACK_A_STRIDE_BYTES, VARIANTS, GemmShape, gemm_function,
                                                   gemm_symbol)
from mind.compiler.backend.cpu.options import CpuOptions
from mind.diagnostics import MindError
from mind.spec.dtypes import DType

HOST = KL.host_isa()
RUNNABLE = [isa for isa in KL.ISAS if KL._REQUIRED_FLAGS[isa] <= host.cpu_flags()]
needs_library = pytest.mark.skipif(HOST is None, reason="this CPU runs none of the prebuilt GEMM's instruction sets")
EPS = {"f32": 2.0**-24, "f64": 2.0**-53}
NP = {"f32": np.float32, "f64": np.float64}


# ------------------------------------------------------------------ the shipped objects

def test_manifest_describes_the_shipped_files_and_their_sources():
    """Hashes of the files and of the sources they are built from: an edit of gemm_kernel,
    gemm_driver or kmpc_gomp without ``--write`` fails here (no MLIR needed)."""
    manifest = json.load(open(KL.MANIFEST, encoding="utf-8"))
    assert manifest["format"] == KL.MANIFEST_FORMAT
    assert list(manifest["objects"]) == sorted(KL.OBJECTS) and set(KL.OBJECTS) >= {f"gemm-{i}" for i in KL.ISAS}
    assert sorted(f for f in os.listdir(KL.PREBUILT_DIR) if f.endswith(".o")) == \
        sorted(spec.file for spec in KL.OBJECTS.values())  # nothing stale ships
    for name, entry in manifest["objects"].items():
        spec = KL.OBJECTS[name]
        data = open(os.path.join(KL.PREBUILT_DIR, entry["file"]), "rb").read()
        assert hashlib.sha256(data).hexdigest() == entry["sha256"] and len(data) == entry["bytes"]
        assert hashlib.sha256(KL.object_source(name).encode()).hexdigest() == entry["source_sha256"]
        assert (entry["target"], entry["language"], entry["file"]) == (spec.target, spec.language, spec.file)
        assert entry["symbols"] == sorted(spec.defines())
    for isa in KL.ISAS:
        assert {gemm_symbol(e) for e in VARIANTS[isa]} <= KL.OBJECTS[KL.gemm_object(isa)].defines()


def test_rebuild_is_byte_identical_in_a_fresh_process():
    """What an auditor runs: every object rebuilt from source equals the shipped one (another hash
    seed than this process's)."""
    env = dict(os.environ, PYTHONHASHSEED="4242")
    r = subprocess.run([sys.executable, "-m", "mind.compiler.backend.cpu.kernel_library", "--check"],
                       capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.count("matches the shipped object") == len(KL.OBJECTS)


def _damaged_copy(tmp_path, monkeypatch, victim: str | None):
    """A copy of the prebuilt folder used in place of the shipped one, with one byte of the object
    ``victim`` flipped."""
    shutil.copytree(KL.PREBUILT_DIR, tmp_path / "prebuilt")
    if victim is not None:
        path = tmp_path / "prebuilt" / KL.OBJECTS[victim].file
        data = bytearray(path.read_bytes())
        data[len(data) // 2] ^= 0xFF
        path.write_bytes(bytes(data))
    monkeypatch.setattr(KL, "PREBUILT_DIR", str(tmp_path / "prebuilt"))
    monkeypatch.setattr(KL, "MANIFEST", str(tmp_path / "prebuilt" / "MANIFEST.json"))
    KL._manifest.cache_clear()
    KL.object_bytes.cache_clear()


@pytest.fixture
def restore_library():
    yield
    KL._manifest.cache_clear()
    KL.object_bytes.cache_clear()


def test_a_damaged_object_is_refused(tmp_path, monkeypatch, restore_library):
    _damaged_copy(tmp_path, monkeypatch, "gemm-x86-64-v4")
    with pytest.raises(KL.LibraryError, match="does not match its SHA-256"):
        KL.object_bytes("gemm-x86-64-v4")
    if HOST == "x86-64-v4":
        assert CpuOptions.resolve(matmul="library").library == HOST  # the manifest is intact: keys work
        with pytest.raises(MindError, match="E6012") as info:  # the object is not linked
            compile_kernel(K.matmul(64, 64, 64), "mm", CpuOptions.resolve(threads=1, cache=False, matmul="library"))
        assert "MIND_CPU_MATMUL=schedule" in str(info.value)
    (tmp_path / "prebuilt" / "MANIFEST.json").write_text("{}")
    KL._manifest.cache_clear()
    with pytest.raises(KL.LibraryError, match="not in format"):
        KL.object_digest("gemm-parallel")
    if HOST is not None:
        with pytest.raises(MindError, match="E6012"):
            CpuOptions.resolve(matmul="library")


def test_a_damaged_openmp_object_is_refused_with_its_own_way_out(tmp_path, monkeypatch, restore_library):
    from mind.compiler.backend.cpu import openmp
    if openmp.runtime_path("gomp") is None:
        pytest.skip("GCC's libgomp is not installed")
    _damaged_copy(tmp_path, monkeypatch, "openmp-gomp")
    with pytest.raises(MindError, match="E6012") as info:
        compile_kernel(K.sigmoid_chain((64, 256)), "chain", CpuOptions.resolve(threads=2, cache=False, openmp="gomp"))
    assert "MIND_OPENMP=kmpc" in str(info.value) and "threads=1" in str(info.value)
    compile_kernel(K.sigmoid_chain((64, 256)), "chain", CpuOptions.resolve(threads=1, cache=False))  # no OpenMP: not linked


def test_host_isa_reads_the_cpu_flags(monkeypatch):
    v3 = KL._REQUIRED_FLAGS["x86-64-v3"]
    for flags, want in ((frozenset(), None), (v3, "x86-64-v3"), (v3 - {"fma"}, None),
                        (KL._REQUIRED_FLAGS["x86-64-v4"], "x86-64-v4")):
        monkeypatch.setattr(host, "cpu_flags", lambda flags=flags: flags)
        assert KL.host_isa() == want


@pytest.mark.parametrize("field", ["k_unroll", "prefetch_rows", "a_block"])
def test_gemm_variant_rejects_impossible_figures(field):
    """A variant's counts are checked where it is made: an unroll below one step, a negative
    prefetch distance or row block is a ``ValueError``, not a kernel with a loop of no steps."""
    with pytest.raises(ValueError, match="unsupported GEMM variant"):
        GemmShape("f32", 16, 6, vectors=4, k_slab=512, n_block=64, **{field: 0 if field == "k_unroll" else -1})


def test_policy_choices():
    assert KL.select_isa("generic", "library") is None  # portable objects call nothing host-specific
    assert KL.select_isa("host", "schedule") is None
    assert KL.select_isa("host", "library") == HOST
    with pytest.raises(ValueError):
        KL.select_isa("host", "blas")


def test_unknown_matmul_setting_is_a_usage_error(monkeypatch):
    monkeypatch.setenv("MIND_CPU_MATMUL", "blas")
    with pytest.raises(MindError, match="E7002") as info:
        CpuOptions.resolve(threads=1, cache=False)
    assert "MIND_CPU_MATMUL" in str(info.value)
    with pytest.raises(MindError, match="E7002"):
        CpuOptions.resolve(threads=1, cache=False, matmul="blas")


def test_cache_keys_name_what_matmuls_call():
    def key(threads: int, matmul: str) -> str:
        return CpuOptions.resolve(matmul=matmul).replace(threads=threads).fingerprint()["matmul"]
    assert key(1, "schedule") == key(2, "schedule") == "schedule"
    if HOST is not None:
        gemm = KL.object_digest(KL.gemm_object(HOST))
        assert key(1, "library") == f"library:{HOST}:{gemm}"
        assert key(2, "library") == f"library:{HOST}:{gemm}:{KL.object_digest('gemm-parallel')}"


# ------------------------------------------------------------------ the kernel, called directly

_JITS: dict[str, object] = {}


def _gemm(isa: str, elem: str, layout: str = ""):
    from mind.compiler.backend.cpu.codegen import JitObject
    jit = _JITS.get(isa)
    if jit is None:
        obj = KL.gemm_object(isa)
        jit = _JITS[isa] = JitObject([KL.object_bytes(obj)],
                                     exports=sorted(s for s in KL.OBJECTS[obj].defines() if s.startswith("_mlir_ciface_")))
    addr = jit.address("_mlir_ciface_" + gemm_symbol(elem, layout))
    assert addr
    return ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_bool)(addr)


def _descriptor(view: np.ndarray, base: np.ndarray, unit_columns: bool = True):
    """A strided descriptor of ``view`` (a 2-D view of ``base``, with unit column stride unless
    ``unit_columns`` is False)."""
    d = descriptor_type(2)()
    d.allocated = d.aligned = base.ctypes.data
    item = base.itemsize
    d.offset = (view.ctypes.data - base.ctypes.data) // item
    d.sizes[0], d.sizes[1] = view.shape
    d.strides[0], d.strides[1] = view.strides[0] // item, view.strides[1] // item
    assert d.strides[1] == 1 or not unit_columns
    return d


def _call(isa, elem, a_view, a_base, b_view, b_base, c_view, c_base, accumulate, layout=""):
    descs = [_descriptor(a_view, a_base, layout != "strided_lhs"), _descriptor(b_view, b_base, layout != "strided_rhs"),
             _descriptor(c_view, c_base)]
    _gemm(isa, elem, layout)(*[ctypes.addressof(d) for d in descs], accumulate)


def _placed(rng, rows, cols, dtype, pad_rows, pad_cols, fill):
    """A ``rows x cols`` view at an offset inside a larger array filled with ``fill`` elsewhere."""
    base = np.full((rows + pad_rows + 1, cols + pad_cols), fill, dtype=dtype)
    view = base[1:1 + rows, pad_cols:pad_cols + cols]
    view[...] = rng.standard_normal((rows, cols)).astype(dtype)
    return view, base


def _check_gemm(isa, elem, m, n, k, pads, accumulate, seed=0, layout="", b_steps=(1, 1)):
    """C (+)= A @ B on views at offsets in NaN (a read outside them would show); ``layout``
    "strided_lhs" / "strided_rhs": A (B) column-major, the transpose of such a view, or for B with
    ``b_steps`` other than (1, 1), every ``b_steps``-th row and column of one (any strides).
    Returns C."""
    rng = np.random.default_rng(seed)
    dt = NP[elem]
    if layout == "strided_lhs":  # A column-major: the transpose of a placed K x M view
        at, abase = _placed(rng, k, m, dt, pads[0], pads[1], np.nan)
        a = at.T
    else:
        a, abase = _placed(rng, m, k, dt, pads[0], pads[1], np.nan)  # a read outside the views would be NaN
    if layout == "strided_rhs" and b_steps == (1, 1):
        bt, bbase = _placed(rng, n, k, dt, pads[2], pads[3], np.nan)
        b = bt.T
    elif layout == "strided_rhs":
        wide, bbase = _placed(rng, k * b_steps[0], n * b_steps[1], dt, pads[2], pads[3], np.nan)
        b = wide[::b_steps[0], ::b_steps[1]]
    else:
        b, bbase = _placed(rng, k, n, dt, pads[2], pads[3], np.nan)
    c, cbase = _placed(rng, m, n, dt, pads[4], pads[5], 7.0)
    if not accumulate:
        c[...] = np.nan  # overwritten, never read
    c0 = c.astype(np.float64)
    outside = cbase.copy()
    _call(isa, elem, a, abase, b, bbase, c, cbase, accumulate, layout)
    exact = a.astype(np.float64) @ b.astype(np.float64) + (c0 if accumulate else 0.0)
    bound = (k + 1) * EPS[elem] * (np.abs(a.astype(np.float64)) @ np.abs(b.astype(np.float64)) +
                                   (np.abs(c0) if accumulate else 0.0))
    assert np.all(np.abs(c - exact) <= bound), (isa, elem, m, n, k, pads, accumulate)
    mask = np.ones(cbase.shape, bool)
    mask[1:1 + m, pads[5]:pads[5] + n] = False
    np.testing.assert_array_equal(cbase[mask], outside[mask])  # masked edges write nothing else
    return c


@pytest.mark.parametrize("isa", RUNNABLE)
@pytest.mark.parametrize("elem", ["f32", "f64"])
def test_gemm_edges_of_every_tile(isa, elem):
    g = VARIANTS[isa][elem]
    ms = sorted({1, g.rows - 1, g.rows, g.rows + 1, 2 * g.rows + 3})
    # every count of vectors a masked edge tile takes, the tile's width, a second column block
    ns = sorted({1, g.lanes - 1, g.lanes, g.width - 1, g.width, g.width + 1, g.n_block + 1,
                 *(v * g.lanes + 1 for v in range(1, g.vectors))})
    ks = [1, g.k_slab - 1, g.k_slab + 1]
    for m in ms:
        for n in ns:
            for k in ks:
                _check_gemm(isa, elem, m, n, k, (0, 0, 0, 0, 0, 0), accumulate=(m + n + k) % 2 == 0)
    # every count of rows a band leaves over (a band of exactly that many), after two whole bands:
    # with B's blocks read in place, and packed (a row of 512 f32 / 256 f64 is 2 KiB: B's lines
    # conflict in L1, so two bands pack them; ``PACK_CONFLICT_BYTES``)
    row_2k = 2048 * 8 // DType(elem).bits
    for rest in range(g.rows):
        for n in (g.width + 1, row_2k + 3, row_2k):
            _check_gemm(isa, elem, 2 * g.rows + rest, n, g.k_slab + 1, (0, 0, 0, 0, 0, 0), accumulate=rest % 2 == 0)
    # row blocks (``a_block``): three of a whole slab's rows, the last one short, with the last
    # rows of a band in it; the second slab (one k) takes all rows in one block
    if g.a_block:
        per_block = g.a_block // (g.k_slab * DType(elem).bits // 8)
        for m in (2 * per_block + g.rows + 1, per_block + 1):
            _check_gemm(isa, elem, m, g.width + 1, g.k_slab + 1, (0, 0, 0, 0, 0, 0), accumulate=m % 2 == 0)
    # a B whose rows start off the vectors' grid (a column of padding: odd offsets) from
    # ``pack_unaligned`` row tiles on: packed; one band fewer: read in place
    if g.pack_unaligned:
        for m in (g.pack_unaligned * g.rows, g.pack_unaligned * g.rows - 1):
            for pads in ((0, 0, 0, 1, 0, 0), (0, 0, 0, 0, 0, 0)):
                _check_gemm(isa, elem, m, g.width + 3, 70, pads, accumulate=m % 2 == 0)


@pytest.mark.parametrize("isa", sorted(VARIANTS))
@pytest.mark.parametrize("elem", ["f32", "f64"])
def test_late_c_tiles_read_c_after_their_k_loop(isa, elem):
    """A variant with ``late_c`` starts a tile's accumulators from zeros, prefetches its C lines and
    reads C only after the k loop; one without reads C before it and prefetches nothing.  (The
    values of both, over several slabs and with ``accumulate``, are the tests above and below.)"""
    g = VARIANTS[isa][elem]
    text = gemm_function("g", g)
    first_loop = text.index("scf.for %k = ")
    first_c = min(text.index(op) for op in ("vector.load %C[", "vector.maskedload %C["))
    assert (first_c > first_loop) == g.late_c
    assert ("memref.prefetch %C[" in text) == g.late_c
    # prefetched only where the tile reads C after its loop: a C it only writes (the first slab of
    # a call that does not accumulate) is left to the stores (a prefetch for writing held the k
    # loop of short slabs: a K of 64 ran 8-15 % slower with it)
    lines = text.splitlines()
    for at, line in enumerate(lines):
        if "memref.prefetch %C[" in line:
            depth = len(line) - len(line.lstrip())
            enclosing = next(x for x in reversed(lines[:at]) if len(x) - len(x.lstrip()) < depth)
            assert enclosing.strip() == "scf.if %load_c {"


@pytest.mark.parametrize("isa", sorted(VARIANTS))
@pytest.mark.parametrize("elem", ["f32", "f64"])
@pytest.mark.parametrize("layout", LAYOUTS)
def test_edge_tiles_mask_only_their_last_vector(isa, elem, layout):
    """A tile of the columns a block leaves (``_edge``) has as many vectors as they need, all but the
    last whole: its k loop loads B with one masked load at most, and the tiles of two vectors or
    more load the others unmasked.  (Their values, for every count of vectors: the edge tests.)"""
    g = VARIANTS[isa][elem]
    text = gemm_function("g", g, layout)
    bodies = [body.split("scf.yield")[0] for body in text.split("scf.for %k = ")[1:]]
    masked = [b for b in bodies if "vector.maskedload" in b]
    # one masked load per k step: of each step's loads of B (one per vector of the tile), one
    assert masked and all(b.count("vector.maskedload") * (b.count("vector.fma") // b.count("vector.broadcast"))
                          == len(re.findall(r"vector\.(masked)?load %B(p)?\[", b)) for b in masked)
    assert any(re.search(r"vector\.load %B(p)?\[", b) for b in masked)


@pytest.mark.parametrize("isa", sorted(VARIANTS))
@pytest.mark.parametrize("elem", ["f32", "f64"])
@pytest.mark.parametrize("layout", LAYOUTS)
def test_tiles_that_read_the_packed_block_unroll_k(isa, elem, layout):
    """The k loop of a tile that reads the packed block of B takes ``k_unroll`` steps per iteration
    and a loop of single steps takes the rest; a tile that reads B in place takes one step per
    iteration (unrolled, its prefetches and row addresses cost more than they saved).  (The values,
    with K around the slab and every remainder: the tests above.)"""
    g = VARIANTS[isa][elem]
    bodies = [body.split("scf.yield")[0] for body in gemm_function("g", g, layout).split("scf.for %k = ")[1:]]

    def steps(body: str) -> int:
        return 1 + len(re.findall(r"%k\d+ = arith\.addi %k, ", body))

    packed = [steps(b) for b in bodies if "%Bp[" in b]
    in_place = [steps(b) for b in bodies if "%Bp[" not in b]
    assert packed and set(packed) == {1, g.k_unroll}
    assert packed.count(g.k_unroll) == packed.count(1) or g.k_unroll == 1
    assert set(in_place) <= {1}


@pytest.mark.parametrize("isa", sorted(VARIANTS))
@pytest.mark.parametrize("elem", ["f32", "f64"])
def test_tiles_that_read_b_in_place_prefetch_its_rows_ahead(isa, elem):
    """A variant with ``prefetch_rows`` prefetches, in the k loop of each whole tile that reads B in
    place, one line per 64 bytes of the tile's columns ``prefetch_rows`` rows ahead, unclamped: that
    loop stops ``prefetch_rows`` steps before the slab's end and a loop without prefetches takes
    those; the tiles of a packed block and the masked edge tiles prefetch nothing, nor does a
    variant without it (AVX2)."""
    g = VARIANTS[isa][elem]
    text = gemm_function("g", g)
    loops = text.split("scf.for %k = ")[1:]
    in_place = [body for body in loops if "vector.load %B[%k" in body.split("scf.yield")[0]
                and "vector.maskedload" not in body.split("scf.yield")[0]]  # whole tiles; the edge tiles mask
    others = [body for body in loops if body not in in_place]
    assert in_place and others
    per_line = max(1, 64 // (g.lanes * g.elem_bytes))
    counts = [body.split("scf.yield")[0].count("memref.prefetch %B[") for body in in_place]
    assert all("arith.minui" not in body.split("scf.yield")[0] for body in in_place)
    if g.prefetch_rows:  # a prefetching loop, then the last rows' loop, per tile
        assert counts == [g.vectors // per_line, 0] * (len(in_place) // 2) and len(in_place) % 2 == 0
        assert f"arith.constant {g.prefetch_rows} : index" in text and "arith.maxsi" in text
    else:
        assert set(counts) == {0}
    assert all("memref.prefetch %B[" not in body.split("scf.yield")[0] for body in others)


@pytest.mark.parametrize("isa", RUNNABLE)
@pytest.mark.parametrize("elem", ["f32", "f64"])
def test_gemm_of_few_rows_far_apart_prefetched_to_the_slabs_end(isa, elem):
    """Few row tiles (B read in place), rows of B 2 KiB apart and more (beyond the stride
    prefetchers, what prefetching is for), and slabs whose last rows are fewer than the prefetch
    distance: the values of every row band, whole and short, and nothing written outside C."""
    g = VARIANTS[isa][elem]
    row_2k = 2048 * 8 // DType(elem).bits
    for m in (1, g.rows - 1, 2 * g.rows + 1):
        for n in (row_2k + g.lanes + 3, 2 * row_2k + 1):
            for k in (g.k_slab + 3, 2 * g.k_slab + max(g.prefetch_rows, 1) - 1, 5):
                _check_gemm(isa, elem, m, n, k, (0, 1, 0, 2, 0, 0), accumulate=(m + k) % 2 == 1)


@pytest.mark.parametrize("isa", RUNNABLE)
@given(m=st.integers(1, 40), n=st.integers(1, 300), k=st.integers(1, 1100),
       pads=st.tuples(*[st.integers(0, 9)] * 6), accumulate=st.booleans(), elem=st.sampled_from(["f32", "f64"]))
def test_gemm_on_strided_views_matches_float64(isa, m, n, k, pads, accumulate, elem):
    _check_gemm(isa, elem, m, n, k, pads, accumulate, seed=m * 7 + n)


@pytest.mark.parametrize("isa", RUNNABLE)
@given(m=st.integers(1, 40), n=st.integers(1, 300), k=st.integers(1, 1100),
       pads=st.tuples(*[st.integers(0, 9)] * 6), accumulate=st.booleans(), elem=st.sampled_from(["f32", "f64"]))
def test_strided_lhs_gemm_reads_a_transposed_view(isa, m, n, k, pads, accumulate, elem):
    """The ``strided_lhs`` variant with A column-major (the transpose of a view at an offset, NaN
    around it): what ``matmul(transpose(a), b)`` calls without materializing the transpose."""
    _check_gemm(isa, elem, m, n, k, pads, accumulate, seed=m * 5 + k, layout="strided_lhs")


@pytest.mark.parametrize("isa", RUNNABLE)
@pytest.mark.parametrize("elem", ["f32", "f64"])
def test_strided_lhs_gemm_packs_a_whose_columns_lie_far_apart(isa, elem):
    """A transposed A whose columns lie ``PACK_A_STRIDE_BYTES`` or more apart, with ``PACK_A_MIN_K``
    k or more and ``PACK_A_MIN_BLOCKS`` column blocks or more, is copied into bands (``_pack_a``):
    its values against float64 over several slabs (the last one short), with every count of rows
    the last band keeps, on each side of each threshold, and (``a_block``) over several row blocks;
    and bit for bit what the same A gives read in place (its columns nearer): the copy changes the
    order of no sum."""
    g = VARIANTS[isa][elem]
    far = PACK_A_STRIDE_BYTES * 8 // DType(elem).bits  # elements between A's columns
    n = (PACK_A_MIN_BLOCKS - 1) * g.n_block + g.lanes + 3  # the fewest blocks; a masked edge in the last
    k = g.k_slab + PACK_A_MIN_K // 2 + 1
    assert k >= PACK_A_MIN_K
    for rest in range(g.rows):
        m = 4 * g.rows + rest
        packed = _check_gemm(isa, elem, m, n, k, (0, far, 0, 0, 0, 0), False, seed=rest, layout="strided_lhs")
        in_place = _check_gemm(isa, elem, m, n, k, (0, 0, 0, 0, 0, 0), False, seed=rest, layout="strided_lhs")
        np.testing.assert_array_equal(packed, in_place)
    # each threshold from both sides: the columns' distance, the k loop, the column blocks
    m, edge = 2 * g.rows + 1, (PACK_A_MIN_BLOCKS - 1) * g.n_block
    for kk, nn, stride in ((k, n, far - 1), (k, n, far), (PACK_A_MIN_K - 1, n, far), (PACK_A_MIN_K, n, far),
                           (k, edge, far), (k, edge + 1, far)):
        _check_gemm(isa, elem, m, nn, kk, (0, stride - m, 0, 0, 0, 0), True, seed=kk + nn, layout="strided_lhs")
    if g.a_block:  # three row blocks of a whole slab, the last one short and ending in a short band
        per_block = g.a_block // (g.k_slab * DType(elem).bits // 8)
        _check_gemm(isa, elem, 2 * per_block + g.rows + 1, n, k, (0, 1, 0, 0, 0, 0), True, layout="strided_lhs")
    else:  # one block of every row: at most PACK_A_MAX_BYTES of it, then read in place (each side)
        most = PACK_A_MAX_BYTES * 8 // DType(elem).bits // g.k_slab // g.rows * g.rows
        for m in (most, most + 1):
            _check_gemm(isa, elem, m, n, g.k_slab + 3, (0, 1, 0, 0, 0, 0), m % 2 == 0, layout="strided_lhs")


@pytest.mark.parametrize("isa", sorted(VARIANTS))
@pytest.mark.parametrize("elem", ["f32", "f64"])
@pytest.mark.parametrize("layout", LAYOUTS)
def test_only_the_strided_lhs_gemm_packs_a(isa, elem, layout):
    """The ``strided_lhs`` GEMM has the copy of A (``_pack_a``) and tiles that read its bands, besides
    the tiles that read A in place; the other layouts read A in place only."""
    text = gemm_function("g", VARIANTS[isa][elem], layout)
    assert ("memref.alloc(" in text) == (layout == "strided_lhs")
    assert ("%Ap[" in text) == (layout == "strided_lhs")
    assert ("memref.load %A[" in text)  # in place: every layout, and the strided_lhs one below the thresholds


@pytest.mark.parametrize("isa", RUNNABLE)
@given(m=st.integers(1, 40), n=st.integers(1, 300), k=st.integers(1, 1100),
       pads=st.tuples(*[st.integers(0, 9)] * 6), accumulate=st.booleans(), elem=st.sampled_from(["f32", "f64"]),
       steps=st.sampled_from([(1, 1), (1, 1), (1, 1), (2, 1), (1, 3), (2, 2)]))
def test_strided_rhs_gemm_reads_a_transposed_view(isa, m, n, k, pads, accumulate, elem, steps):
    """The ``strided_rhs`` variant with B column-major (the transpose of a view at an offset, NaN
    around it: the pack's in-register transposes, its element-by-element k and column tails), or
    with B of other strides (every element copied): what ``matmul(a, transpose(b))`` calls without
    materializing the transpose."""
    _check_gemm(isa, elem, m, n, k, pads, accumulate, seed=m * 3 + n, layout="strided_rhs", b_steps=steps)


@pytest.mark.parametrize("isa", RUNNABLE)
@pytest.mark.parametrize("elem", ["f32", "f64"])
def test_strided_rhs_gemm_edges_of_every_tile(isa, elem):
    """Every edge of the transposing pack: k around whole vectors and the K slab, columns around whole
    tiles and the column block, rows around the register tile."""
    g = VARIANTS[isa][elem]
    for m in sorted({1, g.rows - 1, g.rows + 1, 2 * g.rows + 3}):
        for n in sorted({1, g.lanes + 1, g.width, g.width + 1, g.n_block + 1, 2 * g.n_block + 1,
                         *(v * g.lanes + 1 for v in range(1, g.vectors))}):
            for k in sorted({1, g.lanes - 1, g.lanes, g.lanes + 1, g.k_slab - 1, g.k_slab + 1, g.k_slab + 4}):
                _check_gemm(isa, elem, m, n, k, (1, 2, 3, 1, 0, 2), accumulate=(m + n + k) % 2 == 0,
                            layout="strided_rhs")


@pytest.mark.parametrize("isa", RUNNABLE)
def test_gemm_propagates_nan_and_inf_like_the_reference(isa):
    from mind.calling import run_reference
    from mind.ir.parser import parse_module
    m, k, n = 9, 130, 35
    rng = np.random.default_rng(5)
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    a[2, 7] = np.nan
    a[4, 0] = np.inf
    b[0, 3] = 0.0  # inf * 0 = NaN in column 3 of row 4
    b[5, 33] = -np.inf
    c = np.empty((m, n), np.float32)
    _call(isa, "f32", a, a, b, b, c, c, False)
    fn = parse_module(f"func @main(%a: f32[{m}, {k}], %b: f32[{k}, {n}]) -> (f32[{m}, {n}]) {{\n"
                      f"  %0 = matmul(%a, %b) : f32[{m}, {n}]\n  return %0\n}}\n").functions[0]
    want = run_reference(fn, [a, b])[0]
    np.testing.assert_array_equal(np.isnan(c), np.isnan(want))
    np.testing.assert_array_equal(np.isinf(c) & (c > 0), np.isinf(want) & (want > 0))
    np.testing.assert_array_equal(np.isinf(c) & (c < 0), np.isinf(want) & (want < 0))


# ------------------------------------------------------------------ the threaded driver, called directly

def _driver(isa: str, elem: str, layout: str = ""):
    """The driver of ``elem`` (and ``layout``) and the address of the serial switch it reads, loaded in-process with
    the GEMM of ``isa`` and a one-line module defining the switch (as a kernel's does)."""
    from mind.compiler.backend.cpu import openmp
    from mind.compiler.backend.cpu.codegen import JitObject, optimize_and_emit_objects
    from mind.compiler.backend.cpu.gemm_driver import DRIVER_NEEDS, driver_symbol
    from mind.compiler.backend.cpu.kmpc_gomp import SERIAL_SWITCH
    abi = openmp.preferred_abi()
    if abi is None:
        pytest.skip("no OpenMP runtime")
    key = f"driver-{isa}"
    jit = _JITS.get(key)
    if jit is None:
        openmp.load_openmp_runtime(abi)
        switch = optimize_and_emit_objects(f"@{SERIAL_SWITCH} = global i32 0, align 4\n", "host", "fast")
        jit = _JITS[key] = JitObject([KL.object_bytes(KL.gemm_object(isa)), KL.object_bytes("gemm-parallel"), *switch],
                                     [openmp.runtime_path(abi)], DRIVER_NEEDS,
                                     sorted(KL.OBJECTS["gemm-parallel"].defines()) + [SERIAL_SWITCH])
    desc = [ctypes.c_void_p, ctypes.c_void_p] + [ctypes.c_int64] * 5
    fn = ctypes.CFUNCTYPE(None, *(desc * 3), ctypes.c_bool, ctypes.c_int32, ctypes.c_int32, ctypes.c_int64)(
        jit.address(driver_symbol(elem, layout)))
    return fn, jit.data_address(SERIAL_SWITCH)


def _expanded(view: np.ndarray, base: np.ndarray) -> list:
    d = _descriptor(view, base, unit_columns=False)
    return [d.allocated, d.aligned, d.offset, d.sizes[0], d.sizes[1], d.strides[0], d.strides[1]]


@pytest.mark.parametrize("isa", RUNNABLE)
@pytest.mark.parametrize("elem", ["f32", "f64"])
@pytest.mark.parametrize("serial", [False, True])
@pytest.mark.parametrize("layout", ["", "strided_rhs"])
def test_driver_blocks_compute_the_serial_gemms_bits(isa, elem, serial, layout):
    """Every split (rows or columns, more parts than threads, empty trailing parts, blocks that are
    not whole tiles), with the serial switch off and on: the bits of one serial call, and nothing
    outside C written; B row-major, or column-major (``strided_rhs``: a block of columns is a block
    of the transposed matrix's rows)."""
    fn, switch = _driver(isa, elem, layout)
    g = VARIANTS[isa][elem]
    rng = np.random.default_rng(11)
    dt = NP[elem]
    def whole_tiles(extent: int, parts: int, tile: int) -> int:  # as library_calls._split
        return -(-(-(-extent // tile)) // parts) * tile
    cases = [(64, 70, 33, 0, 2, whole_tiles(64, 2, g.rows)), (70, 64, 200, 0, 3, whole_tiles(70, 3, g.rows)),
             (9, 500, 40, 1, 2, whole_tiles(500, 2, g.width)), (9, 500, 40, 1, 5, whole_tiles(500, 5, g.width)),
             (50, 50, 20, 0, 4, 40), (17, 31, 5, 1, 3, 11), (8, 8, 8, 0, 1, 8)]  # empty parts; odd blocks
    assert all(parts * block >= (m if axis == 0 else n) for m, n, _, axis, parts, block in cases)
    ctypes.c_int32.from_address(switch).value = int(serial)
    try:
        for m, n, k, axis, parts, block in cases:
            for accumulate in (False, True):
                a, abase = _placed(rng, m, k, dt, 2, 3, np.nan)
                if layout:
                    bt, bbase = _placed(rng, n, k, dt, 1, 5, np.nan)
                    b = bt.T
                else:
                    b, bbase = _placed(rng, k, n, dt, 1, 5, np.nan)
                c, cbase = _placed(rng, m, n, dt, 2, 1, 7.0)
                want_base = cbase.copy()
                want = want_base[1:1 + m, 1:1 + n]
                _call(isa, elem, a, abase, b, bbase, want, want_base, accumulate, layout)
                fn(*_expanded(a, abase), *_expanded(b, bbase), *_expanded(c, cbase), accumulate, parts, axis, block)
                np.testing.assert_array_equal(cbase, want_base, err_msg=str((m, n, k, axis, parts, block)))
    finally:
        ctypes.c_int32.from_address(switch).value = 0


# ------------------------------------------------------------------ programs that call it

def _bound(a, b, eps=EPS["f32"]):
    return (a.shape[1] + 1) * eps * (np.abs(a.astype(np.float64)) @ np.abs(b.astype(np.float64)))


@needs_library
@pytest.mark.parametrize("m,k,n,threads", [
    (256, 64, 64, 2),    # rows split between the threads
    (16, 64, 1024, 2),   # columns split (more column tiles than row tiles)
    (37, 300, 1000, 2),  # uneven blocks
    (100, 3, 250, 1),
])
def test_programs_call_the_library(m, k, n, threads):
    rng = np.random.default_rng(m)
    a = rng.standard_normal((m, k), dtype=np.float32)
    b = rng.standard_normal((k, n), dtype=np.float32)
    kern = compile_kernel(K.matmul(m, k, n), "mm", CpuOptions.resolve(threads=threads, cache=False, matmul="library"))
    assert kern.matmul_library == HOST
    assert np.all(np.abs(kern(a, b) - a.astype(np.float64) @ b) <= _bound(a, b))
    llvm_ir = mlir_to_llvm_ir(K.matmul(m, k, n), "mm", CpuOptions.resolve(threads=threads)).llvm_ir
    assert "declare void @mind_gemm_f32(" in llvm_ir
    assert ("call void @mind_gemm_f32_parallel(" in llvm_ir) == (threads > 1)  # the split is prebuilt,
    assert "__kmpc" not in llvm_ir  # so the kernel has no OpenMP region of its own
    assert "store <" not in llvm_ir  # no zero fill of the output: the call overwrites it


@needs_library
@pytest.mark.parametrize("elem", ["f32", "f64"])
@pytest.mark.parametrize("m,k,n,threads", [(37, 51, 29, 1), (256, 64, 70, 2), (16, 300, 1000, 2), (9, 2, 5, 1)])
def test_transposed_lhs_is_read_in_place(m, k, n, threads, elem):
    """``matmul(transpose(a), b)`` calls the ``strided_lhs`` GEMM on ``a`` itself (no transpose in
    the kernel's loops), serial or split by the driver; a transpose that is also a result still is."""
    import mind
    from mind.compiler.backend.cpu.api import emit_stage
    rng = np.random.default_rng(m + n)
    a = rng.standard_normal((k, m)).astype(NP[elem])
    b = rng.standard_normal((k, n)).astype(NP[elem])
    t = f"Tensor<{elem}, [{k}, {m}]>"
    src = (f"fn f(a: {t}, b: Tensor<{elem}, [{k}, {n}]>) -> Tensor<{elem}, [{m}, {n}]> {{ matmul(transpose(a), b) }}\n"
           f"fn g(a: {t}, b: Tensor<{elem}, [{k}, {n}]>) -> (Tensor<{elem}, [{m}, {n}]>, Tensor<{elem}, [{m}, {k}]>) {{\n"
           f"  let at = transpose(a);\n  (matmul(at, b), at)\n}}")
    bound = _bound(a.T, b, EPS[elem])
    for fn in ("f", "g"):
        outs = mind.compile(src, fn=fn, threads=threads, cache=False)(a, b)
        got = outs if fn == "f" else outs[0]
        assert np.all(np.abs(got - a.T.astype(np.float64) @ b) <= bound), fn
        if fn == "g":
            np.testing.assert_array_equal(outs[1], a.T)
    llvm_ir = emit_stage(mind._function_of(src, "f"), "llvm", threads=threads)
    symbol = gemm_symbol(elem, "strided_lhs") + ("_parallel" if threads > 1 and m * n * k >= 1 << 20 else "")
    assert f"call void @{symbol}(" in llvm_ir
    assert "shufflevector" not in llvm_ir and "load <" not in llvm_ir  # nothing transposed by the kernel


@needs_library
@pytest.mark.parametrize("elem", ["f32", "f64"])
@pytest.mark.parametrize("batch,m,k,n,threads", [((), 37, 51, 29, 1), ((), 256, 64, 70, 2), ((), 16, 300, 1000, 2),
                                                 ((), 9, 2, 5, 1), ((3,), 33, 65, 17, 1), ((5,), 64, 40, 130, 2),
                                                 ((1,), 130, 300, 40, 2)])
def test_transposed_rhs_is_read_in_place(batch, m, k, n, threads, elem):
    """``matmul(a, transpose(b))`` (2-D, or batched with the last two axes swapped: ``q @ k^T``) calls
    the ``strided_rhs`` GEMM on ``b`` itself (no transpose in the kernel's loops), serial, split by
    the driver or across the batch; a transpose that is also a result still is materialized."""
    import mind
    from mind.compiler.backend.cpu.api import emit_stage
    rng = np.random.default_rng(m + n)
    a = rng.standard_normal((*batch, m, k)).astype(NP[elem])
    b = rng.standard_normal((*batch, n, k)).astype(NP[elem])
    ty = lambda *s: f"Tensor<{elem}, [{', '.join(map(str, s))}]>"  # noqa: E731
    perm = ", permutation=[0, 2, 1]" if batch else ""
    args = f"a: {ty(*batch, m, k)}, b: {ty(*batch, n, k)}"
    src = (f"fn f({args}) -> {ty(*batch, m, n)} {{ matmul(a, transpose(b{perm})) }}\n"
           f"fn g({args}) -> ({ty(*batch, m, n)}, {ty(*batch, k, n)}) {{\n"
           f"  let bt = transpose(b{perm});\n  (matmul(a, bt), bt)\n}}")
    bt = np.swapaxes(b, -1, -2)
    want = a.astype(np.float64) @ bt
    bound = (k + 1) * EPS[elem] * (np.abs(a.astype(np.float64)) @ np.abs(bt.astype(np.float64)))
    for fn in ("f", "g"):
        outs = mind.compile(src, fn=fn, threads=threads, cache=False)(a, b)
        got = outs if fn == "f" else outs[0]
        assert np.all(np.abs(got - want) <= bound), fn
        if fn == "g":
            np.testing.assert_array_equal(outs[1], bt)
    llvm_ir = emit_stage(mind._function_of(src, "f"), "llvm", threads=threads)
    split = threads > 1 and m * n * k >= 1 << 20 and (not batch or batch[0] < threads)
    assert f"call void @{gemm_symbol(elem, 'strided_rhs') + ('_parallel' if split else '')}(" in llvm_ir
    assert "shufflevector" not in llvm_ir and "load <" not in llvm_ir  # nothing transposed by the kernel
    for opts in ({"matmul": "schedule"}, {"cpu": "generic"}):  # no library: the transpose is a copy
        assert "strided_rhs" not in emit_stage(mind._function_of(src, "f"), "llvm", threads=threads, **opts)


@needs_library
def test_f64_program_calls_the_library():
    rng = np.random.default_rng(3)
    a, b = rng.standard_normal((33, 70)), rng.standard_normal((70, 45))
    kern = compile_kernel(K.matmul(33, 70, 45, "f64"), "mm", CpuOptions.resolve(threads=1, cache=False, matmul="library"))
    assert kern.matmul_library == HOST
    assert np.all(np.abs(kern(a, b) - a @ b) <= _bound(a, b, EPS["f64"]))


_STRIDED = """
func.func @mm(%big: tensor<{m}x{k2}xf32>, %b: tensor<{k}x{n}xf32>, %bias: tensor<{m}x{n}xf32>,
              %out: memref<{m}x{n2}xf32>) {{
  %a = tensor.extract_slice %big[0, 0] [{m}, {k}] [1, 2] : tensor<{m}x{k2}xf32> to tensor<{m}x{k}xf32>
  %r = linalg.matmul ins(%a, %b : tensor<{m}x{k}xf32>, tensor<{k}x{n}xf32>) outs(%bias : tensor<{m}x{n}xf32>) -> tensor<{m}x{n}xf32>
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<{m}x{n2}xf32>
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<{m}x{n2}xf32>) -> tensor<{m}x{n2}xf32>
  %w = tensor.insert_slice %r into %f[0, 1] [{m}, {n}] [1, 2] : tensor<{m}x{n}xf32> into tensor<{m}x{n2}xf32>
  bufferization.materialize_in_destination %w in restrict writable %out : (tensor<{m}x{n2}xf32>, memref<{m}x{n2}xf32>) -> ()
  return
}}
"""


@pytest.mark.parametrize("matmul", ["library", "schedule"])
@pytest.mark.parametrize("threads", [1, 2])
def test_operands_with_strided_rows_go_through_a_copy(threads, matmul):
    """A strided slice as A, a bias as C's initial value (the call accumulates) and a result written
    into every second column of the output (C's elements are not contiguous).  The bias is an input:
    no kernel may compute in place in it (both policies; this was wrong before tensor arguments were
    marked read-only for bufferization: every call added A @ B to the caller's array)."""
    m, k, n = 40, 96, 80
    text = _STRIDED.format(m=m, k=k, k2=2 * k, n=n, n2=2 * n + 1)
    rng = np.random.default_rng(9)
    big = rng.standard_normal((m, 2 * k), dtype=np.float32)
    b = rng.standard_normal((k, n), dtype=np.float32)
    bias = rng.standard_normal((m, n), dtype=np.float32)
    kern = compile_kernel(text, "mm", CpuOptions.resolve(threads=threads, cache=False, matmul=matmul, schedule="all"))
    assert kern.matmul_library == (HOST if matmul == "library" else None)
    inputs = [x.copy() for x in (big, b, bias)]
    out = kern(big, b, bias)
    np.testing.assert_array_equal(kern(big, b, bias), out)
    for x, before in zip((big, b, bias), inputs):
        np.testing.assert_array_equal(x, before)
    a = big[:, ::2]
    want = np.zeros((m, 2 * n + 1))
    want[:, 1::2] = a.astype(np.float64) @ b + bias
    bound = np.zeros_like(want)
    bound[:, 1::2] = _bound(a, b) + EPS["f32"] * np.abs(bias)
    assert np.all(np.abs(out - want) <= bound)


@needs_library
def test_cpu_generic_never_calls_the_library():
    kern = compile_kernel(K.matmul(64, 64, 64), "mm", CpuOptions.resolve(threads=1, cache=False, cpu="generic", matmul="library"))
    assert kern.matmul_library is None


@needs_library
def test_policies_have_their_own_cache_entries(tmp_path):
    from mind.compiler.backend.cpu.cache import KernelCache
    store = KernelCache(str(tmp_path))
    first = compile_kernel(K.matmul(64, 64, 64), "mm", CpuOptions.resolve(threads=1, cache=store, matmul="library"))
    assert first.wait_stored(60)
    other = compile_kernel(K.matmul(64, 64, 64), "mm", CpuOptions.resolve(threads=1, cache=store, matmul="schedule"))
    assert not other.from_cache and other.matmul_library is None
    again = compile_kernel(K.matmul(64, 64, 64), "mm", CpuOptions.resolve(threads=1, cache=store, matmul="library"))
    assert again.from_cache and again.matmul_library == HOST  # the .so has the library linked in
    a = np.ones((64, 64), np.float32)
    np.testing.assert_array_equal(again(a, a), np.full((64, 64), 64.0, np.float32))


def test_runtime_functions_are_declared_hidden_and_linked_from_the_runtime_object():
    """A kernel calling ``memrefCopy`` keeps MLIR's declaration, made hidden, and links the
    prebuilt ``runtime`` object that defines it (compiled once, not in every kernel's module)."""
    from mind.compiler.backend.cpu import runtime
    ir = ("declare void @memrefCopy(i64, ptr, ptr)\n"
          "define void @k(ptr %a, ptr %b) {\n  call void @memrefCopy(i64 4, ptr %a, ptr %b)\n  ret void\n}\n")
    linked = runtime.link_runtime(ir)
    assert "declare hidden void @memrefCopy(i64, ptr, ptr)" in linked and "define hidden" not in linked
    # the object of the kernel's own level: baseline x86-64 copies were 1.5x slower on AVX-512
    assert KL.objects_for(linked, None, None, "x86-64-v3") == ["runtime-x86-64-v3"]
    assert KL.objects_for(linked, None, None, "generic") == ["runtime-x86-64"]
    assert KL.objects_for(linked, None, None, "host") == [f"runtime-{KL.host_isa() or 'x86-64'}"]
    assert KL.objects_for("define void @k() {\n  ret void\n}\n", None, None, "host") == []
    for target in KL.RUNTIME_TARGETS:
        assert KL.OBJECTS[KL.runtime_object(target)].defines() == frozenset(runtime.RUNTIME_FUNCTIONS)
        assert KL.OBJECTS[KL.runtime_object(target)].target == target
        assert "define hidden void @memrefCopy(" in KL.object_source(KL.runtime_object(target))
