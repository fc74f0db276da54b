"""The part of the ``__kmpc_*`` OpenMP ABI that MLIR emits, defined on top of GCC's libgomp.

Why: ``convert-openmp-to-llvm`` calls the LLVM/Intel ABI (``__kmpc_fork_call``, ...), whose runtimes
cost a new process milliseconds before the first parallel loop runs (Intel OpenMP: a large library
to relocate, then a timestamp-counter calibration when it initializes), a cost every warm start of a
threaded kernel paid.  libgomp, present wherever GCC's runtime is, loads and starts its threads
several times faster (``docs/backend-cpu.md``, Threads).  Its ABI differs (``GOMP_parallel(fn, data, nthreads, flags)``), so this
module defines the seven ``__kmpc_*`` functions our kernels use on top of libgomp: the kernel then
needs only ``GOMP_parallel``, ``GOMP_barrier``, ``omp_get_thread_num`` and ``omp_get_num_threads``
from outside.

How: the definitions (``support_module``) are compiled once, ahead of time, into the prebuilt object
``openmp-gomp`` of ``kernel_library`` (code generation of these eight small functions was a large
part of every threaded kernel's cold compile when they were part of its module).  An adapted kernel
(``link_kmpc_on_gomp``) calls them under the names ``mind_kmpc_*`` (``__kmpc_fork_call`` ->
``mind_kmpc_fork_call``): hidden in the object, they are bound inside the kernel's shared library
and never confused with a real LLVM/Intel runtime loaded in the same process.  Every kernel library
links its own copy.

What is covered, and checked before anything is rewritten (``adaptable``): the functions in
``_DEFINITIONS`` only; worksharing loops with the static unchunked schedule (34), increment 1 and
chunk 0, which is what LLVM's OpenMPIRBuilder emits for MLIR's ``omp.wsloop`` (it normalizes every
loop to ``[0, trip)`` first); at most ``MAX_FORK_ARGS`` arguments per fork; and one constant team
size pushed before every fork of the module, or none.  A module that needs anything else (a
reduction, another schedule) keeps the ``__kmpc_*`` calls and needs an LLVM/Intel runtime
(``openmp``).

Semantics (the same as LLVM's runtime for these inputs):
* ``__kmpc_push_num_threads(loc, gtid, n)`` records ``n`` for the forks that follow.  It is kept in
  one variable of the kernel's library, which is exact because ``adaptable`` admits only modules
  whose forks all follow a push of the same constant (the pipeline's ``num-threads``) or that push
  nothing (libgomp's default team).
* ``__kmpc_fork_call(loc, argc, task, a0, ..., a_{argc-1})`` runs ``task(&tid, &tid, a0, ...)`` on
  every thread of a new team (``GOMP_parallel``; thread 0 is the caller) and returns when all are
  done.  When the kernel's ``SERIAL_SWITCH`` is set, the task runs on the calling thread alone (a
  team of one: ``omp_get_num_threads`` is 1 outside a parallel region, and ``GOMP_barrier`` returns).
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

__all__ = ["GOMP_FUNCTIONS", "SERIAL_SWITCH", "MAX_FORK_ARGS", "PREFIX", "adaptable", "link_kmpc_on_gomp",
           "define_serial_switch", "defines_serial_switch", "support_module", "support_symbols"]

SERIAL_SWITCH = "mind_omp_serial"
"""An exported ``i32`` of every kernel that starts OpenMP teams on libgomp: when non-zero,
``__kmpc_fork_call`` (and the threaded GEMM driver of ``gemm_driver``) runs the region on the
calling thread alone instead of through ``GOMP_parallel``.  Why: libgomp is not fork-safe; a child
forked after the parent started libgomp's threads waits forever on the first parallel region, since
those threads do not exist in the child.  ``openmp`` sets the switch of every such kernel in such a
child (``os.register_at_fork``), and of those it loads there, so the child computes the same results
on one thread (as PyTorch does with its own OpenMP).  Defined by the kernel's own module
(``define_serial_switch``); the prebuilt objects refer to it."""

PREFIX = "mind_kmpc_"
"""What ``__kmpc_`` becomes in an adapted module and in the support object."""

MAX_FORK_ARGS = 16
"""Arguments a fork may pass to its task (MLIR passes one: a struct of the captured values)."""

# What the support object needs from libgomp.
GOMP_FUNCTIONS = ("GOMP_parallel", "GOMP_barrier", "omp_get_thread_num", "omp_get_num_threads")

_TEAM = "@mind_kmpc.team"  # the pushed team size (0: libgomp's default)

_SIMPLE = {
    "__kmpc_global_thread_num": """\
