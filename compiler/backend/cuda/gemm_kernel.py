"""The CUDA GEMM: ``C[b, m, n] (+)= sum_k A[b, m, k] * B[b, k, n]`` for any shapes and strides, as
LLVM IR for the NVPTX target (``gemm_ptx`` gives its PTX through llvmlite).

Why a kernel of its own: the generic mapping gives a matmul one thread per output element, each
reading a row of A and a column of B from global memory (a quarter of a percent of SGEMM on an
H200).  This kernel is the classic shared-memory tiling, for any M, N, K, batch and strides:

* a block of ``THREADS`` threads computes a ``bm`` x ``bn`` tile of C (``bm = bn = 16 * rows``):
  each slab of ``BK`` k-steps, A's ``bm`` x ``BK`` and B's ``BK`` x ``bn`` tiles are copied into
  shared memory (A transposed, its rows padded so that the copy's stores hit 32 different banks),
  then every thread multiplies a ``rows`` x ``rows`` register tile from them: per k-step two
  16-byte loads of A and two of B feed ``rows**2`` fused multiply-adds;
* two shared buffers: the next slab's global loads are issued before the current slab's
  multiply-adds and stored into the other buffer after them, one barrier per slab;
* edges: a load outside A or B reads zero (its address clamped to the buffer's first element, which
  exists whenever the kernel reads at all), a store outside C is skipped; so any M, N, K works;
* ``accumulate`` (a kernel argument): 1 adds the sum to C (a matmul on memrefs accumulates into its
  output), 0 overwrites C without reading it (the zero fill before it was dropped).

Summation order: for each output element, k ascending, one fused multiply-add per step from +0.0,
then C's value added once (accumulating): within the spec's bound for matmul.  No other op is
involved, so the no-contraction rule across ops does not apply inside it.

The thread layout: thread ``t`` is (``tx = t % 16``, ``ty = t / 16``); its rows are
``ty * v + i`` and ``bm / 2 + ty * v + i`` (``v`` elements per 16-byte vector, ``i < v``), its columns
the same with ``tx``: the 16 threads of a half-warp read 256 contiguous bytes of B, and the two
values of ``ty`` in a warp read two addresses of A (a broadcast).

Pure Python: no MLIR or llvmlite import at module level.
"""

from __future__ import annotations

from collections.abc import Iterator

from mind.spec.dtypes import DType
from mind.spec.record import FrozenRecord

__all__ = ["GemmTile", "TILES", "THREADS", "BK", "PARAMS", "WINDOW_PARAMS", "kernel_symbol", "gemm_llvm_ir", "gemm_ptx", "block_shape"]

THREADS = 256
"""Threads per block: a 16 x 16 grid of register tiles."""

BK = 8
"""k-steps per slab (per shared-memory tile)."""

MIN_BLOCKS = 2
"""Blocks per multiprocessor the kernel is built for (``nvvm.minctasm``): ptxas then keeps it within
128 registers a thread (the f32 kernel needs 130 left alone: one block per SM, 8 warps)."""

PARAMS = ("a", "b", "c", "m", "n", "k", "a_offset", "a_batch", "a_row", "a_col", "b_offset", "b_batch", "b_row",
          "b_col", "c_offset", "c_batch", "c_row", "c_col", "accumulate")
"""The GEMM's arguments, in order: three buffers, then 64-bit integers (offsets and strides in
elements, a batch stride 0 for an operand shared by the batch)."""

WINDOW_PARAMS = ("a", "b", "c", "m", "n", "k", "m_inner", "m_middle", "k_inner", "k_middle",
                 "a_offset", "a_outer", "a_middle", "a_inner", "a_k_outer", "a_k_middle", "a_k_inner",
                 "b_offset", "b_row", "b_col", "c_offset", "c_outer", "c_middle", "c_inner", "c_col", "accumulate")
"""The window variant's arguments (a convolution as an implicit GEMM): row ``m`` of A and of C is the
index (outer, middle, inner) of sizes (-, ``m_middle``, ``m_inner``) — (image, output row, output
column) — and column ``k`` of A the index (outer, middle, inner) of sizes (-, ``k_middle``,
``k_inner``) — (filter row, filter column, channel); each part has its stride, so A's element is
the input pixel under the window, read in place (no im2col copy)."""


