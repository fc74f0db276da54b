"""Execution engine: compile an MLIR kernel module to a native callable taking numpy arrays.

Flow: key -> on-disk cache hit (``ctypes.CDLL`` of a cached .so through the descriptor its hash was
checked on, no MLIR or llvmlite import; a damaged entry is evicted with a warning and rebuilt) or
miss (MLIR schedule + lowering -> LLVM IR -> llvmlite object (``opt``: "fast" O2 by default) ->
loaded in-process by LLVM's ORC JIT (JITLink) for the first call while a background thread links
the same objects with ``ld -shared`` into the cache (published atomically); with the option
``jit=False``, linked with ``ld`` first and loaded as a .so (``docs/backend-cpu.md``, Loading).
Every function here takes the resolved ``CpuOptions``.  Any failure on the way (MLIR
parse/verify/pass errors with MLIR's diagnostics, invalid options, llvmlite, linking, loading) is
raised as ``MindError`` E6012; nothing here crashes the caller (a failed background cache write only means the next process misses).  The
call itself goes through ctypes, which releases the GIL, with zero-copy descriptors over the numpy
buffers.
"""

from __future__ import annotations

import ctypes
import itertools
import os
import threading
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np

from mind.diagnostics import MindError, error

from mind.cache_store import EntryProblem, evict, sweep_debris
from mind.runtime import heap

from .abi import AbiError, ArgBinder, Signature, mlir_signature
from .cache import MAX_LIBRARY_BYTES, Expected, KernelCache, mlir_cache_key
from .kmpc_gomp import SERIAL_SWITCH
from .openmp import OpenMPUnavailable, bind_runtime, load_openmp_runtime, register_serial_switch, runtime_path
from .options import CpuOptions
from .outputs import results_factory

__all__ = ["Kernel", "compile_kernel", "load_cached", "mlir_to_llvm_ir", "wait_for_cache_writes"]

E_BACKEND = "E6012"


def _fail(message: str, notes: Sequence[str] = ()) -> MindError:
    return error(E_BACKEND, message, notes=list(notes)[:50])


@dataclass
class Kernel:
    """A compiled kernel: call it with numpy arrays; returns the output array(s).

    ``library_path``: its shared library; for a kernel loaded in-process (the JIT), where the
    background job publishes the .so (see ``wait_stored``), or "" when there is no cache.
    ``matmul_library``: the ``kernel_library`` instruction set whose GEMM its matmuls call (None:
    it calls none)."""

    signature: Signature
    threads: int
    library_path: str
    from_cache: bool
    scheduled: bool | None = None
    matmul_library: str | None = None
    _lib: Any = field(default=None, repr=False)
    _fn: Any = field(default=None, repr=False)
    _stored: Any = field(default=None, repr=False)
    binder: ArgBinder = field(init=False, repr=False, compare=False)
    new_outputs: Callable[[], list[np.ndarray]] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        # prepared once: the argument checks and descriptor frames of the signature, and the
        # function that allocates one call's results (``outputs.results_factory``)
        self.binder = ArgBinder(self.signature)
        self.new_outputs = results_factory([(o.shape, o.dtype) for o in self.signature.outputs])

    def wait_stored(self, timeout: float | None = None) -> bool:
        """For a kernel loaded in-process: wait until its .so and sidecar are in the disk cache.
        True when the entry is complete (or the kernel came from a .so already)."""
        return True if self._stored is None else self._stored.wait(timeout)

    def __call__(self, *inputs: np.ndarray, out: Sequence[np.ndarray] | None = None) -> Any:
        sig = self.signature
        fresh = out is None
        outs = self.new_outputs() if fresh else list(out)  # type: ignore[arg-type]
        if len(outs) != len(sig.outputs):
            raise _fail(f"kernel '{sig.name}' has {len(sig.outputs)} outputs, got {len(outs)} out arrays")
        if not self.binder.call(self._fn, inputs, outs, fresh):
            try:
                self.binder.call_checked(self._fn, inputs, outs)
            except AbiError as e:
                raise _fail(f"kernel '{sig.name}': {e}") from None
        return outs[0] if len(outs) == 1 else tuple(outs)