define hidden i32 @{p}global_thread_num(ptr %loc) {{
  %t = call i32 @omp_get_thread_num()
  ret i32 %t
}}
""",
    "__kmpc_push_num_threads": """\
define hidden void @{p}push_num_threads(ptr %loc, i32 %gtid, i32 %n) {{
  store atomic i32 %n, ptr {team} monotonic, align 4
  ret void
}}
""",
    "__kmpc_for_static_fini": """\
define hidden void @{p}for_static_fini(ptr %loc, i32 %gtid) {{
  ret void
}}
""",
    "__kmpc_barrier": """\
define hidden void @{p}barrier(ptr %loc, i32 %gtid) {{
  call void @GOMP_barrier()
  ret void
}}
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
        f"define hidden void @{PREFIX}for_static_init_{suffix}(ptr %loc, i32 %gtid, i32 %sched, ptr %plast, "
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


def _fork_call() -> str:
    """``__kmpc_fork_call`` (variadic) + the trampoline ``GOMP_parallel`` runs on each thread.

    The variadic pointers are copied into an array of ``MAX_FORK_ARGS`` (``adaptable`` admits no
    fork with more; the copy is bounded by it all the same); the trampoline calls the task with its
    ``argc`` arguments through a switch, one case per count."""
    n = MAX_FORK_ARGS
    cases = " ".join(f"i32 {k}, label %c{k}" for k in range(n + 1))
    lines = [
        "define internal void @mind_kmpc.trampoline(ptr %ctx) {",
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
        f"define hidden void @{PREFIX}fork_call(ptr %loc, i32 %argc, ptr %task, ...) {{",
        "entry:",
        "  %ap = alloca [24 x i8], align 8",  # the x86-64 System V va_list
        f"  %args = alloca [{n} x ptr], align 8",
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
        "serial.run:",  # a forked child: the parent's thread pool does not exist here
        "  call void @mind_kmpc.trampoline(ptr %ctx)",
        "  ret void",
        "team:",
        f"  %size = load atomic i32, ptr {_TEAM} monotonic, align 4",
        "  call void @GOMP_parallel(ptr @mind_kmpc.trampoline, ptr %ctx, i32 %size, i32 0)",
        "  ret void",
        "}",
    ]
    return "\n".join(lines) + "\n"


_DEFINITIONS = ("__kmpc_global_thread_num", "__kmpc_push_num_threads", "__kmpc_for_static_fini", "__kmpc_barrier",
                "__kmpc_for_static_init_4u", "__kmpc_for_static_init_8u", "__kmpc_fork_call")
_EXTERNAL_DECLS = (
    "declare void @GOMP_parallel(ptr, ptr, i32, i32)",
    "declare void @GOMP_barrier()",
    "declare i32 @omp_get_thread_num()",
    "declare i32 @omp_get_num_threads()",
    "declare void @llvm.va_start.p0(ptr)",
    "declare void @llvm.va_end.p0(ptr)",
)


def support_module() -> str:
    """LLVM IR of the prebuilt ``openmp-gomp`` object: every function of ``_DEFINITIONS`` under its
    ``PREFIX`` name, hidden, on top of libgomp; the serial switch is the kernel's (external)."""
    out = [f"{_TEAM} = internal global i32 0, align 4",
           f"@{SERIAL_SWITCH} = external global i32, align 4", ""]
    out += [text.format(p=PREFIX, team=_TEAM) for text in _SIMPLE.values()]
    out += [_static_init(32), _static_init(64), _fork_call()]
    out += list(_EXTERNAL_DECLS)
    return "\n".join(out) + "\n"


