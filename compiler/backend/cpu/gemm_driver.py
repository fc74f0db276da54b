"""LLVM IR of the threaded GEMM driver: one matmul split into blocks, one per thread of a libgomp team.

Why prebuilt: a kernel that split its matmul with ``scf.forall`` carried an OpenMP region of its own
(the outlined task, the fork, the work-sharing calls), whose code generation was most of its cold
compile at two threads.  The driver
does the same split with a thread count given at run time, so it is compiled once (the object
``gemm-parallel`` of ``kernel_library``, for baseline x86-64: it only moves descriptors and calls) and
a kernel calls it as it calls the serial GEMM (``library_calls``).

``mind_gemm_<elem>_parallel(A, B, C, accumulate, parts, axis, block)`` (memrefs expanded as MLIR
passes them: allocated and aligned pointers, offset, two sizes, two strides) computes what
``mind_gemm_<elem>(A, B, C, accumulate)`` computes, as ``parts`` calls of it on blocks of ``block``
rows of A and C (``axis`` 0) or ``block`` columns of B and C (``axis`` 1); part ``p`` covers
``[p * block, min((p + 1) * block, extent))``, an empty one does nothing; ``parts * block`` must
cover the extent (rows of A, or columns of B).  Each block is whole
register tiles (``library_calls._split`` chooses it), and each output element is computed by one
call with the same summation order as the serial GEMM: results are bit-identical to it, whatever
the number of threads that run.

The team: ``GOMP_parallel`` with ``parts`` threads, each taking parts ``tid, tid + nth, ...`` (a
team smaller than asked, for instance inside another parallel region, still covers every part).
Both OpenMP runtimes MIND uses export ``GOMP_parallel`` (libgomp, and Intel/LLVM OpenMP through its
GNU compatibility layer), so one object serves both ABIs of ``openmp``.  When the kernel's serial
switch (``kmpc_gomp.SERIAL_SWITCH``, a forked child) is set, or ``parts`` is 1, the calling thread
runs every part itself.

Pure Python: no MLIR or LLVM import.
"""

from __future__ import annotations

from .gemm_kernel import LAYOUTS, gemm_symbol
from .kmpc_gomp import SERIAL_SWITCH

__all__ = ["driver_symbol", "driver_module", "DRIVER_ELEMENTS", "DRIVER_NEEDS"]

DRIVER_ELEMENTS = ("f32", "f64")

DRIVER_NEEDS = ("GOMP_parallel", "omp_get_thread_num", "omp_get_num_threads")
"""What the driver needs from the OpenMP runtime (besides the serial GEMMs and the serial switch)."""

_DESC = "{ ptr, ptr, i64, i64, i64, i64, i64 }"  # allocated, aligned, offset, size0, size1, stride0, stride1
_CTX = f"{{ {_DESC}, {_DESC}, {_DESC}, i1, i32, i32, i64 }}"  # A, B, C, accumulate, parts, axis, block
_FIELDS = ("alloc", "aligned", "off", "s0", "s1", "st0", "st1")


def driver_symbol(elem: str, layout: str = "") -> str:
    """The threaded entry point for one element type and layout (``gemm_kernel.LAYOUTS``)."""
    return gemm_symbol(elem, layout) + "_parallel"


def _params(name: str) -> list[str]:
    return [f"ptr %{name}.alloc", f"ptr %{name}.aligned"] + [f"i64 %{name}.{f}" for f in _FIELDS[2:]]