def _load(path: str, sig: Signature, options: CpuOptions, from_cache: bool, scheduled: bool | None,
          openmp: str | None, library: str | None = None, *, library_path: str | None = None) -> Kernel:
    """Load the shared library at ``path`` (for a checked cache entry, ``_dlopen_checked``'s name;
    ``library_path``: where it lives, for ``Kernel.library_path``), built for the OpenMP ABI ``openmp``."""
    if openmp is not None and load_openmp_runtime(openmp, options.openmp_lib) is None:
        raise _fail(f"could not load compiled kernel '{sig.name}': it needs an OpenMP runtime with the "
                    f"'{openmp}' ABI, and none was found")
    try:
        lib = ctypes.CDLL(path)
        fn = getattr(lib, f"_mlir_ciface_{sig.name}")
    except (OSError, AttributeError) as e:
        raise _fail(f"could not load compiled kernel '{sig.name}': {e}") from None
    if openmp == "gomp":
        try:
            register_serial_switch(lib, ctypes.addressof(ctypes.c_int32.in_dll(lib, SERIAL_SWITCH)))
        except ValueError:
            pass  # no parallel region: nothing to switch
    heap.attach_library(lib)
    fn.restype = None
    fn.argtypes = [ctypes.c_void_p] * (len(sig.inputs) + len(sig.outputs))
    return Kernel(sig, options.threads, library_path or path, from_cache, scheduled, library, lib, fn)


_PROC_FD = os.path.isdir("/proc/self/fd")
_LOADS = itertools.count()
"""Numbers the ``.load-*`` names this process gives checked libraries (``_dlopen_checked``)."""


def _dlopen_checked(fd: int, path: str) -> str:
    """Make the file open as ``fd`` (a checked cache library at ``path``) loadable by a name that
    ``dlopen`` resolves to that very file, whatever happens to ``path`` meanwhile; returns the name.
    The caller loads it, then calls ``_unlink_name``.

    The name is a symbolic link to ``/proc/self/fd/N`` beside ``path`` (in a checked folder), named
    after the process and a counter: given a name it has loaded before, the dynamic loader returns
    that library without opening anything, and ``/proc/self/fd/N`` names different files as
    descriptors are reused.  A process killed in between leaves the link, which
    ``cache_store.sweep_debris`` removes (``.load-*``).  Without ``/proc`` (not Linux), or where the
    link cannot be made (a folder the user made read-only), ``path`` itself: the folder's checks
    still hold, only the window between hashing and loading is open."""
    if not _PROC_FD:
        return path
    name = os.path.join(os.path.dirname(path), f".load-{os.getpid()}-{next(_LOADS)}.so")
    try:
        try:
            os.symlink(f"/proc/self/fd/{fd}", name)
        except FileExistsError:  # left by a killed process with this pid
            os.unlink(name)
            os.symlink(f"/proc/self/fd/{fd}", name)
    except OSError:
        return path
    return name


def _unlink_name(name: str, path: str) -> None:
    if name != path:
        try:
            os.unlink(name)
        except OSError:
            pass


def _load_entry(store: KernelCache, key: str, expected: Expected,
                options: CpuOptions) -> tuple[Kernel, dict[str, Any]] | None:
    """The kernel of ``key``'s checked entry (``KernelCache.lookup``) and its sidecar, or None; an
    entry whose library does not load (or lacks the kernel) is evicted with a warning, so the caller
    rebuilds it."""
    entry = store.lookup(key, expected)
    if entry is None:
        return None
    meta = entry.meta
    name = entry.library_path
    try:
        name = _dlopen_checked(entry.fd, entry.library_path)
        return _load(name, expected.signature, options, True, meta.get("scheduled"), meta.get("openmp"),
                     meta.get("matmul_library"), library_path=entry.library_path), meta
    except MindError as e:
        evict(entry.files, f"it does not load ({e.diagnostics[0].message})")
        return None
    finally:
        _unlink_name(name, entry.library_path)
        entry.close()


def _expected(signature: Signature, options: CpuOptions) -> Expected:
    """What a load of a kernel compiled with ``options`` may accept (``cache.Expected``)."""
    return Expected(signature, options.openmp_abis(), options.library)


