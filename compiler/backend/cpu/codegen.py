"""LLVM IR text -> optimized object file -> in-process code (ORC JIT) or a shared library (``ld``).

Why a shared library: loading one with ``ctypes.CDLL`` costs well under a millisecond and needs
neither MLIR nor LLVM in the process, so a cache hit starts warm (see ``cache``).  Why a JIT too: a
freshly compiled object is callable sooner in-process (JITLink, under a millisecond) than through
``ld`` (a subprocess, 4-5 ms) and ``dlopen``; the engine links the .so in the background.
MLIR's IR carries no triple or data layout: both are set here, and an LLVM pipeline ("fast": a short
function pipeline for scheduled code, "loops": O2 for scalar loop nests, "full": O3; see
``_optimize``) runs before code generation.
``cpu="generic"`` pins a portable x86-64 target for reproducible objects; ``"host"`` (default) uses
the host CPU and its features (AVX-512 here).
"""

from __future__ import annotations

import itertools
import os
import threading
from typing import Any, Sequence

__all__ = ["CodegenError", "optimize_and_emit_object", "optimize_and_emit_objects", "link_shared",
           "linker_available", "JitObject", "OPT_LEVELS"]


class CodegenError(Exception):
    """llvmlite rejected the IR, or linking failed."""


_INIT = False
"""Whether LLVM's native target and assembly printer are initialized in this process."""


def _llvm() -> Any:
    global _INIT
    import llvmlite.binding as llvm
    if not _INIT:
        # llvmlite >= 0.44 initializes the core itself; only targets and printers are needed.
        llvm.initialize_native_target()
        llvm.initialize_native_asmprinter()
        _INIT = True
    return llvm


class _Unlocked:
    """The three long llvmlite calls (parse, pass pipeline, object emission) without llvmlite's
    process-wide lock, so that parts of a split module compile on two cores at once.

    Why it is safe: llvmlite serializes every call into LLVM with one lock; LLVM itself only needs
    that objects of one ``LLVMContext`` (module, types) are not used by two threads at once.  Each
    part gets its own context, module, target machine, pass builder and pass manager, created here
    and never shared.  The raw ctypes functions are new objects for the same symbols, with the
    argument and result types llvmlite declares for them (llvmlite is pinned)."""

    _fns: dict[str, Any] = {}  # llvmlite's C functions as fresh ctypes objects, once per process

    @classmethod
    def fn(cls, name: str) -> Any:
        f = cls._fns.get(name)
        if f is None:
            from llvmlite.binding import ffi
            declared = getattr(ffi.lib, name)  # llvmlite's locked wrapper, types declared
            f = ffi.lib._lib[name]  # a fresh ctypes function: not the one the wrapper holds
            f.argtypes, f.restype = declared.argtypes, declared.restype
            cls._fns[name] = f
        return f

    @classmethod
    def parse(cls, text: str, context: Any) -> Any:
        import ctypes

        from llvmlite.binding import ffi
        from llvmlite.binding.module import ModuleRef
        with ffi.OutputString() as err:
            mod = ModuleRef(cls.fn("LLVMPY_ParseAssembly")(context, ctypes.c_char_p(text.encode("utf-8")), err),
                            context)
            if err:
                mod.close()
                raise RuntimeError(f"LLVM IR parsing error\n{err}")
        return mod

    @classmethod
    def run(cls, pm: Any, mod: Any, pb: Any) -> None:
        cls.fn("LLVMPY_RunNewModulePassManager")(pm, mod, pb)

    @classmethod
    def emit_object(cls, tm: Any, mod: Any) -> bytes:
        import ctypes

        from llvmlite.binding import ffi
        with ffi.OutputString() as err:
            buf = cls.fn("LLVMPY_TargetMachineEmitToMemory")(tm, mod, 1, err)
            if not buf:
                raise RuntimeError(str(err))
        try:
            return ctypes.string_at(ffi.lib.LLVMPY_GetBufferStart(buf), ffi.lib.LLVMPY_GetBufferSize(buf))
        finally:
            ffi.lib.LLVMPY_DisposeMemoryBuffer(buf)


