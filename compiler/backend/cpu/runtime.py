"""Runtime functions that MLIR's lowering may call, defined in LLVM IR inside the kernel's own module.

Why: ``finalize-memref-to-llvm`` lowers a ``memref.copy`` between memrefs that are not both
contiguous (a function result that is a strided view of an input: ``slice`` returned as it is) to a
call of ``memrefCopy``, which lives in MLIR's C runner-utils library.  That library is not part of
the pinned MLIR wheels, and a kernel must not depend on a shared library beside the
OpenMP runtime anyway.  Each function here is the C library's semantics written in LLVM IR, added to
a module that declares it (``link_runtime``), so the kernel is self-contained.
``external_functions`` lists what a module still needs from outside (libc, the OpenMP runtime): the
engine checks that each resolves before it loads the code, since a call through an unresolved
symbol would crash the process instead of raising E6012.
"""

from __future__ import annotations

import re

__all__ = ["link_runtime", "declared_functions", "external_functions", "RUNTIME_FUNCTIONS"]

# memrefCopy(elemSize, UnrankedMemRef *src, UnrankedMemRef *dst): copy every element of src into
# dst (same sizes, any strides), as MLIR's CRunnerUtils does.  An unranked memref is {i64 rank,
# ptr descriptor}; a descriptor is {ptr allocated, ptr aligned, i64 offset, i64 sizes[rank],
# i64 strides[rank]} (byte offsets 0, 8, 16, 24, 24 + 8 rank).  Rank 0 copies one element; an empty
# shape copies nothing; otherwise an odometer over the indices, last dimension fastest.  When both
# last strides are 1, each step moves a whole row (one memmove of the row's bytes: libc's vector
# copy) and the odometer runs over the other dimensions: a pad's copy into its window, or a tile of
# it, is a few row copies instead of one call per element; single elements of 4 or 8 bytes are moved
# by a load and a store, not a call.
_MEMREF_COPY = """\
define internal void @memrefCopy(i64 %esize, ptr %src, ptr %dst) {
entry:
  %rank = load i64, ptr %src
  %sdp = getelementptr inbounds i8, ptr %src, i64 8
  %sd = load ptr, ptr %sdp
  %ddp = getelementptr inbounds i8, ptr %dst, i64 8
  %dd = load ptr, ptr %ddp
  %salp = getelementptr inbounds i8, ptr %sd, i64 8
  %sal = load ptr, ptr %salp
  %soffp = getelementptr inbounds i8, ptr %sd, i64 16
  %soffe = load i64, ptr %soffp
  %dalp = getelementptr inbounds i8, ptr %dd, i64 8
  %dal = load ptr, ptr %dalp
  %doffp = getelementptr inbounds i8, ptr %dd, i64 16
  %doffe = load i64, ptr %doffp
  %soffb = mul i64 %soffe, %esize
  %sbase = getelementptr i8, ptr %sal, i64 %soffb
  %doffb = mul i64 %doffe, %esize
  %dbase = getelementptr i8, ptr %dal, i64 %doffb
  %ssizes = getelementptr inbounds i8, ptr %sd, i64 24
  %rank8 = mul i64 %rank, 8
  %sstrides = getelementptr inbounds i8, ptr %ssizes, i64 %rank8
  %dsizes = getelementptr inbounds i8, ptr %dd, i64 24
  %dstrides = getelementptr inbounds i8, ptr %dsizes, i64 %rank8
  %scalar = icmp eq i64 %rank, 0
  br i1 %scalar, label %one, label %check
one:
  call void @llvm.memmove.p0.p0.i64(ptr %dbase, ptr %sbase, i64 %esize, i1 false)
  ret void
check:
  %ci = phi i64 [ 0, %entry ], [ %ci1, %check.next ]
  %szp = getelementptr inbounds i64, ptr %ssizes, i64 %ci
  %sz = load i64, ptr %szp
  %empty = icmp eq i64 %sz, 0
  br i1 %empty, label %done, label %check.next
check.next:
  %ci1 = add i64 %ci, 1
  %checked = icmp eq i64 %ci1, %rank
  br i1 %checked, label %start, label %check
start:
  %idx = alloca i64, i64 %rank
  %rankb = mul i64 %rank, 8
  call void @llvm.memset.p0.i64(ptr %idx, i8 0, i64 %rankb, i1 false)
  %last = sub i64 %rank, 1
  %lssp = getelementptr inbounds i64, ptr %sstrides, i64 %last
  %lss = load i64, ptr %lssp
  %ldsp = getelementptr inbounds i64, ptr %dstrides, i64 %last
  %lds = load i64, ptr %ldsp
  %lszp = getelementptr inbounds i64, ptr %ssizes, i64 %last
  %lsz = load i64, ptr %lszp
  %lss1 = icmp eq i64 %lss, 1
  %lds1 = icmp eq i64 %lds, 1
  %rows = and i1 %lss1, %lds1
  %run = select i1 %rows, i64 %lsz, i64 1
  %runb = mul i64 %run, %esize
  %below = sub i64 %last, 1
  %top = select i1 %rows, i64 %below, i64 %last
  %whole = icmp slt i64 %top, 0
  br label %copy
copy:
  %so = phi i64 [ 0, %start ], [ %so2, %inc.ok ]
  %do = phi i64 [ 0, %start ], [ %do2, %inc.ok ]
  %sob = mul i64 %so, %esize
  %sp = getelementptr i8, ptr %sbase, i64 %sob
  %dob = mul i64 %do, %esize
  %dp = getelementptr i8, ptr %dbase, i64 %dob
  br i1 %rows, label %bulk, label %elem
bulk:
  call void @llvm.memmove.p0.p0.i64(ptr %dp, ptr %sp, i64 %runb, i1 false)
  br label %next
elem:
  switch i64 %esize, label %bytes [ i64 4, label %e4
                                    i64 8, label %e8 ]
e4:
  %v4 = load i32, ptr %sp, align 1
  store i32 %v4, ptr %dp, align 1
  br label %next
e8:
  %v8 = load i64, ptr %sp, align 1
  store i64 %v8, ptr %dp, align 1
  br label %next
bytes:
  call void @llvm.memmove.p0.p0.i64(ptr %dp, ptr %sp, i64 %esize, i1 false)
  br label %next
next:
  br i1 %whole, label %done, label %inc
inc:
  %d = phi i64 [ %top, %next ], [ %dprev, %wrap ]
  %so1 = phi i64 [ %so, %next ], [ %sow, %wrap ]
  %do1 = phi i64 [ %do, %next ], [ %dow, %wrap ]
  %ip = getelementptr inbounds i64, ptr %idx, i64 %d
  %i = load i64, ptr %ip
  %i1 = add i64 %i, 1
  %ssp = getelementptr inbounds i64, ptr %sstrides, i64 %d
  %ss = load i64, ptr %ssp
  %dsp = getelementptr inbounds i64, ptr %dstrides, i64 %d
  %ds = load i64, ptr %dsp
  %so2 = add i64 %so1, %ss
  %do2 = add i64 %do1, %ds
  %nszp = getelementptr inbounds i64, ptr %ssizes, i64 %d
  %n = load i64, ptr %nszp
  %more = icmp slt i64 %i1, %n
  br i1 %more, label %inc.ok, label %wrap
inc.ok:
  store i64 %i1, ptr %ip
  br label %copy
wrap:
  store i64 0, ptr %ip
  %sspan = mul i64 %ss, %i
  %sow = sub i64 %so1, %sspan
  %dspan = mul i64 %ds, %i
  %dow = sub i64 %do1, %dspan
  %first = icmp eq i64 %d, 0
  %dprev = sub i64 %d, 1
  br i1 %first, label %done, label %inc
done:
  ret void
}
"""