def load_cached(key: str, options: CpuOptions, *, signature: Signature) -> Kernel | None:
    """The kernel stored under ``key`` (an MLIR-text key or an alias such as ``cache.ir_cache_key``)
    in the options' cache, or None: a hit is a JSON read, a SHA-256 and a ``dlopen``, no MLIR
    emission or import.  ``options``: decided for this kernel (``CpuOptions.for_kernel``);
    ``signature``: the kernel's, recomputed from its program (``api.kernel_signature``).  E7010 when
    the cache folder is not safe to use."""
    if options.cache is None:
        return None
    hit = _load_entry(options.cache, key, _expected(signature, options), options)
    return hit[0] if hit is not None else None


def compile_kernel(mlir_text: str, func_name: str, options: CpuOptions, *, alias: str | None = None,
                   signature: Signature | None = None) -> Kernel:
    """Compile ``func_name`` of ``mlir_text`` with ``options`` and return a callable kernel.

    The function takes its inputs as ranked tensors and writes its results into memref
    out-parameters (see ``abi``).  The options' thread count, if not decided, is
    (``CpuOptions.for_kernel``) the CPU count; more than one thread parallelizes the ``scf.forall``
    loops of the schedule with OpenMP.  ``options.schedule`` applies the tiling/vectorization scripts
    of ``transforms`` to the ops large enough to pay for their compile time; "all" to every op that
    has one.  ``options.cache``: the kernel cache, or None.  ``alias``: a second key (the Core-IR key
    of ``api``) recorded as pointing at this entry.  ``signature``: the kernel's signature as its
    program gives it (``api.kernel_signature``); by default it is read from the function's header in
    ``mlir_text`` (``abi.mlir_signature``; a kernel whose header is not in the plain form is not
    cached).  ``options.opt``: LLVM optimization, "fast" (a short function pipeline for scheduled
    kernels, O2 without LLVM's unroller and vectorizers for kernels with large scalar loops; see
    ``codegen._optimize``) or "full" (O3 with them).  ``options.jit``: load the new object
    in-process with the ORC JIT and link the cache's .so in a background thread (published
    atomically when done; ``Kernel.wait_stored``), instead of linking with ``ld`` before the first
    call.  The object
    code is the same either way.  ``options.library``: the prebuilt GEMM the matmuls call (its object
    is linked into the kernel).  Raises ``MindError`` E6012 on any failure, E7010 when the cache
    folder is not safe to use.
    """
    options = options.for_kernel()
    threads, cpu, opt = options.threads, options.cpu, options.opt
    store = options.cache
    expected_sig = signature if signature is not None else mlir_signature(mlir_text, func_name)
    if expected_sig is None:
        store = None  # nothing to check a hit against: compile every time
    key = mlir_cache_key(mlir_text, func_name, options.fingerprint())
    if store is not None:
        hit = _load_entry(store, key, _expected(expected_sig, options), options)  # type: ignore[arg-type]
        if hit is not None:
            if alias is not None:
                _store_alias(store, alias, key, hit[1])
            return hit[0]

    lowered = mlir_to_llvm_ir(mlir_text, func_name, options)
    if expected_sig is not None and lowered.signature != expected_sig:
        raise _fail(f"internal error: the signature of '{func_name}' its program gives, {expected_sig}, "
                    f"differs from the compiled one, {lowered.signature}")
    from .codegen import CodegenError, JitObject, link_shared, optimize_and_emit_objects
    from .kernel_library import LibraryError, calls_driver, damaged, object_bytes, objects_for
    from .kernel_library import OBJECTS as LIBRARY_OBJECTS
    from .runtime import external_functions
    from .transforms import MIN_SCHEDULE_WORK
    try:
        llvm_ir, openmp = bind_runtime(lowered.llvm_ir, options.abi, options.openmp_lib,
                                       teams=lowered.library is not None and calls_driver(lowered.llvm_ir))
    except OpenMPUnavailable as e:
        raise _fail(f"native code generation failed for '{func_name}': {e}") from None
    libs = [p] if openmp and (p := runtime_path(openmp, options.openmp_lib)) else []
    try:
        # large scalar loop nests (unscheduled ops) need LLVM's loop passes; see codegen._optimize
        loops = (not lowered.scheduled and lowered.library is None) or lowered.scalar_work >= MIN_SCHEDULE_WORK
        level = "loops" if opt == "fast" and loops else opt
        objs = optimize_and_emit_objects(llvm_ir, cpu, level)  # large modules: in parts, 2 cores
    except CodegenError as e:
        raise _fail(f"native code generation failed for '{func_name}': {e}") from None
    externals = external_functions(llvm_ir)
    linked = objects_for(llvm_ir, lowered.library, openmp, cpu)
    for name in linked:
        try:
            objs.append(object_bytes(name))  # checked against the manifest's SHA-256
        except LibraryError as e:
            raise damaged(e, name) from None
    provided = set().union(*(LIBRARY_OBJECTS[name].defines() for name in linked))
    needed = [n for name in linked for n in LIBRARY_OBJECTS[name].needs()]
    externals = sorted({name for name in externals if name not in provided} | set(needed))
    meta = {"signature": lowered.signature.to_json(), "scheduled": lowered.scheduled,
            "threads": threads, "cpu": cpu, "opt": opt, "openmp": openmp, "matmul_library": lowered.library}
    if store is not None:
        if sum(len(o) for o in objs) > MAX_LIBRARY_BYTES:
            store = None  # too large to store (and to hash on every start): linked outside the cache
        else:
            sweep_debris(store.root)  # what killed processes left (once per process)
            store.folder(key, create=True)
    if options.jit:
        if openmp is not None:
            load_openmp_runtime(openmp, options.openmp_lib)
        try:
            jobj = JitObject(objs, libs, externals, _exports(lowered.signature, llvm_ir, linked))
        except CodegenError as e:
            raise _fail(f"native code generation failed for '{func_name}': {e}") from None
        so = store.paths(key)[0] if store is not None else None
        kernel = _from_address(jobj, lowered.signature, threads, so, lowered.scheduled, openmp, lowered.library)
        if store is not None:
            kernel._stored = _store_in_background(store, key, alias, objs, libs, meta)
        return kernel
    try:
        if store is not None:
            so, _ = store.paths(key)
            meta["library_sha256"] = link_shared(objs, so, libs)
            store.store_metadata(key, meta)
            if alias is not None:
                _store_alias(store, alias, key, meta)
            fd = store.open_library(so, meta["library_sha256"])
            name = so
            try:
                name = _dlopen_checked(fd, so)
                return _load(name, lowered.signature, options, False, lowered.scheduled, openmp, lowered.library,
                             library_path=so)
            finally:
                _unlink_name(name, so)
                os.close(fd)
        import shutil
        import tempfile
        tmp = tempfile.mkdtemp(prefix="mind-kernel-")
        try:
            so = os.path.join(tmp, f"{key}.so")
            link_shared(objs, so, libs)
            return _load(so, lowered.signature, options, False, lowered.scheduled, openmp, lowered.library)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)  # a loaded library needs no file
    except CodegenError as e:
        raise _fail(f"native code generation failed for '{func_name}': {e}") from None
    except EntryProblem as e:
        raise _fail(f"could not load the compiled kernel for '{func_name}': its library {e}") from None
    except OSError as e:
        raise _fail(f"could not write the compiled kernel for '{func_name}': {e}") from None