FIXED_TRIPLE = "x86_64-unknown-linux-gnu"
FIXED_TARGETS = ("x86-64-v4", "x86-64-v3", "x86-64")
"""x86-64 micro-architecture levels LLVM knows by name: v4 = AVX-512 (F, BW, CD, DQ, VL), v3 = AVX2 + FMA,
plain x86-64 = the baseline every x86-64 CPU runs."""

_HOST: dict[str, tuple[str, str]] = {}
"""The host CPU's name and features as LLVM sees them: a fact of the process, queried once."""


def _target_machine(cpu: str) -> Any:
    llvm = _llvm()
    triple = llvm.get_process_triple()
    target = llvm.Target.from_triple(triple)
    if cpu == "host":
        host = _HOST.get("host")
        if host is None:  # a query costs time and its answer is constant for the process
            host = _HOST["host"] = (llvm.get_host_cpu_name(), llvm.get_host_cpu_features().flatten())
        name, features = host
    elif cpu == "generic":
        name, features = "x86-64" if triple.startswith("x86_64") else "generic", ""
    elif cpu in FIXED_TARGETS:
        # a named instruction set (the prebuilt objects of ``kernel_library``): the same object on
        # every machine, so triple and CPU are fixed and nothing is read from the host
        triple = FIXED_TRIPLE
        target = llvm.Target.from_triple(triple)
        name, features = cpu, ""
    else:
        raise CodegenError(f"unknown cpu option {cpu!r} (use 'host', 'generic' or one of {FIXED_TARGETS})")
    return target.create_target_machine(cpu=name, features=features, opt=3, reloc="pic",
                                        codemodel="default")


OPT_LEVELS = ("fast", "full")
"""The user-facing levels; ``engine`` maps "fast" to "loops" for a kernel with large scalar loops."""


def _optimize(ir_text: str, cpu: str, level: str = "full") -> tuple[Any, Any]:
    llvm = _llvm()
    tm = _target_machine(cpu)
    try:
        # a private LLVM context per kernel: the global one would keep every kernel's types and
        # constants for the life of the process (the module holds the context alive)
        mod = _Unlocked.parse(ir_text, llvm.create_context())
        mod.triple = tm.triple
        mod.data_layout = str(tm.target_data)
        mod.verify()
    except RuntimeError as e:
        raise CodegenError(f"llvmlite could not parse the LLVM IR: {e}") from None
    if level == "full":
        pto = llvm.create_pipeline_tuning_options(speed_level=3)
        pto.loop_vectorization = True
        pto.slp_vectorization = True
    elif level == "loops":
        # O2 without LLVM's unroller and vectorizers: its loop passes (LICM, rotation, induction
        # variables) matter for scalar loop nests, which an unscheduled kernel is made of, and its
        # unroller and vectorizers multiply the compile time of such nests.  The loop vectorizer
        # still runs on the loops marked for it (``movement_loops``: slices, copies, fills).
        pto = llvm.create_pipeline_tuning_options(speed_level=2)
        pto.loop_unrolling = False
        pto.loop_vectorization = False
        pto.slp_vectorization = False
    elif level == "fast":
        # MLIR's schedules already tiled, vectorized and hoisted the hot loops, and its IR is in SSA
        # form with no allocas in loops: a short function pipeline (SROA, instcombine, GVN, DCE,
        # CFG cleanup) gives the same run times as O2 (within noise on the benchmark programs) at
        # a third of its cost; LLVM's codegen still runs its own loop
        # strength reduction and machine LICM.
        pb = llvm.create_pass_builder(tm, llvm.create_pipeline_tuning_options(speed_level=0))
        pm = llvm.create_new_module_pass_manager()
        pm.add_sroa_pass()
        pm.add_instruction_combine_pass()
        pm.add_simplify_cfg_pass()
        pm.add_new_gvn_pass()
        pm.add_instruction_combine_pass()
        pm.add_aggressive_dce_pass()
        pm.add_simplify_cfg_pass()
        _Unlocked.run(pm, mod, pb)
        return mod, tm
    else:
        raise CodegenError(f"unknown LLVM optimization level {level!r} (use one of {OPT_LEVELS})")
    pb = llvm.create_pass_builder(tm, pto)
    _Unlocked.run(pb.getModulePassManager(), mod, pb)
    return mod, tm


