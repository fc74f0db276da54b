"""Runtime functions that MLIR's lowering may call, and the kernels' heap cache, in LLVM IR.

Why: ``finalize-memref-to-llvm`` lowers a ``memref.copy`` between memrefs that are not both
contiguous (a function result that is a strided view of an input: ``slice`` returned as it is) to a
call of ``memrefCopy``, which lives in MLIR's C runner-utils library.  That library is not part of
the pinned MLIR wheels, and a kernel must not depend on a shared library beside the
OpenMP runtime anyway.  Each function here is the C library's semantics written in LLVM IR,
compiled once into the prebuilt ``runtime`` object (``runtime_module``, ``kernel_library``) that is
linked into each kernel that declares one (``link_runtime`` makes the declaration hidden), so the
kernel's library is self-contained and LLVM does not compile the same functions for every kernel.
``link_heap`` routes the module's ``malloc``/``free`` calls through allocation functions built the
same way (the ``heap`` object, ``heap_module``), which keep large freed blocks for the next call
(``mind.runtime.heap``).
``external_functions`` lists what a module still needs from outside (libc, the OpenMP runtime): the
engine checks that each resolves before it loads the code, since a call through an unresolved
symbol would crash the process instead of raising E6012."""

from __future__ import annotations

import re

from mind.runtime import heap