def _exports(sig: Signature, llvm_ir: str, linked: Sequence[str]) -> list[str]:
    """The symbols ``_from_address`` reads from a kernel loaded in-process: its entry point, the
    heap object's pointer and drain function when it is linked, the OpenMP serial switch when the
    module defines it (a JIT link fails on a symbol asked for and not defined)."""
    from .kmpc_gomp import defines_serial_switch
    names = [f"_mlir_ciface_{sig.name}"]
    if "heap" in linked:
        names += [heap.SYMBOL, heap.DRAIN_SYMBOL]
    if defines_serial_switch(llvm_ir):
        names.append(SERIAL_SWITCH)
    return names


def _from_address(jobj: Any, sig: Signature, threads: int, so: str | None, scheduled: bool | None,
                  openmp: str | None, library: str | None) -> Kernel:
    if openmp == "gomp":
        register_serial_switch(jobj, jobj.data_address(SERIAL_SWITCH))
    heap.attach(jobj.data_address(heap.SYMBOL), jobj.address(heap.DRAIN_SYMBOL), jobj)
    symbol = f"_mlir_ciface_{sig.name}"
    addr = jobj.address(symbol)
    if not addr:  # a lookup returns 0 for a missing symbol, where it should raise
        raise _fail(f"could not load compiled kernel '{sig.name}': no symbol {symbol}")
    proto = ctypes.CFUNCTYPE(None, *([ctypes.c_void_p] * (len(sig.inputs) + len(sig.outputs))))
    return Kernel(sig, threads, so or "", False, scheduled, library, jobj, proto(addr))