def optimize_and_emit_object(ir_text: str, cpu: str = "host", level: str = "full") -> bytes:
    """Optimize (``level``: "full" = O3 with LLVM's vectorizers and unroller, "loops" = O2 without
    them, "fast" = a short function pipeline for scheduled code) + object file bytes (position
    independent, ready for ``link_shared`` or ``JitObject``)."""
    mod, tm = _optimize(ir_text, cpu, level)
    try:
        return _Unlocked.emit_object(tm, mod)
    except RuntimeError as e:
        raise CodegenError(f"LLVM code generation failed: {e}") from None


def optimize_and_emit_objects(ir_text: str, cpu: str = "host", level: str = "full") -> list[bytes]:
    """``optimize_and_emit_object`` on the parts of ``llvm_split.split_module``, the second part on
    another thread (the two compile on two cores: llvmlite's calls release the GIL and ``_Unlocked``
    skips its lock); one object when the module is not worth splitting.  Link the objects together
    (``link_shared``, ``JitObject``)."""
    from .llvm_split import split_module
    parts = split_module(ir_text)
    if parts is None:
        return [optimize_and_emit_object(ir_text, cpu, level)]
    _llvm()
    _target_machine(cpu)  # the host query and the first-use set-up, once, before the threads
    results: list[Any] = [None] * len(parts)

    def work(i: int) -> None:
        try:
            results[i] = optimize_and_emit_object(parts[i], cpu, level)
        except BaseException as e:  # noqa: BLE001 - re-raised in the caller's thread
            results[i] = e

    helpers = [threading.Thread(target=work, args=(i,), name=f"mind-codegen-{i}") for i in range(1, len(parts))]
    for t in helpers:
        t.start()
    work(0)
    for t in helpers:
        t.join()
    for r in results:
        if isinstance(r, BaseException):
            raise r
    return results


class JitObject:
    """Object files linked and loaded in-process by LLVM's ORC JIT with JITLink (no linker process,
    no file): ``address(symbol)`` of the symbols named in ``exports``.

    Why JITLink and not MCJIT: JITLink places all the sections of one object (code, constants,
    GOT, stubs) in one mapping, and reaches anything outside it (another part of a split kernel, a
    prebuilt object, libc, the OpenMP runtime) through a GOT entry or a stub it adds, so no
    PC-relative reference crosses mappings.  MCJIT's memory manager maps code and constants
    separately wherever the address space has room; in a long, fragmented process they landed more
    than 2 GiB apart and LLVM aborted the process (``docs/backend-cpu.md``, Loading).

    All objects go into one JIT library of their own (a ``JITDylib``, named uniquely: a name is
    never reused), searched before the process's own symbols.  The code lives as long as this
    object; the kernel that calls it keeps a reference.
    """

    _JIT: list[Any] = []  # the process's one ORC JIT, created on first use
    _LOCK = threading.Lock()
    _NAMES = itertools.count()

    def __init__(self, objs: bytes | Sequence[bytes], libs: list[str] | None = None,
                 externals: Sequence[str] = (), exports: Sequence[str] = ()) -> None:
        llvm = _llvm()
        for lib in libs or []:
            _load_permanently(lib)
        # a missing function would fail the link with a message naming it; ours says what it is
        missing = [name for name in externals if not _in_process(name)]
        if missing:
            raise CodegenError(f"the kernel needs functions that nothing provides: {', '.join(missing)}")
        builder = llvm.JITLibraryBuilder()
        for obj in [objs] if isinstance(objs, bytes) else objs:
            builder.add_object_img(obj)
        builder.add_current_process()
        for name in exports:
            builder.export_symbol(name)
        try:
            with self._LOCK:
                if not self._JIT:
                    self._JIT.append(llvm.create_lljit_compiler(use_jit_link=True, suppress_errors=True))
                self._tracker = builder.link(self._JIT[0], f"mind-kernel-{next(self._NAMES)}")
        except RuntimeError as e:
            raise CodegenError(f"in-process loading of the object failed: {e}") from None
        self._exports = frozenset(exports)

    def address(self, symbol: str) -> int:
        """Address of ``symbol`` (one of ``exports``), or 0 if it was not exported."""
        return int(self._tracker[symbol]) if symbol in self._exports else 0

    data_address = address
    """The same for a global variable: JITLink resolves data and functions alike."""


