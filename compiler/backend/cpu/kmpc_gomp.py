"""The part of the ``__kmpc_*`` OpenMP ABI that MLIR emits, defined in LLVM IR on top of GCC's libgomp.

Why: ``convert-openmp-to-llvm`` calls the LLVM/Intel ABI (``__kmpc_fork_call``, ...), whose runtimes
cost a new process 2.5-6 ms before the first parallel loop runs (Intel OpenMP: a 2.8 MB library to
relocate, then a timestamp-counter calibration when it initializes), a cost every warm start of a
threaded kernel paid.  libgomp, present wherever GCC's runtime is, loads in about 0.2 ms and starts
its threads in about 0.3 ms.  Its ABI differs (``GOMP_parallel(fn, data, nthreads, flags)``), so
this module defines the six ``__kmpc_*`` functions our kernels use as internal functions of the
kernel's own module, each calling libgomp: the kernel then needs only ``GOMP_parallel``,
``GOMP_barrier``, ``omp_get_thread_num`` and ``omp_get_num_threads`` from outside.

What is covered, and checked before anything is rewritten (``adaptable``): the functions in
``_DEFINITIONS`` only, and worksharing loops with the static unchunked schedule (34), increment 1
and chunk 0, which is what LLVM's OpenMPIRBuilder emits for MLIR's ``omp.wsloop``: it normalizes
every loop to ``[0, trip)`` first.  A module that needs anything else (a reduction, another
schedule) keeps the ``__kmpc_*`` calls and needs an LLVM/Intel runtime (``openmp``).

Semantics (the same as LLVM's runtime for these inputs):
* ``__kmpc_fork_call(loc, argc, task, a0, ..., a_{argc-1})`` runs ``task(&tid, &tid, a0, ...)`` on
  every thread of a new team (``GOMP_parallel``; thread 0 is the caller) and returns when all are
  done.  The team size is the constant every ``__kmpc_push_num_threads`` of the module pushes (the
  pipeline's ``num-threads``; a module whose pushes differ or are not constants is not adapted;
  none: libgomp's default), so ``__kmpc_push_num_threads`` itself has nothing left to do.
  When the module's ``SERIAL_SWITCH`` is set, the task runs on the calling thread alone (a team
  of one: ``omp_get_num_threads`` is 1 outside a parallel region, and ``GOMP_barrier`` returns).
* ``__kmpc_for_static_init_{4u,8u}``: the ``trip = ub - lb + 1`` iterations (none when ub < lb)
  are split into contiguous blocks, the first ``trip mod nthreads`` threads getting one more; a
  thread with none gets ``lb' = lb + start, ub' = lb' - 1`` (trip 0 for the loop that follows);
  ``*plast`` is 1 for the thread holding the last iteration; ``*pstride`` is ``trip``.
* ``__kmpc_for_static_fini``: nothing to do.  ``__kmpc_barrier``: ``GOMP_barrier``.
* ``__kmpc_global_thread_num``: the thread's number in its team (``omp_get_thread_num``); the
  adapter never uses it as a key.
"""

from __future__ import annotations

import re

__all__ = ["GOMP_FUNCTIONS", "SERIAL_SWITCH", "adaptable", "link_kmpc_on_gomp"]

SERIAL_SWITCH = "mind_omp_serial"
"""An exported ``i32`` of every adapted module: when non-zero, ``__kmpc_fork_call`` runs the region
on the calling thread alone instead of through ``GOMP_parallel``.  Why: libgomp is not fork-safe; a
child forked after the parent started libgomp's threads waits forever on the first parallel region,
since those threads do not exist in the child.  ``openmp`` sets the switch of every adapted kernel
in such a child (``os.register_at_fork``), and of those it loads there, so the child computes the
same results on one thread (as PyTorch does with its own OpenMP)."""

# What the adapted module needs from libgomp.
GOMP_FUNCTIONS = ("GOMP_parallel", "GOMP_barrier", "omp_get_thread_num", "omp_get_num_threads")