class GemmTile(FrozenRecord):
    """One element type's kernel: ``llvm`` its LLVM type, ``size`` its bytes (the spec's dtype
    table), ``rows`` the side of a thread's register tile (two 16-byte vectors: 8 f32, 4 f64)."""

    __slots__ = ("elem", "llvm", "size", "rows")

    elem: str
    llvm: str
    size: int
    rows: int

    def __init__(self, elem: str, llvm: str) -> None:
        size = DType(elem).bits // 8
        for name, value in (("elem", elem), ("llvm", llvm), ("size", size), ("rows", 2 * (16 // size))):
            object.__setattr__(self, name, value)

    @property
    def vec(self) -> int:
        """Elements per 16-byte vector."""
        return 16 // self.size

    @property
    def block(self) -> int:
        """The side of a block's tile of C (``bm = bn``)."""
        return 16 * self.rows

    @property
    def padded(self) -> int:
        """The length of a row of A's transposed shared tile: ``bm`` plus one vector, so that the 8
        k-steps of one row land in 8 different groups of banks."""
        return self.block + self.vec


TILES = {"f32": GemmTile("f32", "float"), "f64": GemmTile("f64", "double")}
"""The element types the kernel computes."""


def kernel_symbol(elem: str, window: bool = False) -> str:
    return f"mind_{'conv' if window else 'gemm'}_{elem}"


def block_shape(elem: str, m: int, n: int, batch: int) -> tuple[list[int], list[int]]:
    """The grid and block of a launch: one block per tile of C, the batch along z."""
    side = TILES[elem].block
    return [-(-n // side), -(-m // side), batch], [THREADS, 1, 1]


class _Writer:
    """Lines of LLVM IR with fresh value names."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.count = 0

    def __call__(self, text: str) -> str:
        """Emit ``%vN = text``; returns ``%vN``."""
        self.count += 1
        name = f"%v{self.count}"
        self.lines.append(f"  {name} = {text}")
        return name

    def emit(self, text: str) -> None:
        """An instruction without a result (a store, a branch, a call)."""
        self.lines.append(f"  {text}")

    def label(self, name: str) -> None:
        self.lines.append(f"{name}:")


def gemm_llvm_ir(elem: str, window: bool = False) -> str:
    """The kernel for ``elem`` (``TILES``) as LLVM IR text; ``window``: the convolution variant
    (``WINDOW_PARAMS``)."""
    tile = TILES[elem]
    T, v, bm, pad, rows = tile.llvm, tile.vec, tile.block, tile.padded, tile.rows
    name = kernel_symbol(elem, window)
    w = _Writer()
    a_words, b_words = 2 * BK * pad, 2 * BK * bm
    slots = bm * BK // THREADS

    def smem(array: str, index: str) -> str:
        return w(f"getelementptr inbounds {T}, ptr addrspace(3) @{name}.{array}, i32 {index}")

    def fma(a: str, b: str, c: str) -> str:
        return w(f"call {T} @llvm.fma.{'f32' if elem == 'f32' else 'f64'}({T} {a}, {T} {b}, {T} {c})")

    # --- entry: thread coordinates, the batch's bases, each load slot's fixed parts
    w.label("entry")
    t32 = w("call i32 @llvm.nvvm.read.ptx.sreg.tid.x()")
    bx = w("call i32 @llvm.nvvm.read.ptx.sreg.ctaid.x()")
    by = w("call i32 @llvm.nvvm.read.ptx.sreg.ctaid.y()")
    bz = w("call i32 @llvm.nvvm.read.ptx.sreg.ctaid.z()")
    tx = w(f"and i32 {t32}, 15")
    ty = w(f"lshr i32 {t32}, 4")
    ga, gb, gc = (w(f"addrspacecast ptr %{p} to ptr addrspace(1)") for p in "abc")
    row0 = w(f"mul i64 {w(f'zext i32 {by} to i64')}, {bm}")
    col0 = w(f"mul i64 {w(f'zext i32 {bx} to i64')}, {bm}")
    if window:  # no batch: the images are the outer part of a row
        a_base, b_base, c_base = "%a_offset", "%b_offset", "%c_offset"
        m_inner, m_middle, k_inner, k_middle = (w(f"trunc i64 %{p} to i32") for p in ("m_inner", "m_middle", "k_inner",
                                                                                     "k_middle"))
    else:
        z = w(f"zext i32 {bz} to i64")
        a_base = w(f"add i64 %a_offset, {w(f'mul i64 {z}, %a_batch')}")
        b_base = w(f"add i64 %b_offset, {w(f'mul i64 {z}, %b_batch')}")
        c_base = w(f"add i64 %c_offset, {w(f'mul i64 {z}, %c_batch')}")

    def unravel(index: str, inner: str, middle: str, strides: tuple[str, str, str]) -> str:
        """The offset of (outer, middle, inner) = ``index`` split by the sizes (an index below 2**31)."""
        i32 = w(f"trunc i64 {index} to i32")
        q = w(f"udiv i32 {i32}, {inner}")
        parts = (w(f"udiv i32 {q}, {middle}"), w(f"urem i32 {q}, {middle}"), w(f"urem i32 {i32}, {inner}"))
        terms = [w(f"mul i64 {w(f'zext i32 {part} to i64')}, {stride}") for part, stride in zip(parts, strides)]
        return w(f"add i64 {w(f'add i64 {terms[0]}, {terms[1]}')}, {terms[2]}")

    def row_offset(row: str, operand: str) -> str:
        """Where row ``row`` of A or C starts, from the operand's base."""
        if window:
            return unravel(row, m_inner, m_middle, (f"%{operand}_outer", f"%{operand}_middle", f"%{operand}_inner"))
        return w(f"mul i64 {row}, %{operand}_row")
    # load slots: element t + THREADS * s of a tile.  A's k-step (t % BK) and B's column (t % bn) are
    # the same in every slot; A's row advances THREADS / BK and B's k-step THREADS / bn per slot
    akk32, arow0 = w(f"and i32 {t32}, {BK - 1}"), w(f"lshr i32 {t32}, {BK.bit_length() - 1}")
    bkk0, bcol32 = w(f"lshr i32 {t32}, {bm.bit_length() - 1}"), w(f"and i32 {t32}, {bm - 1}")
    akk = w(f"zext i32 {akk32} to i64")
    bkk = w(f"zext i32 {bkk0} to i64")
    bcol = w(f"add i64 {col0}, {w(f'zext i32 {bcol32} to i64')}")
    b_ok = w(f"icmp ult i64 {bcol}, %n")
    b_off = w(f"add i64 {b_base}, {w(f'mul i64 {bcol}, %b_col')}")
    a_slots, b_slots = [], []
    for s in range(slots):
        arow = w(f"add i32 {arow0}, {s * (THREADS // BK)}")
        r = w(f"add i64 {row0}, {w(f'zext i32 {arow} to i64')}")
        a_slots.append({"kk": akk, "ok": w(f"icmp ult i64 {r}, %m"),
                        "off": w(f"add i64 {a_base}, {row_offset(r, 'a')}"),
                        "st": w(f"add i32 {w(f'mul i32 {akk32}, {pad}')}, {arow}")})
        b_first = w(f"add i32 {w(f'mul i32 {bkk0}, {bm}')}, {bcol32}")
        b_slots.append({"kk": s * (THREADS // bm), "ok": b_ok,
                        "st": w(f"add i32 {b_first}, {s * THREADS}")})
    a_frag = w(f"mul i32 {ty}, {v}")
    b_frag = w(f"mul i32 {tx}, {v}")
    tiles = w(f"udiv i64 {w(f'add i64 %k, {BK - 1}')}, {BK}")

    def load_slab(kt: str) -> list[str]:
        """The thread's elements of slab ``kt`` of A and of B (zero outside the operands)."""
        k0 = w(f"mul i64 {kt}, {BK}")
        values = []
        a_k = w(f"add i64 {k0}, {akk}")
        a_inside = w(f"icmp ult i64 {a_k}, %k")
        if window:  # column k of A: (filter row, filter column, channel)
            a_step = unravel(a_k, k_inner, k_middle, ("%a_k_outer", "%a_k_middle", "%a_k_inner"))
        else:
            a_step = w(f"mul i64 {a_k}, %a_col")
        b_k = w(f"add i64 {k0}, {bkk}")
        b_at = w(f"add i64 {b_off}, {w(f'mul i64 {b_k}, %b_row')}")
        for g, sl in [(ga, sl) for sl in a_slots] + [(gb, sl) for sl in b_slots]:
            if g == ga:
                ok = w(f"and i1 {sl['ok']}, {a_inside}")
                at = w(f"add i64 {sl['off']}, {a_step}")
            else:  # B's slot s: k-steps further down by s * THREADS / bn rows
                k = w(f"add i64 {b_k}, {sl['kk']}")
                ok = w(f"and i1 {sl['ok']}, {w(f'icmp ult i64 {k}, %k')}")
                rows_down = sl["kk"]
                at = w(f"add i64 {b_at}, {w(f'mul i64 {rows_down}, %b_row')}") if rows_down else b_at
            clamped = w(f"select i1 {ok}, i64 {at}, i64 0")  # the first element: read, never used
            p = w(f"getelementptr inbounds {T}, ptr addrspace(1) {g}, i64 {clamped}")
            loaded = w(f"load {T}, ptr addrspace(1) {p}, align {tile.size}")
            values.append(w(f"select i1 {ok}, {T} {loaded}, {T} 0.0"))
        return values

    def store_slab(values: list[str], buf: str) -> None:
        a_off = w(f"mul i32 {buf}, {BK * pad}")
        b_off = w(f"mul i32 {buf}, {BK * bm}")
        for array, offset, values_, slots_ in (("a", a_off, values[:slots], a_slots), ("b", b_off, values[slots:], b_slots)):
            for value, sl in zip(values_, slots_):
                place = smem(array, w(f"add i32 {offset}, {sl['st']}"))
                w.emit(f"store {T} {value}, ptr addrspace(3) {place}, align {tile.size}")

    some = w("icmp ugt i64 %k, 0")
    w.emit(f"br i1 {some}, label %prologue, label %done")
    w.label("prologue")
    store_slab(load_slab("0"), "0")
    w.emit("call void @llvm.nvvm.barrier0()")
    w.emit("br label %slab")

    # --- the slab loop: prefetch the next slab, multiply this one, store the next, one barrier
    w.label("slab")
    kt = "%kt"
    n_acc = rows * rows
    acc = [f"%acc{i}" for i in range(n_acc)]
    phis_at = len(w.lines)  # the phis are written once the loop's last values are known
    nxt = w(f"add i64 {kt}, 1")
    buf = w(f"trunc i64 {w(f'and i64 {kt}, 1')} to i32")
    nbuf = w(f"xor i32 {buf}, 1")
    prefetched = load_slab(nxt)
    a_at = w(f"add i32 {w(f'mul i32 {buf}, {BK * pad}')}, {a_frag}")
    b_at = w(f"add i32 {w(f'mul i32 {buf}, {BK * bm}')}, {b_frag}")
    vt = f"<{v} x {T}>"
    current = list(acc)
    for k in range(BK):
        a_vals, b_vals = [], []
        for half in range(2):
            pa = smem("a", w(f"add i32 {a_at}, {k * pad + half * (bm // 2)}"))
            pb = smem("b", w(f"add i32 {b_at}, {k * bm + half * (bm // 2)}"))
            va = w(f"load {vt}, ptr addrspace(3) {pa}, align 16")
            vb = w(f"load {vt}, ptr addrspace(3) {pb}, align 16")
            a_vals += [w(f"extractelement {vt} {va}, i32 {i}") for i in range(v)]
            b_vals += [w(f"extractelement {vt} {vb}, i32 {i}") for i in range(v)]
        current = [fma(a_vals[i], b_vals[j], current[i * rows + j]) for i in range(rows) for j in range(rows)]
    store_slab(prefetched, nbuf)
    w.emit("call void @llvm.nvvm.barrier0()")
    more = w(f"icmp ult i64 {nxt}, {tiles}")
    w.emit(f"br i1 {more}, label %slab, label %done")
    phis = [f"  {kt} = phi i64 [ 0, %prologue ], [ {nxt}, %slab ]"]
    phis += [f"  {a} = phi {T} [ 0.0, %prologue ], [ {c}, %slab ]" for a, c in zip(acc, current)]
    w.lines[phis_at:phis_at] = phis

    # --- C: the sums, stored where they fall inside C (added to it when accumulating)
    w.label("done")
    final = [w(f"phi {T} [ 0.0, %entry ], [ {c}, %slab ]") for c in current]
    def at(first: str, frag: str, i: int) -> str:
        """Row (or column) ``i`` of the thread's register tile: two vectors, half a block apart."""
        within = w(f"add i32 {frag}, {(i // v) * (bm // 2) + i % v}")
        return w(f"add i64 {first}, {w(f'zext i32 {within} to i64')}")

    rows_at = [at(row0, a_frag, i) for i in range(rows)]
    cols_at = [at(col0, b_frag, j) for j in range(rows)]
    row_ok = [w(f"icmp ult i64 {r}, %m") for r in rows_at]
    col_ok = [w(f"icmp ult i64 {c}, %n") for c in cols_at]
    row_off = [w(f"add i64 {c_base}, {row_offset(r, 'c')}") for r in rows_at]
    col_off = [w(f"mul i64 {c}, %c_col") for c in cols_at]
    adding = w("icmp ne i64 %accumulate, 0")
    w.emit(f"br i1 {adding}, label %add0, label %put0")
    for mode in ("add", "put"):
        for e in range(n_acc):
            i, j = divmod(e, rows)
            w.label(f"{mode}{e}")
            ok = w(f"and i1 {row_ok[i]}, {col_ok[j]}")
            w.emit(f"br i1 {ok}, label %{mode}{e}.store, label %{mode}{e + 1 if e + 1 < n_acc else 'end'}")
            w.label(f"{mode}{e}.store")
            p = w(f"getelementptr inbounds {T}, ptr addrspace(1) {gc}, i64 {w(f'add i64 {row_off[i]}, {col_off[j]}')}")
            value = final[e]
            if mode == "add":
                value = w(f"fadd {T} {w(f'load {T}, ptr addrspace(1) {p}, align {tile.size}')}, {value}")
            w.emit(f"store {T} {value}, ptr addrspace(1) {p}, align {tile.size}")
            w.emit(f"br label %{mode}{e + 1 if e + 1 < n_acc else 'end'}")
        w.label(f"{mode}end")
        w.emit("ret void")

    names = WINDOW_PARAMS if window else PARAMS
    params = ", ".join([f"ptr %{p}" for p in names[:3]] + [f"i64 %{p}" for p in names[3:]])
    intrinsic = "f32" if elem == "f32" else "f64"
    return "\n".join([
        'target datalayout = "e-p3:32:32-i64:64-i128:128-v16:16-v32:32-n16:32:64"',
        'target triple = "nvptx64-nvidia-cuda"',
        "",
        f"@{name}.a = internal addrspace(3) global [{a_words} x {T}] undef, align 16",
        f"@{name}.b = internal addrspace(3) global [{b_words} x {T}] undef, align 16",
        "",
        "declare i32 @llvm.nvvm.read.ptx.sreg.tid.x()",
        "declare i32 @llvm.nvvm.read.ptx.sreg.ctaid.x()",
        "declare i32 @llvm.nvvm.read.ptx.sreg.ctaid.y()",
        "declare i32 @llvm.nvvm.read.ptx.sreg.ctaid.z()",
        "declare void @llvm.nvvm.barrier0()",
        f"declare {T} @llvm.fma.{intrinsic}({T}, {T}, {T})",
        "",
        f'define ptx_kernel void @{name}({params}) "nvvm.maxntid"="{THREADS}" "nvvm.minctasm"="{MIN_BLOCKS}" {{',
        *w.lines,
        "}",
        "",
    ])


def gemm_ptx(elem: str, chip: str, ptx_isa: str, window: bool = False) -> str:
    """The kernel's PTX for ``chip`` (``sm_80``), PTX ISA ``ptx_isa`` (``ptx80``), through llvmlite's
    NVPTX back end at -O3."""
    import llvmlite.binding as llvm

    llvm.initialize_all_targets()
    llvm.initialize_all_asmprinters()
    llvm.set_option("", "--nvptx-short-ptr")  # 32-bit shared-memory addresses (NVPTX only)
    target = llvm.Target.from_triple("nvptx64-nvidia-cuda")
    machine = target.create_target_machine(cpu=chip, features=f"+{ptx_isa}", opt=3)
    module = llvm.parse_assembly(gemm_llvm_ir(elem, window))
    module.verify()
    tuning = llvm.create_pipeline_tuning_options(speed_level=3)
    builder = llvm.create_pass_builder(machine, tuning)
    builder.getModulePassManager().run(module, builder)
    return machine.emit_assembly(module)