def _in_process(symbol: str) -> bool:
    """Whether the process's global scope defines ``symbol`` (libc, the libraries loaded for good):
    what the JIT's search of the process finds."""
    import ctypes
    try:
        ctypes.CDLL(None)[symbol]
    except AttributeError:
        return False
    return True


_PERMANENT: set[str] = set()
"""The libraries loaded into the process for in-process kernels (the OpenMP runtime), their symbols
visible to the JIT's search of the process: loaded once, for good."""


def _load_permanently(lib: str) -> None:
    if lib not in _PERMANENT:
        _llvm().load_library_permanently(lib)
        _PERMANENT.add(lib)


def linker_available() -> str | None:
    """Path of a usable ``ld`` (binutils), or None."""
    import shutil
    return shutil.which("ld") or shutil.which("ld.bfd") or shutil.which("ld.gold")


def link_shared(objs: bytes | Sequence[bytes], out_path: str, libs: list[str] | None = None, *,
                background: bool = False) -> str:
    """Link the object(s) into ``out_path`` (a .so) with ``ld -shared``; atomic (temp + os.replace).
    Returns the SHA-256 (hex) of the bytes published, hashed before they are (the cache's sidecar
    records it).  The library is published mode 0755 whatever the umask (the cache refuses files
    that group or others may write).

    The temporary folder is ``.link-*`` beside ``out_path``: a process killed while linking leaves
    it, and ``cache_store.sweep_debris`` removes it later (by that name, once it is old).

    ``background``: nobody waits for this link (the engine's cache write after an in-process load),
    so ``ld`` runs at the lowest priority: on a 2-core machine it otherwise takes a core from the kernel's
    first call, and a threaded kernel then waits at every barrier for its descheduled worker."""
    import hashlib
    import subprocess  # imported here: an in-process (JIT) compile links nothing on its own path
    import tempfile
    ld = linker_available()
    if ld is None:
        raise CodegenError("no system linker (ld) found")
    d = os.path.dirname(os.path.abspath(out_path))
    os.makedirs(d, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=d, prefix=".link-") as tmp:
        paths = []
        for i, obj in enumerate([objs] if isinstance(objs, bytes) else objs):
            paths.append(os.path.join(tmp, f"k{i}.o"))
            with open(paths[-1], "wb") as f:
                f.write(obj)
        so = os.path.join(tmp, "k.so")
        # -Bsymbolic: the references between a kernel's parts (``llvm_split``) bind inside the library
        cmd = [ld, "-shared", "-Bsymbolic", "--hash-style=gnu", "--build-id=none", "-z", "now", "-o", so, *paths]
        for lib in libs or []:
            cmd += [lib, "-rpath", os.path.dirname(lib)]
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        if background:
            _lowest_priority(proc.pid)
        _, err = proc.communicate()
        if proc.returncode != 0:
            raise CodegenError(f"linking failed: {err.strip()}")
        os.chmod(so, 0o755)
        with open(so, "rb") as f:
            digest = hashlib.sha256(f.read()).hexdigest()
        os.replace(so, out_path)
    return digest


def _lowest_priority(pid: int) -> None:
    """Give ``pid`` the lowest priority (nice 19: a small share of a core that a busy thread also
    wants, yet never starved, unlike ``SCHED_IDLE``, which a loaded machine could stall until the
    process exits).  Lowering one's own child needs no privilege; if it is already gone, nothing is
    lost."""
    try:
        os.setpriority(os.PRIO_PROCESS, pid, 19)
    except (AttributeError, OSError):
        pass