_SIMPLE = {
    "__kmpc_global_thread_num": """\
define internal i32 @__kmpc_global_thread_num(ptr %loc) {
  %t = call i32 @omp_get_thread_num()
  ret i32 %t
}
""",
    "__kmpc_push_num_threads": """\
define internal void @__kmpc_push_num_threads(ptr %loc, i32 %gtid, i32 %n) {
  ret void
}
""",
    "__kmpc_for_static_fini": """\
define internal void @__kmpc_for_static_fini(ptr %loc, i32 %gtid) {
  ret void
}
""",
    "__kmpc_barrier": """\
define internal void @__kmpc_barrier(ptr %loc, i32 %gtid) {
  call void @GOMP_barrier()
  ret void
}
""",
}


def _static_init(bits: int) -> str:
    """``__kmpc_for_static_init_{4u,8u}``: the balanced static partition described above."""
    t = f"i{bits}"
    suffix = "4u" if bits == 32 else "8u"
    ext = "zext i32 {} to i64" if bits == 64 else None

    def widen(name: str, src: str) -> str:
        return f"  %{name} = {ext.format(src)}\n" if ext else f"  %{name} = add i32 {src}, 0\n"
    return (
        f"define internal void @__kmpc_for_static_init_{suffix}(ptr %loc, i32 %gtid, i32 %sched, ptr %plast, "
        f"ptr %plower, ptr %pupper, ptr %pstride, {t} %incr, {t} %chunk) {{\n"
        f"  %lb = load {t}, ptr %plower, align 4\n"
        f"  %ub = load {t}, ptr %pupper, align 4\n"
        "  %tid32 = call i32 @omp_get_thread_num()\n"
        "  %nth32 = call i32 @omp_get_num_threads()\n"
        + widen("tid", "%tid32") + widen("nth", "%nth32") +
        f"  %empty = icmp ult {t} %ub, %lb\n"
        f"  %span = sub {t} %ub, %lb\n"
        f"  %span1 = add {t} %span, 1\n"
        f"  %trip = select i1 %empty, {t} 0, {t} %span1\n"
        f"  %q = udiv {t} %trip, %nth\n"
        f"  %r = urem {t} %trip, %nth\n"
        f"  %more = icmp ult {t} %tid, %r\n"
        f"  %extra = select i1 %more, {t} %tid, {t} %r\n"
        f"  %base = mul {t} %tid, %q\n"
        f"  %start = add {t} %base, %extra\n"
        f"  %one = zext i1 %more to {t}\n"
        f"  %count = add {t} %q, %one\n"
        f"  %lb2 = add {t} %lb, %start\n"
        f"  %end = add {t} %lb2, %count\n"
        f"  %ub2 = sub {t} %end, 1\n"
        f"  %stop = add {t} %start, %count\n"
        f"  %some = icmp ne {t} %count, 0\n"
        f"  %tail = icmp eq {t} %stop, %trip\n"
        "  %islast = and i1 %some, %tail\n"
        "  %last = zext i1 %islast to i32\n"
        f"  store {t} %lb2, ptr %plower, align 4\n"
        f"  store {t} %ub2, ptr %pupper, align 4\n"
        f"  store {t} %trip, ptr %pstride, align 4\n"
        "  store i32 %last, ptr %plast, align 4\n"
        "  ret void\n"
        "}\n")