def _driver(elem: str, layout: str) -> str:
    sym, gemm = driver_symbol(elem, layout), gemm_symbol(elem, layout)
    lines = [f"define void @{sym}({', '.join(_params('a') + _params('b') + _params('c'))}, "
             "i1 %acc, i32 %parts, i32 %axis, i64 %block) {",
             "entry:",
             f"  %ctx = alloca {_CTX}, align 8"]
    prev = "poison"
    n = 0
    for d, name in enumerate("abc"):
        for f, field in enumerate(_FIELDS):
            ty = "ptr" if f < 2 else "i64"
            lines.append(f"  %s{n} = insertvalue {_CTX} {prev}, {ty} %{name}.{field}, {d}, {f}")
            prev, n = f"%s{n}", n + 1
    for i, (ty, value) in enumerate((("i1", "%acc"), ("i32", "%parts"), ("i32", "%axis"), ("i64", "%block")), 3):
        lines.append(f"  %s{n} = insertvalue {_CTX} {prev}, {ty} {value}, {i}")
        prev, n = f"%s{n}", n + 1
    lines += [
        f"  store {_CTX} {prev}, ptr %ctx, align 8",
        f"  %serial = load atomic i32, ptr @{SERIAL_SWITCH} monotonic, align 4",
        "  %alone = icmp ne i32 %serial, 0",
        "  %one = icmp sle i32 %parts, 1",
        "  %inline = or i1 %alone, %one",
        "  br i1 %inline, label %here, label %team",
        "here:",
        f"  call void @{sym}.parts(ptr %ctx, i32 0, i32 1)",
        "  ret void",
        "team:",
        f"  call void @GOMP_parallel(ptr @{sym}.team, ptr %ctx, i32 %parts, i32 0)",
        "  ret void",
        "}",
        f"define internal void @{sym}.team(ptr %ctx) {{",
        "  %tid = call i32 @omp_get_thread_num()",
        "  %nth = call i32 @omp_get_num_threads()",
        f"  call void @{sym}.parts(ptr %ctx, i32 %tid, i32 %nth)",
        "  ret void",
        "}",
        f"define internal void @{sym}.parts(ptr %ctx, i32 %first, i32 %step) {{",
        "entry:",
        f"  %partsp = getelementptr inbounds {_CTX}, ptr %ctx, i32 0, i32 4",
        "  %parts = load i32, ptr %partsp, align 4",
        "  br label %head",
        "head:",
        "  %p = phi i32 [ %first, %entry ], [ %next, %body ]",
        "  %go = icmp slt i32 %p, %parts",
        "  br i1 %go, label %body, label %done",
        "body:",
        f"  call void @{sym}.block(ptr %ctx, i32 %p)",
        "  %next = add nsw i32 %p, %step",
        "  br label %head",
        "done:",
        "  ret void",
        "}",
        f"define internal void @{sym}.block(ptr %ctx, i32 %p) {{",
        "entry:",
        f"  %c = load {_CTX}, ptr %ctx, align 8",
    ]
    for d, name in enumerate("abc"):
        for f, field in enumerate(_FIELDS):
            lines.append(f"  %{name}.{field} = extractvalue {_CTX} %c, {d}, {f}")
    lines += [
        f"  %acc = extractvalue {_CTX} %c, 3",
        f"  %axis = extractvalue {_CTX} %c, 5",
        f"  %block = extractvalue {_CTX} %c, 6",
        "  %rows = icmp eq i32 %axis, 0",
        "  %pw = sext i32 %p to i64",
        "  %lo = mul i64 %pw, %block",
        "  %extent = select i1 %rows, i64 %a.s0, i64 %b.s1",
        "  %rest = sub i64 %extent, %lo",
        "  %empty = icmp sle i64 %rest, 0",
        "  br i1 %empty, label %done, label %run",
        "run:",
        "  %short = icmp slt i64 %rest, %block",
        "  %size = select i1 %short, i64 %rest, i64 %block",
        "  %a.shift = mul i64 %lo, %a.st0",
        "  %a.moved = add i64 %a.off, %a.shift",
        "  %a.off2 = select i1 %rows, i64 %a.moved, i64 %a.off",
        "  %a.s02 = select i1 %rows, i64 %size, i64 %a.s0",
        "  %b.shift = mul i64 %lo, %b.st1",
        "  %b.moved = add i64 %b.off, %b.shift",
        "  %b.off2 = select i1 %rows, i64 %b.off, i64 %b.moved",
        "  %b.s12 = select i1 %rows, i64 %b.s1, i64 %size",
        "  %c.stride = select i1 %rows, i64 %c.st0, i64 %c.st1",
        "  %c.shift = mul i64 %lo, %c.stride",
        "  %c.off2 = add i64 %c.off, %c.shift",
        "  %c.s02 = select i1 %rows, i64 %size, i64 %c.s0",
        "  %c.s12 = select i1 %rows, i64 %c.s1, i64 %size",
        f"  call void @{gemm}("
        "ptr %a.alloc, ptr %a.aligned, i64 %a.off2, i64 %a.s02, i64 %a.s1, i64 %a.st0, i64 %a.st1, "
        "ptr %b.alloc, ptr %b.aligned, i64 %b.off2, i64 %b.s0, i64 %b.s12, i64 %b.st0, i64 %b.st1, "
        "ptr %c.alloc, ptr %c.aligned, i64 %c.off2, i64 %c.s02, i64 %c.s12, i64 %c.st0, i64 %c.st1, i1 %acc)",
        "  br label %done",
        "done:",
        "  ret void",
        "}",
    ]
    return "\n".join(lines) + "\n"


def driver_module() -> str:
    """LLVM IR of the ``gemm-parallel`` object: one driver per element type of ``DRIVER_ELEMENTS`` and layout
    (``gemm_kernel.LAYOUTS``: a block of columns of a strided B is a view at its column stride, as
    of any B)."""
    gemm_decl = ", ".join(["ptr, ptr, i64, i64, i64, i64, i64"] * 3) + ", i1"
    out = [f"@{SERIAL_SWITCH} = external global i32, align 4", ""]
    out += [_driver(e, s) for e in DRIVER_ELEMENTS for s in LAYOUTS]
    out += [f"declare void @{gemm_symbol(e, s)}({gemm_decl})" for e in DRIVER_ELEMENTS for s in LAYOUTS]
    out += ["declare void @GOMP_parallel(ptr, ptr, i32, i32)", "declare i32 @omp_get_thread_num()",
            "declare i32 @omp_get_num_threads()"]
    return "\n".join(out) + "\n"