class _StoreJob:
    """A background thread linking an object into the cache (.so, then the sidecar, then the alias).

    Non-daemon: the interpreter waits for it at exit, so a finished process leaves complete entries;
    every file is published with ``os.replace``, so an interrupted job leaves no entry at all (and a
    killed one at most a ``.link-*`` folder, which ``cache_store.sweep_debris`` removes later).
    """

    def __init__(self, store: KernelCache, key: str, alias: str | None, objs: list[bytes], libs: list[str],
                 meta: dict[str, Any]) -> None:
        self.error: BaseException | None = None
        self._args = (store, key, alias, objs, libs, meta)
        self.thread = threading.Thread(target=self._run, name=f"mind-cache-{key[:8]}", daemon=False)

    def _run(self) -> None:
        from .codegen import link_shared
        store, key, alias, objs, libs, meta = self._args
        try:
            so, _ = store.paths(key)
            meta = dict(meta, library_sha256=link_shared(objs, so, libs, background=True))
            store.store_metadata(key, meta)
            if alias is not None:
                _store_alias(store, alias, key, meta)
        except BaseException as e:  # noqa: BLE001 - the cache is an optimization; the kernel works
            self.error = e
        finally:
            with _PENDING_LOCK:
                _PENDING.discard(self)

    def wait(self, timeout: float | None = None) -> bool:
        self.thread.join(timeout)
        return not self.thread.is_alive() and self.error is None


_PENDING: set[_StoreJob] = set()
_PENDING_LOCK = threading.Lock()
"""The background cache writes of this process still running (``wait_for_cache_writes``)."""


def _store_in_background(store: KernelCache, key: str, alias: str | None, objs: list[bytes], libs: list[str],
                         meta: dict[str, Any]) -> _StoreJob:
    job = _StoreJob(store, key, alias, objs, libs, meta)
    with _PENDING_LOCK:
        _PENDING.add(job)
    job.thread.start()
    return job


def wait_for_cache_writes(timeout: float | None = None) -> bool:
    """Wait until every background cache write of this process is done; True if all succeeded."""
    with _PENDING_LOCK:
        jobs = list(_PENDING)
    return all(j.wait(timeout) for j in jobs)


def _store_alias(store: KernelCache, alias: str, key: str, meta: dict[str, Any]) -> None:
    """Record ``alias`` as a second name of ``key``'s entry: a sidecar with ``key``'s (its library's
    SHA-256 included) and ``alias_of`` naming ``key``."""
    if alias == key:
        return
    body = {k: v for k, v in meta.items() if k not in ("format", "key", "alias_of")}
    body["alias_of"] = key
    try:
        store.store_metadata(alias, body)
    except (OSError, MindError):
        pass  # an alias is an optimization only


def mlir_to_llvm_ir(mlir_text: str, func_name: str, options: CpuOptions) -> Any:
    """MLIR text -> ``lowering.Lowered`` (LLVM IR text + signature) with ``options`` (its thread
    count decided as ``compile_kernel`` decides it); failures become E6012."""
    from .lowering import LoweringError, lower_to_llvm_ir
    try:
        return lower_to_llvm_ir(mlir_text, func_name, options.for_kernel())
    except LoweringError as e:
        raise _fail(f"MLIR compilation of '{func_name}' failed at stage '{e.stage}'",
                    notes=[str(e).split("\n", 1)[0]] + e.diagnostics) from None
    except MindError:
        raise
    except Exception as e:  # noqa: BLE001 - anything from the bindings must not escape as a crash
        raise _fail(f"MLIR compilation of '{func_name}' failed: {type(e).__name__}: {e}") from None
