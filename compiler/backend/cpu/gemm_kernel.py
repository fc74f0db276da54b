"""MLIR text of the prebuilt GEMM: ``C[m, n] (+)= sum_k A[m, k] * B[k, n]`` for any shapes and strides.

Why a kernel with dynamic shapes: a matmul scheduled per program (``transforms``) costs most of a
cold compile in MLIR and LLVM work (transform interpreter, vector lowering, code generation of a large
unrolled body; ``docs/backend-cpu.md`` has the figures).  This kernel is compiled once,
ahead of time, for a fixed instruction set (``kernel_library``); a program only emits a call to it
(``library_calls``), which costs what any small function costs.

The loop nest is the matmul schedule's of ``transforms`` (K slabs, column blocks, register tiles of
``rows`` x ``vectors`` vectors, k innermost with the accumulators in registers), with row blocks
between the slabs and the column blocks where a variant bounds them (``a_block``), its sizes per
instruction set and element type (``VARIANTS``).  Edges need no padding: the last columns are a tile
of as many vectors as they need (``_edge``), whose last vector uses masked loads and stores (AVX-512
and AVX2 have them natively), the last ``M mod rows`` rows one band of tiles of exactly that many rows
(``_last_rows``).  The operands are ``memref<?x?xT, strided<[?, 1],
offset: ?>>``: rows may be any distance apart (slices, row blocks of a thread), elements of a row are
contiguous.  Summation order: for each output element, k ascending within a slab and slabs ascending,
each step one fused multiply-add; in a variant with ``late_c`` each slab's sum starts from zero and is
then added to C (the sum of the slabs before it, or the accumulated-into value), which bounds the
error by the slab's length plus the number of slabs rather than by K.  Both are within the spec's
bound for matmul.

Pure Python: no MLIR import.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

from mind.spec.dtypes import DType
from mind.spec.record import FrozenRecord

from .vector_unit import CACHE_LINE_BYTES

_set = object.__setattr__

__all__ = ["GemmShape", "gemm_function", "gemm_symbol", "operand_type", "operand_types", "VARIANTS", "LAYOUTS",
           "packed_type", "PACK_MIN_ROW_TILES", "PACK_CONFLICT_BYTES", "packs_from"]


class GemmShape(FrozenRecord):
    """One variant: element type, lanes per vector register, the register tile (``rows`` x
    ``vectors`` vectors of accumulators), the cache blocks (``k_slab`` rows of B per slab,
    ``n_block`` columns per block, a multiple of the tile's width), ``late_c``: whether a tile
    reads C after its k loop rather than before it (``_tile``), ``a_block``: the most bytes of
    A's slab one row block reads (``_row_block``; 0: one block of every row), and
    ``pack_unaligned``: the row tiles from which a B whose rows are off the vectors' grid is packed
    (``_packs``; 0: never for that reason), ``prefetch_rows``: how many rows ahead a tile that reads
    B in place prefetches it (``_prefetch_b``; 0: never), ``k_unroll``: how many k steps one
    iteration of a tile's k loop takes where the tile reads the packed block (``_k_loops``).

    Why these fields: the tile decides how many loads and address computations each FMA shares
    (a broadcast of A per row and k, a load of B per vector and k), the slab how often a tile's
    accumulators go through C (once per slab), the block how large the packed copy of B is
    (``packed_type``: ``k_slab`` x ``n_block`` elements, on the stack), the row block how often A's
    slab is read from beyond L2: once per column block, unless the rows of a block fit there."""

    __slots__ = ("elem", "lanes", "rows", "vectors", "k_slab", "n_block", "late_c", "a_block", "pack_unaligned",
                 "prefetch_rows", "k_unroll")

    elem: str
    lanes: int
    rows: int
    vectors: int
    k_slab: int
    n_block: int
    late_c: bool
    a_block: int
    pack_unaligned: int
    prefetch_rows: int
    k_unroll: int

    def __init__(self, elem: str, lanes: int, rows: int, vectors: int = 2, k_slab: int = 128,
                 n_block: int = 128, late_c: bool = False, a_block: int = 0,
                 pack_unaligned: int = 0, prefetch_rows: int = 0, k_unroll: int = 1) -> None:
        if (elem not in ("f32", "f64") or lanes < 1 or rows < 1 or vectors < 1 or n_block < 1
                or n_block % (vectors * lanes) or k_slab < lanes or k_slab % lanes  # whole runs of k per slab
                or a_block < 0 or pack_unaligned < 0 or prefetch_rows < 0 or k_unroll < 1
                or lanes & (lanes - 1)):  # shuffle stages
            raise ValueError(f"unsupported GEMM variant {elem}/{lanes} lanes/{rows}x{vectors} tile/"
                             f"{k_slab}x{n_block} block")
        for name, value in (("elem", elem), ("lanes", lanes), ("rows", rows), ("vectors", vectors),
                            ("k_slab", k_slab), ("n_block", n_block), ("late_c", late_c), ("a_block", a_block),
                            ("pack_unaligned", pack_unaligned), ("prefetch_rows", prefetch_rows),
                            ("k_unroll", k_unroll)):
            _set(self, name, value)

    @property
    def elem_bytes(self) -> int:
        """Bytes of one element (the spec's dtype table)."""
        return DType(self.elem).bits // 8

    @property
    def width(self) -> int:
        """Columns of the register tile."""
        return self.vectors * self.lanes


VARIANTS: dict[str, dict[str, GemmShape]] = {
    "x86-64-v4": {"f32": GemmShape("f32", 16, 6, vectors=4, k_slab=512, n_block=64, late_c=True, a_block=1 << 20,
                                    pack_unaligned=16, prefetch_rows=16, k_unroll=4),
                  "f64": GemmShape("f64", 8, 6, vectors=4, k_slab=512, n_block=32, late_c=True, a_block=1 << 20,
                                    pack_unaligned=16, prefetch_rows=16, k_unroll=4)},
    "x86-64-v3": {"f32": GemmShape("f32", 8, 6, k_slab=256), "f64": GemmShape("f64", 4, 6, k_slab=256)},
}
"""Per instruction set of ``kernel_library.ISAS`` and element type: the register tile and blocks.

AVX-512: 6 rows x 4 zmm = 24 accumulators of the 32 registers (four for B, one for the broadcast of
A), slabs of 512 k, blocks of one tile's width (a packed block of 128 KiB), C read late
(``late_c``).  Each k step shares its 10 loads and its address arithmetic among 24 FMAs (8 x 2
zmm: among 16), which matters where two FMA pipes take a zmm FMA each cycle and the loop's scalar
instructions compete for their ports; slabs of 512 halve the passes over C, and a late C hides
what those passes still cost; row blocks of at most 1 MiB of A (half this host's L2) keep the
A of a matmul of thousands of rows in L2 across the column blocks, at the price of packing B once
per row block; from 16 row tiles a B whose rows start off the 64-byte grid (NumPy's arrays
usually do) is packed, since every zmm load of it spans two lines (``docs/backend-cpu.md``,
Measurements: the GEMM on Intel); a B read in place is prefetched 16 rows ahead (``_prefetch_b``);
the tiles that read the packed block take 4 k steps per iteration (``k_unroll``: the scalar
arithmetic of a step's addresses and of the loop took FMA slots; 2 and 8 steps were slower).
AVX2: 6 rows x 2 ymm = 12 of its 16 registers, slabs of 256 (on an AVX2-only Zen 3 a pass over C
per 128 k held a tall matrix's FMAs: 8192x256x256 1.27x, f64 4096x256x256 1.14x, none slower),
blocks of 128 (a packed block of 128 KiB), C read first (late, it gained 1-5 % on large matrices
and lost 5-10 % on 128x192x128 and 200x300x250 on two threads), no row blocks, no packing for
alignment, no prefetching (none measured faster: a ymm load off the grid spans two lines only
every other time; the prefetches slowed matrices of 20-100 rows there)."""


LAYOUTS = ("", "strided_lhs", "strided_rhs")
"""The GEMMs of each element type, by the operand that may have any strides: none (every operand
has contiguous rows), A (``strided_lhs``: a transposed A, ``matmul(transpose(a), b)`` and the weight
gradients autodiff writes, read in place), or B (``strided_rhs``: a transposed B, ``a @ b^T``,
attention's ``q @ k^T`` and the input gradients ``g @ w^T``, read in place).
Why variants and not one kernel: the kernel reads A one element at a time (a broadcast per row and
k), so a column-major A costs it nothing, but a dynamic column stride is one more multiply-add per
address that the row-major path should not pay; B is read as vectors along its rows, which a
column-major B does not have, so ``strided_rhs`` always packs B (``_pack_b``), reading it
element by element, and its tiles read only the packed block."""


def gemm_symbol(elem: str, layout: str = "") -> str:
    """The library function for one element type and layout (``LAYOUTS``)."""
    return f"mind_gemm_{elem}" + (f"_{layout}" if layout else "")


def operand_type(elem: str) -> str:
    """The memref type of every operand: dynamic sizes, row stride and offset; unit column stride."""
    return f"memref<?x?x{elem}, strided<[?, 1], offset: ?>>"


def operand_types(elem: str, layout: str = "") -> tuple[str, str, str]:
    """The memref types of A, B and C: ``operand_type``, but with a dynamic column stride too for
    the operand that ``layout`` names."""
    rows, any_strides = operand_type(elem), f"memref<?x?x{elem}, strided<[?, ?], offset: ?>>"
    return (any_strides if layout == "strided_lhs" else rows, any_strides if layout == "strided_rhs" else rows, rows)


class _Text:
    """Numbered SSA names and indented lines."""

    def __init__(self, a_type: str, b_type: str) -> None:
        self.lines: list[str] = []
        self.n = 0
        self.depth = 1
        self.a_type = a_type
        self.b_type = b_type
        # the ``strided_lhs`` GEMM: (the i1 that says A is packed, the first row of the row block
        # whose bands the packed block holds); ``_column_tiles`` then writes a whole band's tiles
        # twice, reading the packed band (``_a_view``) or A in place
        self.pack_a: tuple[str, str] | None = None
        self.a_view = ""  # the packed band's view while its tiles are written

    def fresh(self, hint: str) -> str:
        self.n += 1
        return f"%{hint}{self.n}"

    def line(self, s: str) -> None:
        self.lines.append("  " * self.depth + s)

    def op(self, rhs: str, hint: str = "v") -> str:
        r = self.fresh(hint)
        self.line(f"{r} = {rhs}")
        return r

    def index(self, value: int) -> str:
        return self.op(f"arith.constant {value} : index", "c")

    @contextmanager
    def block(self, head: str) -> Iterator[None]:
        """``head {``, the lines written inside the ``with`` one level deeper, ``}``."""
        self.line(head + " {")
        self.depth += 1
        yield
        self.depth -= 1
        self.line("}")


def _tile(t: _Text, g: GemmShape, rows: int, vectors: int, masked: bool, i: str, j: str, width_left: str,
          kb: str, ke: str, one: str, panel: str = "") -> None:
    """One register tile of ``rows`` x ``vectors`` vectors at (i, j): accumulate over k in [kb, ke)
    from C's values (or zeros: ``%load_c``), store C.  With ``g.late_c`` the accumulators start
    from zeros and C's values are added after the k loop, its lines prefetched when the tile
    starts where they will be read (``%load_c``): the loads of C then wait on nothing (a C of
    megabytes misses L2 at every slab), where reading C first held the FMAs until it came.  A C
    the tile only writes is not prefetched: with a short k loop (a 1x1 conv's K of 64) the
    prefetches for writing held the loop, 8-15 % of its time.

    ``masked``: only the first ``width_left`` columns exist (fewer than the tile's width); the tile
    has as many vectors as they need (``_edge``), so only its last vector is masked: the others are
    whole and load, multiply and store as a whole tile's do.
    ``panel``: the index of the tile's columns in the packed block of B (``_pack_b``), read there
    instead of in B."""
    mty = operand_type(g.elem)
    vty = f"vector<{g.lanes}x{g.elem}>"
    mask_ty = f"vector<{g.lanes}xi1>"
    cols = [j] + [t.op(f"arith.addi {j}, {t.index(v * g.lanes)} : index", "j") for v in range(1, vectors)]
    masks: list[str] = [""] * vectors  # a mask for the last vector of an edge tile only
    zero = ""
    if masked:
        rest = width_left
        if vectors > 1:  # the columns past the whole vectors
            rest = t.op(f"arith.subi {width_left}, {t.index((vectors - 1) * g.lanes)} : index", "w")
        masks[-1] = t.op(f"vector.create_mask {rest} : {mask_ty}", "mask")
        zero = t.op(f"arith.constant dense<0.0> : {vty}", "z")
    row_idx = [i] + [t.op(f"arith.addi {i}, {t.index(r)} : index", "i") for r in range(1, rows)]

    def load(mem: str, r: str, v: int) -> str:
        if masks[v]:
            return t.op(f"vector.maskedload {mem}[{r}, {cols[v]}], {masks[v]}, {zero} : "
                        f"{mty}, {mask_ty}, {vty} into {vty}", "ld")
        return t.op(f"vector.load {mem}[{r}, {cols[v]}] : {mty}, {vty}", "ld")

    n_acc = vectors * rows
    types = ", ".join([vty] * n_acc)
    every = [(r, v) for r in range(rows) for v in range(vectors)]
    if g.late_c:
        if not masked:  # C's lines on their way while the k loop runs, where they will be read after it
            with t.block("scf.if %load_c"):
                for r, v in every:
                    t.line(f"memref.prefetch %C[{row_idx[r]}, {cols[v]}], write, locality<2>, data : {mty}")
        acc0 = [t.op(f"arith.constant dense<0.0> : {vty}", "z")] * n_acc
    else:
        acc0 = _if_load_c(t, vty, n_acc, lambda: [load("%C", row_idx[r], v) for r, v in every], "init",
                          lambda: [t.op(f"arith.constant dense<0.0> : {vty}", "z")] * n_acc)

    def step(k: str, accs: list[str], prefetch: bool) -> list[str]:
        """One k step's loads and FMAs on the accumulators ``accs`` (and B's prefetches where
        ``prefetch``): the new accumulators."""
        if panel:
            kk = t.op(f"arith.subi {k}, {kb} : index", "kk")
            bs = []
            for v in range(vectors):
                at = f"%Bp[{panel}, {kk}, {t.index(v * g.lanes)}]"
                bs.append(t.op(f"vector.maskedload {at}, {masks[v]}, {zero} : {packed_type(g)}, {mask_ty}, {vty} into {vty}"
                               if masks[v] else f"vector.load {at} : {packed_type(g)}, {vty}", "ld"))
        else:
            bs = [load("%B", k, v) for v in range(vectors)]
            if prefetch:
                _prefetch_b(t, g, k, cols)
        new: list[str] = []
        kk = t.op(f"arith.subi {k}, {kb} : index", "kk") if t.a_view else ""
        for r in range(rows):
            a = t.op(f"memref.load {t.a_view}[{t.index(r)}, {kk}] : {packed_a_type(g)}" if t.a_view
                     else f"memref.load %A[{row_idx[r]}, {k}] : {t.a_type}", "a")
            av = t.op(f"vector.broadcast {a} : {g.elem} to {vty}", "av")
            for v in range(vectors):
                new.append(t.op(f"vector.fma {av}, {bs[v]}, {accs[vectors * r + v]} : {vty}", "f"))
        return new

    ahead = 0 if panel or masked else g.prefetch_rows
    results = _k_loops(t, vty, acc0, kb, ke, one, g.k_unroll if panel else 1, ahead, step)
    sums = results
    if g.late_c:
        sums = _if_load_c(t, vty, n_acc, lambda: [t.op(f"arith.addf {load('%C', row_idx[r], v)}, {sums[vectors * r + v]} : {vty}",
                                                         "s") for r, v in every], "sum", lambda: sums)
    for r in range(rows):
        for v in range(vectors):
            val = sums[vectors * r + v]
            if masks[v]:
                t.line(f"vector.maskedstore %C[{row_idx[r]}, {cols[v]}], {masks[v]}, {val} : {mty}, {mask_ty}, {vty}")
            else:
                t.line(f"vector.store {val}, %C[{row_idx[r]}, {cols[v]}] : {mty}, {vty}")


def _k_loops(t: _Text, vty: str, acc0: list[str], kb: str, ke: str, one: str, unroll: int, ahead: int,
             step: Callable[[str, list[str], bool], list[str]]) -> list[str]:
    """A tile's k loop over [kb, ke) from the accumulators ``acc0``: ``unroll`` steps per
    iteration while that many are left, then one per iteration; the final accumulators.  With
    ``ahead`` (a tile that reads B in place), the steps whose row ``ahead`` rows on is still in the
    slab prefetch it (``step``'s flag) and the last ``ahead`` steps are a loop of their own that
    prefetches nothing: the prefetched row is then ``k + ahead`` as it is, an address that steps
    with B's, where clamping it to the slab's last row cost each step a compare, a select and a
    multiply.

    Why unrolled: a step's loads address A's rows by adding the row stride to a pointer, one
    scalar instruction per row, and the loop's own count, compare and pointer steps come on top; on
    a core whose two FMA pipes share ports with scalar arithmetic every such instruction issued
    there takes an FMA's slot.  Unrolled, the steps after the first address their k by a
    displacement, so the scalar work is shared by ``unroll`` steps.  Only tiles that read the
    packed block are unrolled: a tile that reads B in place, unrolled by 2 or 4, ran 5-45 % slower
    (``docs/backend-cpu.md``, Measurements: the GEMM's k loop unrolled).  Each element is still
    summed k ascending, one FMA per step: the values do not depend on it."""
    types = ", ".join([vty] * len(acc0))

    def loop(lo: str, hi: str, steps: int, init: list[str], prefetch: bool = False) -> list[str]:
        """One ``scf.for`` over [lo, hi) taking ``steps`` k steps per iteration: its results."""
        accs = [f"%acc{n}" for n in range(len(init))]
        k = "%k"  # each loop's own region: the name is free in it
        results = t.fresh("res")
        iters = ", ".join(f"{a} = {x}" for a, x in zip(accs, init))
        t.line(f"{results}:{len(accs)} = scf.for {k} = {lo} to {hi} step {t.index(steps) if steps > 1 else one} "
               f"iter_args({iters}) -> ({types}) {{")
        t.depth += 1
        now = accs
        for u in range(steps):
            now = step(t.op(f"arith.addi {k}, {t.index(u)} : index", "k") if u else k, now, prefetch)
        t.line(f"scf.yield {', '.join(now)} : {types}")
        t.depth -= 1
        t.line("}")
        return [f"{results}#{n}" for n in range(len(init))]

    def unrolled(lo: str, hi: str, init: list[str], prefetch: bool) -> list[str]:
        """[lo, hi) in iterations of ``unroll`` steps, then single steps for the rest."""
        if unroll == 1:
            return loop(lo, hi, 1, init, prefetch)
        span = t.op(f"arith.subi {hi}, {lo} : index", "span")
        whole = t.op(f"arith.remui {span}, {t.index(unroll)} : index", "rem")
        mid = t.op(f"arith.subi {hi}, {whole} : index", "kmid")
        return loop(mid, hi, 1, loop(lo, mid, unroll, init, prefetch), prefetch)

    if not ahead:
        return unrolled(kb, ke, acc0, False)
    # the steps whose row ``ahead`` is still in the slab prefetch it; the last ``ahead`` do not
    split = t.op(f"arith.maxsi {kb}, {t.op(f'arith.subi {ke}, {t.index(ahead)} : index', 'kp')} : index", "kp")
    return loop(split, ke, 1, unrolled(kb, split, acc0, True))


def _prefetch_b(t: _Text, g: GemmShape, k: str, cols: list[str]) -> None:
    """In the k loop of a tile that reads B in place (not packed): prefetch the tile's columns of
    the row ``g.prefetch_rows`` ahead (about 200 cycles of k steps, a load from memory's latency;
    only from the steps where that row is in the slab, ``_k_loops``: the next band reads the slab
    again), one per cache line.

    Why: B's rows are a stride apart, and the cores' stride prefetchers follow a load's stride only
    below 2 KiB, so a matrix of few rows, which does not pack B, missed on every k step of a
    block's first band where B's rows lie farther apart (N > 256 f64, N > 512 f32); nearer rows
    gain a little too (``docs/backend-cpu.md``, Measurements: B prefetched in the GEMM)."""
    row = t.op(f"arith.addi {k}, {t.index(g.prefetch_rows)} : index", "kp")
    per_line = max(1, CACHE_LINE_BYTES // (g.lanes * g.elem_bytes))
    for c in cols[::per_line]:
        t.line(f"memref.prefetch %B[{row}, {c}], read, locality<3>, data : {t.b_type}")


def _if_load_c(t: _Text, vty: str, n: int, then: Callable[[], list[str]], hint: str,
               other: Callable[[], list[str]]) -> list[str]:
    """The ``n`` values of type ``vty`` that ``then()`` computes (C's, or C's plus the tile's sums)
    where ``%load_c`` (a later slab, or an accumulating call), else ``other()``'s: the results of
    one ``scf.if``, each branch's values written inside it."""
    out = t.fresh(hint)
    types = ", ".join([vty] * n)
    t.line(f"{out}:{n} = scf.if %load_c -> ({types}) {{")
    t.depth += 1
    t.line(f"scf.yield {', '.join(then())} : {types}")
    t.depth -= 1
    t.line("} else {")
    t.depth += 1
    t.line(f"scf.yield {', '.join(other())} : {types}")
    t.depth -= 1
    t.line("}")
    return [f"{out}#{i}" for i in range(n)]


def _whole_columns_end(t: _Text, g: GemmShape, nb: str, ne: str) -> str:
    """The end of the whole register tiles of the column block [nb, ne)."""
    width = t.index(g.width)
    span = t.op(f"arith.subi {ne}, {nb} : index", "span")
    whole = t.op(f"arith.subi {span}, {t.op(f'arith.remui {span}, {width} : index', 'rem')} : index", "whole")
    return t.op(f"arith.addi {nb}, {whole} : index", "je")


def _panel(t: _Text, j: str, nb: str, width: str) -> tuple[str, str]:
    """(column within the block, panel of the packed block) of column ``j`` of the block at ``nb``."""
    jr = t.op(f"arith.subi {j}, {nb} : index", "jr")
    return jr, t.op(f"arith.divui {jr}, {width} : index", "jt")


def _column_tiles(t: _Text, g: GemmShape, rows: int, i: str, nb: str, ne: str, kb: str, ke: str,
                  one: str, packed: bool = False, packed_edge: bool = False) -> None:
    """The register tiles of one row band across the column block [nb, ne): whole tiles (their B
    from the packed block when ``packed``), then one edge tile for the columns left over, its last
    vector masked (its B from the packed block's last panel when ``packed_edge``): as many vectors
    wide as they need (a narrow output, N <= lanes, then does no work on lanes that do not exist)."""
    if t.pack_a is not None and not t.a_view and rows == g.rows:
        pack, lo = t.pack_a
        t.line(f"scf.if {pack} {{")
        t.depth += 1
        t.a_view = _a_view(t, g, i, lo, kb, ke)
        _column_tiles(t, g, rows, i, nb, ne, kb, ke, one, packed, packed_edge)
        t.depth -= 1
        t.line("} else {")
        t.depth += 1
        t.pack_a, saved = None, t.pack_a
        _column_tiles(t, g, rows, i, nb, ne, kb, ke, one, packed, packed_edge)
        t.pack_a = saved
        t.depth -= 1
        t.line("}")
        return
    width = t.index(g.width)
    je = _whole_columns_end(t, g, nb, ne)
    edge_panel = ""
    if packed_edge:
        edge_panel = _panel(t, je, nb, width)[1]
    loop = f"%j{rows}" + ("p" if packed else "")
    t.line(f"scf.for {loop} = {nb} to {je} step {width} {{")
    t.depth += 1
    panel = ""
    if packed:
        panel = _panel(t, loop, nb, width)[1]
    _tile(t, g, rows, g.vectors, False, i, loop, "", kb, ke, one, panel)
    t.depth -= 1
    t.line("}")
    left = t.op(f"arith.subi {ne}, {je} : index", "left")
    _edge(t, g, left, lambda vectors: _tile(t, g, rows, vectors, True, i, je, left, kb, ke, one, edge_panel))
    t.a_view = ""


def _edge(t: _Text, g: GemmShape, left: str, emit: Callable[[int], None]) -> None:
    """The columns a block leaves past its whole tiles (``left``, fewer than a tile's width): one
    masked tile of as many vectors as they need (``emit(vectors)``, a case per count), so that a
    narrow output (N <= lanes) does no work on lanes that do not exist."""
    up = t.op(f"arith.addi {left}, {t.index(g.lanes - 1)} : index", "w")
    need = t.op(f"arith.divui {up}, {t.index(g.lanes)} : index", "nv")
    t.line(f"scf.index_switch {need}")
    for v in range(1, g.vectors + 1):
        t.line(f"case {v} {{")
        t.depth += 1
        emit(v)
        t.line("scf.yield")
        t.depth -= 1
        t.line("}")
    t.line("default {")
    t.depth += 1
    t.line("scf.yield")
    t.depth -= 1
    t.line("}")


def packed_type(g: GemmShape) -> str:
    """The packed block of B: ``[n_block / width, k_slab, width]``, one register tile's columns of
    every k of the slab one after the other."""
    return f"memref<{g.n_block // g.width}x{g.k_slab}x{g.width}x{g.elem}>"


PACK_MIN_ROW_TILES = 32
"""Row tiles from which B's blocks are packed whatever B's row stride: its copy is then a small part
of the passes over it (at 4-8 row tiles, N = 256 f32, packing cost 5-15 %)."""

PACK_CONFLICT_BYTES = 2048
"""A row stride of B that is a multiple of this packs its blocks from two row tiles on: a slab's rows
at such a stride fall in at most 2 of the 64 sets of an x86 L1 (its ways are 4 KiB, 64 sets of 64-byte
lines), so a tile's k loop missed L1 on every step whatever its reuse (N = 512 or 1024 f32)."""


def _pack_b(t: _Text, g: GemmShape, nb: str, ne: str, kb: str, ke: str) -> None:
    """Copy the whole register tiles' columns of B's block (rows [kb, ke), columns [nb, ne)) into
    ``%Bp``, each tile's columns contiguous from k to k.

    Why: B's rows are a row stride apart, so a tile's k loop read one line per step at that stride;
    at a stride of 4 KiB (N = 1024 f32) every line maps to the same set of L1, the block was re-read
    from L2 by every row tile, and the AVX2 GEMM (two B lines per 12 FMAs) ran at half its
    AVX-512 rate.  Packed, each tile reads one contiguous run that stays in L1 across its k loop."""
    width = t.index(g.width)
    je = _whole_columns_end(t, g, nb, ne)
    vty = f"vector<{g.lanes}x{g.elem}>"
    with t.block(f"scf.for %pk = {kb} to {ke} step {t.index(1)}"):
        kk = t.op(f"arith.subi %pk, {kb} : index", "kk")
        with t.block(f"scf.for %pj = {nb} to {je} step {width}"):
            jt = _panel(t, "%pj", nb, width)[1]
            for v in range(g.vectors):
                col = t.op(f"arith.addi %pj, {t.index(v * g.lanes)} : index", "j")
                val = t.op(f"vector.load %B[%pk, {col}] : {operand_type(g.elem)}, {vty}", "ld")
                t.line(f"vector.store {val}, %Bp[{jt}, {kk}, {t.index(v * g.lanes)}] : {packed_type(g)}, {vty}")


def _pack_b_strided(t: _Text, g: GemmShape, nb: str, kb: str, cols: tuple[str, str], ks: tuple[str, str]) -> None:
    """Copy B's columns [cols) of rows [ks) into ``%Bp`` (the block starting at column ``nb`` and
    row ``kb``), element by element: B may have any strides (``strided_rhs``).  Column by column, k
    innermost: a transposed B, B's column stride its row length, is then read along its rows."""
    width = t.index(g.width)
    with t.block(f"scf.for %pj = {cols[0]} to {cols[1]} step {t.index(1)}"):
        jr, jt = _panel(t, "%pj", nb, width)
        jj = t.op(f"arith.remui {jr}, {width} : index", "jj")
        with t.block(f"scf.for %pk = {ks[0]} to {ks[1]} step {t.index(1)}"):
            kk = t.op(f"arith.subi %pk, {kb} : index", "kk")
            val = t.op(f"memref.load %B[%pk, %pj] : {t.b_type}", "ld")
            t.line(f"memref.store {val}, %Bp[{jt}, {kk}, {jj}] : {packed_type(g)}")


def _transposed_lanes(t: _Text, g: GemmShape, rows: list[str]) -> list[str]:
    """The transpose of the ``lanes`` x ``lanes`` block whose rows are the vectors ``rows``: log2(lanes)
    stages of two-vector shuffles, each swapping the off-diagonal sub-blocks of size ``b`` of every
    pair of rows ``b`` apart (``lanes`` * log2(lanes) shuffles in all, one two-source permute each
    on AVX-512).  Why written out: the vector dialect's 2-D ``vector.transpose`` is lowered as one
    flat shuffle of every element, which LLVM splits into hundreds of shuffles and spills."""
    lanes, vty = g.lanes, f"vector<{g.lanes}x{g.elem}>"
    rows = list(rows)
    b = lanes // 2
    while b:
        out = list(rows)
        for r in range(lanes):
            if r & b:
                continue
            low = [j if not j & b else lanes + j - b for j in range(lanes)]
            high = [j + b if not j & b else lanes + j for j in range(lanes)]
            for dst, mask in ((r, low), (r + b, high)):
                out[dst] = t.op(f"vector.shuffle {rows[r]}, {rows[r + b]} [{', '.join(map(str, mask))}] : "
                                f"{vty}, {vty}", "sh")
        rows = out
        b //= 2
    return rows


def _pack_b_transposed(t: _Text, g: GemmShape, nb: str, ne: str, kb: str, ke: str, unit: str) -> None:
    """Copy B's block (rows [kb, ke), columns [nb, ne)) into ``%Bp`` for the ``strided_rhs`` GEMM.

    When B's row stride is 1 (``unit``: B is the transpose of a row-major ``[N, K]`` matrix, as
    ``a @ transpose(b)`` passes it), its whole tiles' columns are read through ``%Bt``, that matrix,
    ``lanes`` elements of k at a time (the last, partial run of k with masked loads), and each
    ``lanes`` x ``lanes`` block is transposed in registers (``_transposed_chunk``); the columns past
    the last whole tile are copied element by element, as is all of a B of other strides
    (``_pack_b_strided``)."""
    lanes = t.index(g.lanes)
    je = _whole_columns_end(t, g, nb, ne)
    with t.block(f"scf.if {unit}"):
        span = t.op(f"arith.subi {ke}, {kb} : index", "span")
        kv = t.op(f"arith.subi {ke}, {t.op(f'arith.remui {span}, {lanes} : index', 'rem')} : index", "kv")
        partial = t.op(f"arith.cmpi ult, {kv}, {ke} : index", "p")
        with t.block(f"scf.for %vj = {nb} to {je} step {t.index(g.width)}"):
            jt = _panel(t, "%vj", nb, t.index(g.width))[1]
            with t.block(f"scf.for %vk = {kb} to {kv} step {lanes}"):
                _transposed_chunk(t, g, jt, "%vk", kb)
            with t.block(f"scf.if {partial}"):
                mask = t.op(f"vector.create_mask {t.op(f'arith.subi {ke}, {kv} : index', 'w')} : "
                            f"vector<{g.lanes}xi1>", "mask")
                _transposed_chunk(t, g, jt, kv, kb, mask)
        _pack_b_strided(t, g, nb, kb, (je, ne), (kb, ke))
    with t.block("else"):  # the else-region, after the then-region's "}"
        _pack_b_strided(t, g, nb, kb, (nb, ne), (kb, ke))


def _transposed_chunk(t: _Text, g: GemmShape, jt: str, k0: str, kb: str, mask: str = "") -> None:
    """Panel ``jt``'s rows k0 - kb + [0, lanes) from the ``2 * lanes`` rows of ``%Bt`` at column
    ``%vj``, ``lanes`` elements of k from ``k0`` each (only the lanes of ``mask`` when given: the
    last run of k, the others read as zeros), transposed in registers (``_transposed_lanes``).
    Every row of the panel is written, a masked run's too: a run starts at a multiple of ``lanes``
    below the slab's end and the slab is a multiple of ``lanes`` long, so its rows stay inside the
    slab's buffer, and the tiles' k loops never read those past the slab's last k."""
    vty, bt = f"vector<{g.lanes}x{g.elem}>", operand_type(g.elem)
    kk = t.op(f"arith.subi {k0}, {kb} : index", "kk")
    zero = t.op(f"arith.constant dense<0.0> : {vty}", "z") if mask else ""
    for half in range(g.vectors):
        rows = []
        for c in range(g.lanes):
            j = t.op(f"arith.addi %vj, {t.index(half * g.lanes + c)} : index", "j")
            rows.append(t.op(f"vector.maskedload %Bt[{j}, {k0}], {mask}, {zero} : {bt}, vector<{g.lanes}xi1>, {vty} "
                             f"into {vty}" if mask else f"vector.load %Bt[{j}, {k0}] : {bt}, {vty}", "ld"))
        col = t.index(half * g.lanes)
        for r, v in enumerate(_transposed_lanes(t, g, rows)):
            k = t.op(f"arith.addi {kk}, {t.index(r)} : index", "k")
            t.line(f"vector.store {v}, %Bp[{jt}, {k}, {col}] : {packed_type(g)}, {vty}")


def _packs(t: _Text, g: GemmShape, mty: str, m_whole: str) -> str:
    """Whether B's blocks are packed (``_pack_b``): at least ``PACK_MIN_ROW_TILES`` row tiles, or two
    and a row stride of B that is a multiple of ``PACK_CONFLICT_BYTES``, or (a variant with
    ``pack_unaligned``) that many row tiles and rows of B that do not all start on a vector's
    boundary (``_unaligned``)."""
    zero = t.index(0)
    meta = t.fresh("meta")
    t.line(f"%base{meta[1:]}, {meta}:5 = memref.extract_strided_metadata %B : {mty} -> "
           f"memref<{g.elem}>, index, index, index, index, index")
    stride = f"{meta}#3"
    per_conflict = t.index(PACK_CONFLICT_BYTES // g.elem_bytes)
    conflict = t.op(f"arith.cmpi eq, {t.op(f'arith.remui {stride}, {per_conflict} : index', 'r')}, {zero} : index", "p")
    two = t.op(f"arith.cmpi uge, {m_whole}, {t.index(2 * g.rows)} : index", "p")
    many = t.op(f"arith.cmpi uge, {m_whole}, {t.index(PACK_MIN_ROW_TILES * g.rows)} : index", "p")
    if g.pack_unaligned:
        enough = t.op(f"arith.cmpi uge, {m_whole}, {t.index(g.pack_unaligned * g.rows)} : index", "p")
        unaligned = _unaligned(t, g, mty, f"{meta}#0", stride)
        many = t.op(f"arith.ori {many}, {t.op(f'arith.andi {enough}, {unaligned} : i1', 'p')} : i1", "p")
    return t.op(f"arith.ori {many}, {t.op(f'arith.andi {two}, {conflict} : i1', 'p')} : i1", "pack")


def packs_from(g: GemmShape, row_bytes: int) -> int:
    """The fewest whole row tiles from which ``_packs`` packs a B whose rows are ``row_bytes`` apart,
    whatever its first row's address: 2 at a stride that conflicts in L1, ``pack_unaligned`` where
    some row starts off a vector's boundary, else ``PACK_MIN_ROW_TILES`` (an aligned first row of an
    unaligned stride is not enough to keep B in place: its other rows are off the grid)."""
    if row_bytes % PACK_CONFLICT_BYTES == 0:
        return 2
    if g.pack_unaligned and row_bytes % (g.lanes * g.elem_bytes):
        return min(g.pack_unaligned, PACK_MIN_ROW_TILES)
    return PACK_MIN_ROW_TILES


def _unaligned(t: _Text, g: GemmShape, mty: str, offset: str, stride: str) -> str:
    """Whether some row of B (of ``mty``, at ``offset`` elements with a row stride of ``stride``)
    starts off a vector's boundary: then every vector load of its tiles spans two cache lines."""
    size = g.elem_bytes
    vector = t.index(g.lanes * size)
    ptr = t.op(f"memref.extract_aligned_pointer_as_index %B : {mty} -> index", "ptr")
    first = t.op(f"arith.addi {ptr}, {t.op(f'arith.muli {offset}, {t.index(size)} : index', 'o')} : index", "a")
    step = t.op(f"arith.muli {stride}, {t.index(size)} : index", "sb")
    off = t.op(f"arith.ori {t.op(f'arith.remui {first}, {vector} : index', 'r')}, "
               f"{t.op(f'arith.remui {step}, {vector} : index', 'r')} : index", "r")
    return t.op(f"arith.cmpi ne, {off}, {t.index(0)} : index", "p")


def _transposed_view(t: _Text, g: GemmShape, operand: str, ty: str, rows: str, cols: str) -> tuple[str, str]:
    """``%<operand>t``: the operand ``%<operand>`` of ``ty`` viewed as the ``[cols, rows]`` matrix
    with unit column stride it is the transpose of (``%Bt`` of ``strided_rhs``, ``%At`` of
    ``strided_lhs``), valid when the operand's row stride is 1; returns (that condition, the
    operand's column stride: the view's row stride)."""
    meta = t.fresh("meta")
    t.line(f"%base{meta[1:]}, {meta}:5 = memref.extract_strided_metadata %{operand} : {ty} -> "
           f"memref<{g.elem}>, index, index, index, index, index")
    t.line(f"%{operand}t = memref.reinterpret_cast %base{meta[1:]} to offset: [{meta}#0], sizes: [{cols}, {rows}], "
           f"strides: [{meta}#4, 1] : memref<{g.elem}> to {operand_type(g.elem)}")
    return t.op(f"arith.cmpi eq, {meta}#3, {t.index(1)} : index", "unit"), f"{meta}#4"


PACK_A_STRIDE_BYTES = 2048
"""A transposed A (``strided_lhs``) whose columns lie this many bytes apart or more is packed
(``_pack_a``): its tiles read one run of A per k step, a column's length apart, and the cores' stride
prefetchers follow a load only below 2 KiB; at 4 KiB (1024 f32 rows) every run of a tile's k loop
falls in one set of L1 as well."""

PACK_A_MIN_BLOCKS = 3
"""The fewest column blocks of C for which A is packed: each block's tiles read the packed band again,
and the copy is one more pass over A that a block or two do not repay."""

PACK_A_MIN_K = 256
"""The fewest k for which A is packed: a short k loop's strided reads cost little more than the copy."""

PACK_A_MAX_BYTES = 4 << 20
"""The largest packed block of A (``_a_capacity``): what a row block of ``a_block`` bytes needs, where a
variant has row blocks; without them (AVX2) the block holds a slab of every row, which for a matrix
of tens of thousands of rows would be a heap allocation of its own size: A is then read in place."""

PACK_A_LANES = 8
"""The lanes of the masked moves that copy a band's run of A (``_pack_a``): at least a tile's rows."""


def _packs_a(t: _Text, g: GemmShape, m: str, k: str, n: str) -> str:
    """Whether the ``strided_lhs`` GEMM packs A (``_pack_a``): A is the transpose of a row-major
    matrix (unit row stride) whose rows, A's columns, are ``PACK_A_STRIDE_BYTES`` or more apart,
    with ``PACK_A_MIN_K`` k or more and ``PACK_A_MIN_BLOCKS`` column blocks or more, and a packed
    block (``_a_capacity``) of at most ``PACK_A_MAX_BYTES``.
    Defines ``%At``, A read as that ``[K, M]`` matrix, and allocates ``%Ap``, the packed block
    (``_a_capacity`` elements; none when A is not packed), freed before the function returns."""
    unit, column_stride = _transposed_view(t, g, "A", t.a_type, m, k)
    far = t.op(f"arith.cmpi uge, {column_stride}, {t.index(PACK_A_STRIDE_BYTES // g.elem_bytes)} : index", "p")
    blocks = t.op(f"arith.cmpi ugt, {n}, {t.index(PACK_A_MIN_BLOCKS * g.n_block - g.n_block)} : index", "p")
    long = t.op(f"arith.cmpi uge, {k}, {t.index(PACK_A_MIN_K)} : index", "p")
    capacity = _a_capacity(t, g, m, k)
    fits = t.op(f"arith.cmpi ule, {capacity}, {t.index(PACK_A_MAX_BYTES // g.elem_bytes)} : index", "p")
    sized = t.op(f"arith.andi {t.op(f'arith.andi {blocks}, {long} : i1', 'p')}, {fits} : i1", "p")
    pack = t.op(f"arith.andi {t.op(f'arith.andi {unit}, {far} : i1', 'p')}, {sized} : i1", "packa")
    size = t.op(f"arith.select {pack}, {capacity}, {t.index(0)} : index", "asz")
    t.line(f"%Ap = memref.alloc({size}) {{alignment = 64 : i64}} : memref<?x{g.elem}>")
    return pack


def _a_capacity(t: _Text, g: GemmShape, m: str, k: str) -> str:
    """Elements of the packed block of A: the whole bands of a row block (``_row_block``), each
    ``k_slab`` steps long.  A row block's slab is at most ``a_block`` bytes plus one band (its
    rows are rounded up to whole bands), or, without row blocks, every row."""
    slab = t.op(f"arith.minui {k}, {t.index(g.k_slab)} : index", "sl")
    bands = t.op(f"arith.ceildivui {m}, {t.index(g.rows)} : index", "nb")
    whole = t.op(f"arith.muli {t.op(f'arith.muli {bands}, {t.index(g.rows)} : index', 'mr')}, {slab} : index", "cap")
    if not g.a_block:
        return whole
    bound = t.index(g.a_block // g.elem_bytes + g.rows * g.k_slab)
    return t.op(f"arith.minui {whole}, {bound} : index", "cap")


def _pack_a(t: _Text, g: GemmShape, lo: str, hi: str, kb: str, ke: str) -> None:
    """Copy the whole bands of A's rows [lo, hi), k in [kb, ke), into ``%Ap``, band after band, each
    band's ``g.rows`` rows of one k side by side, k after k: what ``_a_view`` reads.  A band's values
    of one k are one run of the transposed matrix ``%At``: one masked load and one masked store of
    ``PACK_A_LANES`` lanes move it.  (The rows a band leaves over read A in place: ``_column_tiles``.)"""
    lanes = max(PACK_A_LANES, g.rows)
    vty, mty = f"vector<{lanes}x{g.elem}>", f"vector<{lanes}xi1>"
    rows, one = t.index(g.rows), t.index(1)
    klen = t.op(f"arith.subi {ke}, {kb} : index", "kl")
    zero = t.op(f"arith.constant dense<0.0> : {vty}", "z")
    mask = t.op(f"vector.constant_mask [{g.rows}] : {mty}", "mask")
    with t.block(f"scf.for %pb = {lo} to {hi} step {rows}"):
        start = _band_start(t, g, "%pb", lo, klen)
        with t.block(f"scf.for %pk = {kb} to {ke} step {one}"):
            kk = t.op(f"arith.subi %pk, {kb} : index", "kk")
            at = t.op(f"arith.addi {start}, {t.op(f'arith.muli {kk}, {rows} : index', 'o')} : index", "o")
            v = t.op(f"vector.maskedload %At[%pk, %pb], {mask}, {zero} : {operand_type(g.elem)}, {mty}, {vty} "
                     f"into {vty}", "ld")
            t.line(f"vector.maskedstore %Ap[{at}], {mask}, {v} : memref<?x{g.elem}>, {mty}, {vty}")


def _band_start(t: _Text, g: GemmShape, row: str, lo: str, klen: str) -> str:
    """Where the band of rows from ``row`` starts in the packed block of A that holds the rows from
    ``lo``, ``klen`` k to a band (``_pack_a`` writes there, ``_a_view`` reads)."""
    rows = t.index(g.rows)
    band = t.op(f"arith.divui {t.op(f'arith.subi {row}, {lo} : index', 'pr')}, {rows} : index", "band")
    return t.op(f"arith.muli {t.op(f'arith.muli {band}, {klen} : index', 'o')}, {rows} : index", "o")


def packed_a_type(g: GemmShape) -> str:
    """A band of the packed A (``_pack_a``) as a ``[rows, k]`` view: the rows of one k side by side."""
    return f"memref<{g.rows}x?x{g.elem}, strided<[1, {g.rows}], offset: ?>>"


def _a_view(t: _Text, g: GemmShape, i: str, lo: str, kb: str, ke: str) -> str:
    """The band of rows from ``i`` in the packed block of A (``_pack_a``, which holds the rows from
    ``lo``) as a ``[rows, ke - kb]`` view (``packed_a_type``)."""
    klen = t.op(f"arith.subi {ke}, {kb} : index", "kl")
    at = _band_start(t, g, i, lo, klen)
    return t.op(f"memref.reinterpret_cast %Ap to offset: [{at}], sizes: [{g.rows}, {klen}], strides: [1, {g.rows}] : "
                f"memref<?x{g.elem}> to {packed_a_type(g)}", "Av")


def _row_block(t: _Text, g: GemmShape, m: str, kb: str, ke: str) -> str:
    """Rows per row block of the slab [kb, ke): the fewest blocks whose A slab takes at most
    ``g.a_block`` bytes each, as equal as whole bands make them (at least one band)."""
    size = g.elem_bytes
    row_bytes = t.op(f"arith.muli {t.op(f'arith.subi {ke}, {kb} : index', 'kl')}, {t.index(size)} : index", "rb")
    fit = t.op(f"arith.maxui {t.op(f'arith.divui {t.index(g.a_block)}, {row_bytes} : index', 'fit')}, {t.index(1)} : index", "fit")
    blocks = t.op(f"arith.maxui {t.op(f'arith.ceildivui {m}, {fit} : index', 'nblk')}, {t.index(1)} : index", "nblk")
    bands = t.op(f"arith.ceildivui {t.op(f'arith.ceildivui {m}, {blocks} : index', 'mb')}, {t.index(g.rows)} : index", "mb")
    return t.op(f"arith.muli {t.op(f'arith.maxui {bands}, {t.index(1)} : index', 'mb')}, {t.index(g.rows)} : index", "mb")


def gemm_function(name: str, g: GemmShape, layout: str = "") -> str:
    """``func.func @name(%A, %B, %C, %accumulate: i1)``: C += A @ B if ``accumulate``, else C = A @ B
    (C is then only written, never read: the zero fill in front of a matmul is not needed), the
    operands of ``operand_types(g.elem, layout)``.  A, B and C must not overlap.

    The function carries ``llvm.emit_c_interface`` so that tests can call it through a descriptor
    wrapper (``_mlir_ciface_<name>``); programs call it with the expanded memref arguments."""
    aty, bty, cty = operand_types(g.elem, layout)
    t = _Text(aty, bty)
    zero, one = t.index(0), t.index(1)
    m = t.op(f"memref.dim %A, {zero} : {aty}", "m")
    k = t.op(f"memref.dim %A, {one} : {aty}", "k")
    n = t.op(f"memref.dim %B, {one} : {bty}", "n")
    rows_c = t.index(g.rows)
    rest = t.op(f"arith.remui {m}, {rows_c} : index", "rem")
    m_whole = t.op(f"arith.subi {m}, {rest} : index", "mw")
    kslab, nblock = t.index(g.k_slab), t.index(g.n_block)
    t.line(f"%Bp = memref.alloca() {{alignment = 64 : i64}} : {packed_type(g)}")
    strided_b = layout == "strided_rhs"
    unit = _transposed_view(t, g, "B", bty, k, n)[0] if strided_b else ""
    pack_a = _packs_a(t, g, m, k, n) if layout == "strided_lhs" else ""
    pack = "" if strided_b else _packs(t, g, bty, m_whole)
    t.line(f"scf.for %kb = {zero} to {k} step {kslab} {{")
    t.depth += 1
    ke = t.op(f"arith.minui {t.op(f'arith.addi %kb, {kslab} : index', 'ke')}, {k} : index", "ke")
    later_slab = t.op(f"arith.cmpi ne, %kb, {zero} : index", "p")
    t.line(f"%load_c = arith.ori {later_slab}, %accumulate : i1")
    lo, hi, last = zero, m_whole, ""
    if g.a_block:
        block = _row_block(t, g, m, "%kb", ke)
        t.line(f"scf.for %mb = {zero} to {m} step {block} {{")
        t.depth += 1
        lo, after = "%mb", t.op(f"arith.addi %mb, {block} : index", "me")
        hi = t.op(f"arith.minui {after}, {m_whole} : index", "me")
        last = t.op(f"arith.cmpi uge, {after}, {m} : index", "p")
    if pack_a:  # the row block's whole bands, once per slab, for every column block
        with t.block(f"scf.if {pack_a}"):
            _pack_a(t, g, lo, hi, "%kb", ke)
        t.pack_a = (pack_a, lo)
    t.line(f"scf.for %nb = {zero} to {n} step {nblock} {{")
    t.depth += 1
    ne = t.op(f"arith.minui {t.op(f'arith.addi %nb, {nblock} : index', 'ne')}, {n} : index", "ne")

    def last_rows(packed_edge: bool, packed: bool) -> None:
        if not last:
            _last_rows(t, g, m_whole, rest, ne, ke, one, packed_edge, packed)
            return
        with t.block(f"scf.if {last}"):
            _last_rows(t, g, m_whole, rest, ne, ke, one, packed_edge, packed)

    if strided_b:  # every tile reads the packed block, the last rows' too
        _pack_b_transposed(t, g, "%nb", ne, "%kb", ke, unit)
        _row_tiles(t, g, "%ip", lo, hi, rows_c, g.rows, ne, ke, one, True)
        last_rows(True, True)
    else:
        t.line(f"scf.if {pack} {{")
        t.depth += 1
        _pack_b(t, g, "%nb", ne, "%kb", ke)
        _row_tiles(t, g, "%ip", lo, hi, rows_c, g.rows, ne, ke, one, False, packed=True)
        last_rows(False, True)
        t.depth -= 1
        t.line("} else {")
        t.depth += 1
        _row_tiles(t, g, "%i", lo, hi, rows_c, g.rows, ne, ke, one, False)
        last_rows(False, False)
        t.depth -= 1
        t.line("}")
    t.depth -= 1
    t.line("}")
    if g.a_block:
        t.depth -= 1
        t.line("}")
    t.depth -= 1
    t.line("}")
    if pack_a:
        t.line(f"memref.dealloc %Ap : memref<?x{g.elem}>")
    t.line("return")
    body = "\n".join(t.lines)
    return (f"func.func @{name}(%A: {aty}, %B: {bty}, %C: {cty}, %accumulate: i1) "
            f"attributes {{llvm.emit_c_interface}} {{\n"
            f"{body}\n}}\n")


def _last_rows(t: _Text, g: GemmShape, start: str, rest: str, ne: str, ke: str, one: str, packed_edge: bool,
               packed: bool) -> None:
    """The last ``rest`` rows (fewer than a band, from ``start``) as one band of tiles of exactly that
    many rows: a case per count (``scf.index_switch``).  Why not one row at a time: a one-row tile
    has two accumulators, two FMA chains where the pipes take eight in flight (two pipes of four
    cycles' latency), and three loads per two FMAs; and the rows a band leaves over are up to
    ``rows - 1`` of a thread's block (AVX2's 6-row bands: 4 of the 64 rows of an attention head's
    matrix, 2 of an MLP's 32-row batch)."""
    t.line(f"scf.index_switch {rest}")
    for r in range(1, g.rows):
        t.line(f"case {r} {{")
        t.depth += 1
        _column_tiles(t, g, r, start, "%nb", ne, "%kb", ke, one, packed=packed, packed_edge=packed_edge)
        t.line("scf.yield")
        t.depth -= 1
        t.line("}")
    t.line("default {")
    t.depth += 1
    t.line("scf.yield")
    t.depth -= 1
    t.line("}")


def _row_tiles(t: _Text, g: GemmShape, i: str, lo: str, hi: str, step: str, rows: int, ne: str, ke: str, one: str,
               packed_edge: bool, packed: bool | None = None) -> None:
    """Rows [lo, hi) in bands of ``rows`` (loop variable ``i``), each across the column block
    (``_column_tiles``; its whole tiles read the packed block when ``packed``, which defaults to
    ``packed_edge``)."""
    with t.block(f"scf.for {i} = {lo} to {hi} step {step}"):
        _column_tiles(t, g, rows, i, "%nb", ne, "%kb", ke, one, packed=packed_edge if packed is None else packed,
                      packed_edge=packed_edge)