def _fork_call(max_args: int, nthreads: int) -> str:
    """``__kmpc_fork_call`` (variadic) + the trampoline ``GOMP_parallel`` runs on each thread.

    The variadic pointers are copied into an array of ``max_args`` (the largest ``argc`` of the
    module's calls, so every call fits; the copy is bounded by it all the same); the trampoline
    calls the task with its ``argc`` arguments through a switch, one case per count."""
    n = max(max_args, 0)
    cases = " ".join(f"i32 {k}, label %c{k}" for k in range(n + 1))
    lines = [
        "define internal void @mind.omp.trampoline(ptr %ctx) {",
        "entry:",
        "  %gtid = alloca i32, align 4",
        "  %btid = alloca i32, align 4",
        "  %t = call i32 @omp_get_thread_num()",
        "  store i32 %t, ptr %gtid, align 4",
        "  store i32 %t, ptr %btid, align 4",
        "  %task = load ptr, ptr %ctx, align 8",
        "  %argcp = getelementptr inbounds i8, ptr %ctx, i64 8",
        "  %argc = load i32, ptr %argcp, align 4",
        "  %argsp = getelementptr inbounds i8, ptr %ctx, i64 16",
        "  %args = load ptr, ptr %argsp, align 8",
        f"  switch i32 %argc, label %c{n} [ {cases} ]",
    ]
    for k in range(n + 1):
        lines.append(f"c{k}:")
        names = []
        for i in range(k):
            lines.append(f"  %a{k}.{i}p = getelementptr inbounds ptr, ptr %args, i64 {i}")
            lines.append(f"  %a{k}.{i} = load ptr, ptr %a{k}.{i}p, align 8")
            names.append(f"ptr %a{k}.{i}")
        lines.append(f"  call void %task({', '.join(['ptr %gtid', 'ptr %btid', *names])})")
        lines.append("  ret void")
    lines.append("}")
    lines += [
        "define internal void @__kmpc_fork_call(ptr %loc, i32 %argc, ptr %task, ...) {",
        "entry:",
        "  %ap = alloca [24 x i8], align 8",  # the x86-64 System V va_list
        f"  %args = alloca [{max(n, 1)} x ptr], align 8",
        "  %ctx = alloca { ptr, i32, ptr }, align 8",
        "  call void @llvm.va_start.p0(ptr %ap)",
        "  %neg = icmp slt i32 %argc, 0",
        f"  %big = icmp sgt i32 %argc, {n}",
        f"  %c1 = select i1 %big, i32 {n}, i32 %argc",
        "  %count = select i1 %neg, i32 0, i32 %c1",
        "  br label %head",
        "head:",
        "  %i = phi i32 [ 0, %entry ], [ %i1, %body ]",
        "  %go = icmp slt i32 %i, %count",
        "  br i1 %go, label %body, label %done",
        "body:",
        "  %v = va_arg ptr %ap, ptr",
        "  %slot = getelementptr inbounds ptr, ptr %args, i32 %i",
        "  store ptr %v, ptr %slot, align 8",
        "  %i1 = add i32 %i, 1",
        "  br label %head",
        "done:",
        "  call void @llvm.va_end.p0(ptr %ap)",
        "  store ptr %task, ptr %ctx, align 8",
        "  %argcp = getelementptr inbounds i8, ptr %ctx, i64 8",
        "  store i32 %count, ptr %argcp, align 4",
        "  %argsp = getelementptr inbounds i8, ptr %ctx, i64 16",
        "  store ptr %args, ptr %argsp, align 8",
        f"  %serial = load atomic i32, ptr @{SERIAL_SWITCH} monotonic, align 4",
        "  %alone = icmp ne i32 %serial, 0",
        "  br i1 %alone, label %serial.run, label %team",
        "serial.run:",  # a forked child: the parent's thread pool does not exist here (see below)
        "  call void @mind.omp.trampoline(ptr %ctx)",
        "  ret void",
        "team:",
        f"  call void @GOMP_parallel(ptr @mind.omp.trampoline, ptr %ctx, i32 {nthreads}, i32 0)",
        "  ret void",
        "}",
    ]
    return "\n".join(lines) + "\n"


_DEFINITIONS = ("__kmpc_global_thread_num", "__kmpc_push_num_threads", "__kmpc_for_static_fini", "__kmpc_barrier",
                "__kmpc_for_static_init_4u", "__kmpc_for_static_init_8u", "__kmpc_fork_call")