__all__ = ["link_runtime", "link_heap", "heap_module", "runtime_module", "calls_runtime", "declared_functions",
           "external_functions", "RUNTIME_FUNCTIONS", "HEAP_SYMBOLS"]

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
define hidden void @memrefCopy(i64 %esize, ptr %src, ptr %dst) {
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

# The kernel's allocation functions (``mind/runtime/heap.py`` describes the cache and its
# structure, whose address the exported @{sym} holds once the runtime attached the kernel).
# __mind_heap_for(size): the cache's structure when a block of `size` bytes is one it keeps (from
# min_block to limit bytes), else null.
# __mind_alloc(n): a block of n bytes after a 16-byte header holding its capacity; a size the cache
# keeps is rounded up to whole pages and taken from the cache when a cached block fits
# (the smallest of capacity cap..2 cap, found by the slots' hints and then taken with an atomic
# exchange, so two threads never take one block; its header is checked after the exchange).
# __mind_free(p): a block of min_block or more goes back into an empty slot (compare-exchange)
# while the cache holds at most `limit` bytes; when it is full, up to {tries} blocks are given back
# to free to make room (the slot after a shared counter), else the block goes to free itself.
# A failed malloc gives the whole cache back (__mind_heap_drain) and tries once more.
_HEAP_FUNCTIONS = """\
@{sym} = global ptr null, align 8
define internal ptr @__mind_heap_for(i64 %size) {{
entry:
  %h = load atomic ptr, ptr @{sym} acquire, align 8
  %noheap = icmp eq ptr %h, null
  br i1 %noheap, label %none, label %sized
sized:
  %minp = getelementptr inbounds i64, ptr %h, i64 {min_word}
  %min = load atomic i64, ptr %minp monotonic, align 8
  %small = icmp ult i64 %size, %min
  br i1 %small, label %none, label %bounded
bounded:
  %limitp = getelementptr inbounds i64, ptr %h, i64 {limit_word}
  %limit = load atomic i64, ptr %limitp monotonic, align 8
  %huge = icmp ugt i64 %size, %limit
  br i1 %huge, label %none, label %done
none:
  ret ptr null
done:
  ret ptr %h
}}
define internal ptr @__mind_malloc(i64 %size) {{
entry:
  %raw = call ptr @malloc(i64 %size)
  %failed = icmp eq ptr %raw, null
  br i1 %failed, label %cached, label %done
cached:
  %h = load atomic ptr, ptr @{sym} acquire, align 8
  %noheap = icmp eq ptr %h, null
  br i1 %noheap, label %done, label %drain
drain:
  call void @{drain}(ptr %h)
  %raw2 = call ptr @malloc(i64 %size)
  ret ptr %raw2
done:
  ret ptr %raw
}}
define hidden ptr @__mind_alloc(i64 %n) #{attr} {{
entry:
  %h = call ptr @__mind_heap_for(i64 %n)
  %noheap = icmp eq ptr %h, null
  br i1 %noheap, label %plain, label %round
round:
  %n1 = add i64 %n, {page_mask}
  %cap = and i64 %n1, -{page}
  %cap2 = shl i64 %cap, 1
  br label %scan
scan:
  %i = phi i64 [ 0, %round ], [ %i1, %scan ]
  %best = phi i64 [ -1, %round ], [ %best1, %scan ]
  %bestsz = phi i64 [ -1, %round ], [ %bestsz1, %scan ]
  %si = add i64 %i, {slot_word}
  %sp = getelementptr inbounds i64, ptr %h, i64 %si
  %s = load atomic ptr, ptr %sp monotonic, align 8
  %hi = add i64 %si, {slots}
  %hp = getelementptr inbounds i64, ptr %h, i64 %hi
  %hint = load atomic i64, ptr %hp monotonic, align 8
  %full = icmp ne ptr %s, null
  %big = icmp uge i64 %hint, %cap
  %notbig = icmp ule i64 %hint, %cap2
  %better = icmp ult i64 %hint, %bestsz
  %f1 = and i1 %full, %big
  %f2 = and i1 %f1, %notbig
  %f3 = and i1 %f2, %better
  %best1 = select i1 %f3, i64 %i, i64 %best
  %bestsz1 = select i1 %f3, i64 %hint, i64 %bestsz
  %i1 = add i64 %i, 1
  %scanned = icmp eq i64 %i1, {slots}
  br i1 %scanned, label %pick, label %scan
pick:
  %none = icmp slt i64 %best1, 0
  br i1 %none, label %fresh, label %take
take:
  %blk = call ptr @__mind_heap_take(ptr %h, i64 %best1)
  %gone = icmp eq ptr %blk, null
  br i1 %gone, label %fresh, label %check
check:
  %bsz = load i64, ptr %blk, align 8
  %ok1 = icmp uge i64 %bsz, %cap
  %ok2 = icmp ule i64 %bsz, %cap2
  %ok = and i1 %ok1, %ok2
  br i1 %ok, label %reuse, label %mismatch
mismatch:
  call void @free(ptr %blk)
  br label %fresh
reuse:
  %q = getelementptr inbounds i8, ptr %blk, i64 {header}
  ret ptr %q
fresh:
  %fsz = add i64 %cap, {header}
  br label %get
plain:
  %psz = add i64 %n, {header}
  br label %get
get:
  %size = phi i64 [ %fsz, %fresh ], [ %psz, %plain ]
  %capacity = phi i64 [ %cap, %fresh ], [ %n, %plain ]
  %raw = call ptr @__mind_malloc(i64 %size)
  %failed = icmp eq ptr %raw, null
  br i1 %failed, label %nomem, label %store
store:
  store i64 %capacity, ptr %raw, align 8
  %q2 = getelementptr inbounds i8, ptr %raw, i64 {header}
  ret ptr %q2
nomem:
  ret ptr null
}}
define hidden void @__mind_free(ptr %q) #{attr} {{
entry:
  %isnull = icmp eq ptr %q, null
  br i1 %isnull, label %done, label %look
look:
  %raw = getelementptr inbounds i8, ptr %q, i64 -{header}
  %size = load i64, ptr %raw, align 8
  %h = call ptr @__mind_heap_for(i64 %size)
  %noheap = icmp eq ptr %h, null
  br i1 %noheap, label %release, label %reserve
reserve:
  %try = phi i32 [ 0, %look ], [ %try1, %evicted ]
  %heldp = getelementptr inbounds i64, ptr %h, i64 {held_word}
  %old = atomicrmw add ptr %heldp, i64 %size monotonic, align 8
  %limitp = getelementptr inbounds i64, ptr %h, i64 {limit_word}
  %limit = load atomic i64, ptr %limitp monotonic, align 8
  %new = add i64 %old, %size
  %over = icmp ugt i64 %new, %limit
  br i1 %over, label %unreserve, label %place
place:
  %i = phi i64 [ 0, %reserve ], [ %i1, %place.next ]
  %si = add i64 %i, {slot_word}
  %sp = getelementptr inbounds i64, ptr %h, i64 %si
  %r = cmpxchg ptr %sp, ptr null, ptr %raw acq_rel monotonic, align 8
  %placed = extractvalue {{ ptr, i1 }} %r, 1
  br i1 %placed, label %hint, label %place.next
place.next:
  %i1 = add i64 %i, 1
  %scanned = icmp eq i64 %i1, {slots}
  br i1 %scanned, label %unreserve, label %place
hint:
  %hi = add i64 %si, {slots}
  %hp = getelementptr inbounds i64, ptr %h, i64 %hi
  store atomic i64 %size, ptr %hp release, align 8
  ret void
unreserve:
  %back = atomicrmw sub ptr %heldp, i64 %size monotonic, align 8
  %tries = icmp eq i32 %try, {tries}
  br i1 %tries, label %release, label %evict
evict:
  %vp = getelementptr inbounds i64, ptr %h, i64 {victim_word}
  %v = atomicrmw add ptr %vp, i64 1 monotonic, align 8
  %vi = urem i64 %v, {slots}
  %victim = call ptr @__mind_heap_take(ptr %h, i64 %vi)
  call void @free(ptr %victim)
  br label %evicted
evicted:
  %try1 = add i32 %try, 1
  br label %reserve
release:
  call void @free(ptr %raw)
  br label %done
done:
  ret void
}}
define internal ptr @__mind_heap_take(ptr %h, i64 %i) {{
entry:
  %si = add i64 %i, {slot_word}
  %sp = getelementptr inbounds i64, ptr %h, i64 %si
  %blk = atomicrmw xchg ptr %sp, ptr null acq_rel, align 8
  %empty = icmp eq ptr %blk, null
  br i1 %empty, label %done, label %count
count:
  %bsz = load i64, ptr %blk, align 8
  %heldp = getelementptr inbounds i64, ptr %h, i64 {held_word}
  %back = atomicrmw sub ptr %heldp, i64 %bsz monotonic, align 8
  br label %done
done:
  ret ptr %blk
}}
define void @{drain}(ptr %h) #{attr} {{
entry:
  br label %loop
loop:
  %i = phi i64 [ 0, %entry ], [ %i1, %loop ]
  %blk = call ptr @__mind_heap_take(ptr %h, i64 %i)
  call void @free(ptr %blk)
  %i1 = add i64 %i, 1
  %end = icmp eq i64 %i1, {slots}
  br i1 %end, label %done, label %loop
done:
  ret void
}}
"""

RUNTIME_FUNCTIONS = {"memrefCopy": _MEMREF_COPY}
_INTRINSICS = {
    "llvm.memmove.p0.p0.i64": "declare void @llvm.memmove.p0.p0.i64(ptr, ptr, i64, i1 immarg)",
    "llvm.memset.p0.i64": "declare void @llvm.memset.p0.i64(ptr, i8, i64, i1 immarg)",
}
_DECLARE = re.compile(r"^declare [^@]*@([-\w.$]+)\(", re.M)
_LIBC = {"malloc": "declare ptr @malloc(i64)", "free": "declare void @free(ptr)"}
_RETRIES = 4  # blocks a free gives back to make room for itself, at most
HEAP_ALLOC, HEAP_FREE = "__mind_alloc", "__mind_free"
_HEAP_CALLS = ((" call ptr @malloc(", f" call noalias ptr @{HEAP_ALLOC}("), (" call void @free(", f" call void @{HEAP_FREE}("))
"""The calls ``link_heap`` reroutes, as plain text (an instruction's ``call`` always follows a space):
``str.replace`` is a hundred times faster than a regular expression on a large module's text."""


def declared_functions(ir_text: str) -> list[str]:
    """The functions an LLVM IR module declares without defining (intrinsics included)."""
    return _DECLARE.findall(ir_text)


def link_runtime(ir_text: str) -> str:
    """``ir_text`` with its declarations of ``RUNTIME_FUNCTIONS`` hidden (the prebuilt ``runtime``
    object defines them), and its ``malloc``/``free`` calls going through the heap cache
    (``link_heap``)."""
    return link_heap(_link_functions(ir_text))


def link_heap(ir_text: str) -> str:
    """``ir_text`` with every ``malloc``/``free`` call replaced by one of ``__mind_alloc``/
    ``__mind_free`` (``mind.runtime.heap``), which it declares: they are defined by the prebuilt
    object ``heap_module`` makes (``kernel_library``), linked with every kernel that calls them.
    The returned pointer keeps ``malloc``'s ``noalias``, which LLVM's alias analysis needs; a module
    that allocates nothing is returned as it is."""
    if "@malloc(" not in ir_text:
        return ir_text
    body = ir_text
    for call, heap_call in _HEAP_CALLS:
        body = body.replace(call, heap_call)
    if body == ir_text:
        return ir_text
    return body + "\n" + "\n".join(_HEAP_DECLARATIONS) + "\n"


_HEAP_DECLARATIONS = (f"declare hidden noalias ptr @{HEAP_ALLOC}(i64) nounwind",
                      f"declare hidden void @{HEAP_FREE}(ptr) nounwind")
"""What a kernel that allocates declares of the heap object (hidden: resolved inside its own
library, never exported from it), with the attributes of their definitions that LLVM can no longer
read from the bodies."""


def heap_module() -> str:
    """The LLVM IR of the heap cache's functions (``__mind_alloc``, ``__mind_free``, the exported
    structure pointer and drain function): the source of ``kernel_library``'s ``heap`` object.

    Why a prebuilt object and not IR in each kernel's module: LLVM took 8-11 ms of CPU to optimize
    and emit these few functions again for every kernel that allocates, the same code each time
    (scalar code, so the baseline x86-64 object serves every host)."""
    attr = 0
    return "\n".join((
        *_LIBC.values(),
        _HEAP_FUNCTIONS.format(
            sym=heap.SYMBOL, drain=heap.DRAIN_SYMBOL, attr=attr, slots=heap.SLOTS, header=heap.HEADER_BYTES,
            page=heap.PAGE_BYTES, page_mask=heap.PAGE_BYTES - 1, limit_word=heap.LIMIT_WORD,
            held_word=heap.HELD_WORD, min_word=heap.MIN_WORD, victim_word=heap.VICTIM_WORD,
            slot_word=heap.SLOT_WORD, tries=_RETRIES),
        # kept out of line: one copy of the cache's code however many allocations the kernel has
        f"attributes #{attr} = {{ noinline nounwind }}", ""))


HEAP_SYMBOLS = (HEAP_ALLOC, HEAP_FREE, heap.DRAIN_SYMBOL)
"""The functions the heap object defines."""


def _link_functions(ir_text: str) -> str:
    """``ir_text`` with its declarations of ``RUNTIME_FUNCTIONS`` made ``hidden``: the prebuilt
    object ``runtime_module`` makes defines them, linked into the kernel's own library."""
    if not any(f"@{name}(" in ir_text for name in RUNTIME_FUNCTIONS):
        return ir_text  # the common case, without a pass over the text
    return "\n".join("declare hidden " + ln[len("declare "):]
                     if ln.startswith("declare ") and any(f"@{name}(" in ln for name in RUNTIME_FUNCTIONS) else ln
                     for ln in ir_text.split("\n"))


def runtime_module() -> str:
    """The LLVM IR of every function of ``RUNTIME_FUNCTIONS``: the source of ``kernel_library``'s
    ``runtime`` object, linked with each kernel that calls one of them (``calls_runtime``).

    Why prebuilt: ``memrefCopy`` alone cost 8-13 ms of LLVM CPU time in every kernel that copies a
    strided view (a pad, a train step's slices), the same code each time."""
    return "\n".join((*RUNTIME_FUNCTIONS.values(), *_INTRINSICS.values(), ""))


def calls_runtime(llvm_ir: str) -> bool:
    """Whether a kernel's LLVM IR calls a function of ``RUNTIME_FUNCTIONS``."""
    return any(f"@{name}(" in llvm_ir for name in RUNTIME_FUNCTIONS)


def external_functions(ir_text: str) -> list[str]:
    """The functions a module declares that must come from outside it (not LLVM intrinsics)."""
    return [name for name in declared_functions(ir_text) if not name.startswith("llvm.")]