RUNTIME_FUNCTIONS = {"memrefCopy": _MEMREF_COPY}
_INTRINSICS = {
    "llvm.memmove.p0.p0.i64": "declare void @llvm.memmove.p0.p0.i64(ptr, ptr, i64, i1 immarg)",
    "llvm.memset.p0.i64": "declare void @llvm.memset.p0.i64(ptr, i8, i64, i1 immarg)",
}
_DECLARE = re.compile(r"^declare [^@]*@([-\w.$]+)\(", re.M)


def declared_functions(ir_text: str) -> list[str]:
    """The functions an LLVM IR module declares without defining (intrinsics included)."""
    return _DECLARE.findall(ir_text)


def link_runtime(ir_text: str) -> str:
    """``ir_text`` with each declared runtime function of ``RUNTIME_FUNCTIONS`` defined in it."""
    if not any(f"@{name}(" in ir_text for name in RUNTIME_FUNCTIONS):
        return ir_text  # the common case, without a pass over the text
    declared = set(declared_functions(ir_text))
    needed = [name for name in RUNTIME_FUNCTIONS if name in declared]
    if not needed:
        return ir_text
    lines = [ln for ln in ir_text.split("\n")
             if not any(ln.startswith("declare ") and f"@{name}(" in ln for name in needed)]
    extra = [RUNTIME_FUNCTIONS[name] for name in needed]
    extra += [decl for name, decl in _INTRINSICS.items() if name not in declared]
    return "\n".join(lines) + "\n" + "\n".join(extra)


def external_functions(ir_text: str) -> list[str]:
    """The functions a module declares that must come from outside it (not LLVM intrinsics)."""
    return [name for name in declared_functions(ir_text) if not name.startswith("llvm.")]