_EXTERNAL_DECLS = {
    "GOMP_parallel": "declare void @GOMP_parallel(ptr, ptr, i32, i32)",
    "GOMP_barrier": "declare void @GOMP_barrier()",
    "omp_get_thread_num": "declare i32 @omp_get_thread_num()",
    "omp_get_num_threads": "declare i32 @omp_get_num_threads()",
    "llvm.va_start.p0": "declare void @llvm.va_start.p0(ptr)",
    "llvm.va_end.p0": "declare void @llvm.va_end.p0(ptr)",
}
_STATIC_INIT_CALL = re.compile(r"@__kmpc_for_static_init_(4u|8u)\(ptr [^,]+, i32 [^,]+, i32 (-?\d+|%[-\w.$]+), "
                               r"ptr [^,]+, ptr [^,]+, ptr [^,]+, ptr [^,]+, i(?:32|64) ([^,]+), i(?:32|64) ([^)]+)\)")
_PUSH_CALL = re.compile(r"@__kmpc_push_num_threads\(ptr [^,]+, i32 [^,]+, i32 ([^)]+)\)")
_FORK_CALL = re.compile(r"@__kmpc_fork_call\(ptr [^,]+, i32 ([^,]+), ")
_KMPC_NAME = re.compile(r"@(__kmpc_[\w.$]+)\(")
STATIC_UNCHUNKED = 34


def _kmpc_used(ir_text: str) -> set[str]:
    return set(_KMPC_NAME.findall(ir_text))


def adaptable(ir_text: str) -> bool:
    """Whether every ``__kmpc_*`` use of the module is in the subset defined here (see the module
    docstring); also true for a module without any."""
    used = _kmpc_used(ir_text)
    if not used <= set(_DEFINITIONS):
        return False
    for m in _STATIC_INIT_CALL.finditer(ir_text):
        if (m.group(2), m.group(3), m.group(4)) != (str(STATIC_UNCHUNKED), "1", "0"):
            return False
    inits = sum(1 for _ in re.finditer(r"call [^@\n]*@__kmpc_for_static_init_", ir_text))
    if inits != sum(1 for _ in _STATIC_INIT_CALL.finditer(ir_text)):
        return False  # a call this module cannot read
    forks = [m.group(1) for m in _FORK_CALL.finditer(ir_text)]
    calls = sum(1 for _ in re.finditer(r"call [^@\n]*@__kmpc_fork_call\(", ir_text))
    if len(forks) != calls or not all(a.isdigit() for a in forks):
        return False
    pushes = _PUSH_CALL.findall(ir_text)
    if len(pushes) != sum(1 for _ in re.finditer(r"call [^@\n]*@__kmpc_push_num_threads\(", ir_text)):
        return False
    return len(set(pushes)) <= 1 and all(p.isdigit() for p in pushes)


def link_kmpc_on_gomp(ir_text: str) -> str:
    """``ir_text`` with its ``__kmpc_*`` declarations replaced by the definitions above (the caller
    checks ``adaptable`` first; a module without ``__kmpc_*`` comes back unchanged)."""
    used = _kmpc_used(ir_text)
    if not used:
        return ir_text
    max_args = max((int(a) for a in _FORK_CALL.findall(ir_text)), default=0)
    nthreads = int(next(iter(_PUSH_CALL.findall(ir_text)), "0"))
    lines = [ln for ln in ir_text.split("\n")
             if not (ln.startswith("declare ") and any(f"@{name}(" in ln for name in used))]
    out = [f"@{SERIAL_SWITCH} = global i32 0, align 4\n"] if "__kmpc_fork_call" in used else []
    for name in _DEFINITIONS:
        if name not in used:
            continue
        if name in _SIMPLE:
            out.append(_SIMPLE[name])
        elif name == "__kmpc_fork_call":
            out.append(_fork_call(max_args, nthreads))
        else:
            out.append(_static_init(32 if name.endswith("4u") else 64))
    body = "\n".join(lines)
    out += [decl for name, decl in _EXTERNAL_DECLS.items() if f"@{name}(" not in body]
    return body + "\n" + "\n".join(out) + "\n"