def support_symbols() -> tuple[str, ...]:
    """The functions the support object defines (hidden: bound inside each kernel's library)."""
    return tuple(PREFIX + name[len("__kmpc_"):] for name in _DEFINITIONS)


_STATIC_INIT_CALL = re.compile(r"@__kmpc_for_static_init_(4u|8u)\(ptr [^,]+, i32 [^,]+, i32 (-?\d+|%[-\w.$]+), "
                               r"ptr [^,]+, ptr [^,]+, ptr [^,]+, ptr [^,]+, i(?:32|64) ([^,]+), i(?:32|64) ([^)]+)\)")
_PUSH_CALL = re.compile(r"@__kmpc_push_num_threads\(ptr [^,]+, i32 [^,]+, i32 ([^)]+)\)")
_FORK_CALL = re.compile(r"@__kmpc_fork_call\(ptr [^,]+, i32 ([^,]+), ")
_KMPC_NAME = re.compile(r"@(__kmpc_[\w.$]+)\(")
STATIC_UNCHUNKED = 34


def _kmpc_used(ir_text: str) -> set[str]:
    return set(_KMPC_NAME.findall(ir_text))


def _count_calls(ir_text: str, name: str) -> int:
    return sum(1 for _ in re.finditer(r"call [^@\n]*@" + name + r"\(", ir_text))


def adaptable(ir_text: str) -> bool:
    """Whether every ``__kmpc_*`` use of the module is in the subset defined here (see the module
    docstring); also true for a module without any."""
    used = _kmpc_used(ir_text)
    if not used <= set(_DEFINITIONS):
        return False
    for m in _STATIC_INIT_CALL.finditer(ir_text):
        if (m.group(2), m.group(3), m.group(4)) != (str(STATIC_UNCHUNKED), "1", "0"):
            return False
    if _count_calls(ir_text, "__kmpc_for_static_init_(?:4u|8u)") != sum(1 for _ in _STATIC_INIT_CALL.finditer(ir_text)):
        return False  # a call this module cannot read
    forks = [m.group(1) for m in _FORK_CALL.finditer(ir_text)]
    if len(forks) != _count_calls(ir_text, "__kmpc_fork_call") or \
            not all(a.isdigit() and int(a) <= MAX_FORK_ARGS for a in forks):
        return False
    pushes = _PUSH_CALL.findall(ir_text)
    if len(pushes) != _count_calls(ir_text, "__kmpc_push_num_threads"):
        return False
    if pushes and len(pushes) != len(forks):
        return False  # the pushed size would reach forks that did not ask for it
    return len(set(pushes)) <= 1 and all(p.isdigit() for p in pushes)


def defines_serial_switch(ir_text: str) -> bool:
    """Whether the module ``ir_text`` defines ``SERIAL_SWITCH``."""
    return re.search(rf"^@{SERIAL_SWITCH} = (?:dso_local )?global ", ir_text, re.M) is not None


def define_serial_switch(ir_text: str) -> str:
    """``ir_text`` defining ``SERIAL_SWITCH`` (exported, 0) if it does not yet.  On a line of its own:
    LLVM's printed modules end without a newline, and a definition glued to their last line was not
    seen by a second call (a module with parallel loops that calls the threaded GEMM driver then
    defined the switch twice: 'redefinition of global')."""
    if defines_serial_switch(ir_text):
        return ir_text
    sep = "" if not ir_text or ir_text.endswith("\n") else "\n"
    return ir_text + sep + f"@{SERIAL_SWITCH} = global i32 0, align 4\n"


def link_kmpc_on_gomp(ir_text: str) -> str:
    """``ir_text`` calling the support object instead of ``__kmpc_*`` (the caller checks
    ``adaptable`` first; a module without ``__kmpc_*`` comes back unchanged).  The module defines the
    serial switch when it forks; the object (``kernel_library``) must be linked with it."""
    if not _kmpc_used(ir_text):
        return ir_text
    renamed = ir_text.replace("@__kmpc_", "@" + PREFIX)
    return define_serial_switch(renamed) if "__kmpc_fork_call" in _kmpc_used(ir_text) else renamed
