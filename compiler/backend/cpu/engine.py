"""Execution engine: compile an MLIR kernel module to a native callable taking numpy arrays.

Flow: key -> on-disk cache hit (``ctypes.CDLL`` of a cached .so, no MLIR import) or miss (MLIR
schedule + lowering -> LLVM IR -> llvmlite O3 object -> ``ld -shared`` -> cache).  Any failure on
the way (MLIR parse/verify/pass errors with MLIR's diagnostics, invalid options, llvmlite, linking,
loading) is raised as ``MindError`` E6012; nothing here crashes the caller.  The call itself goes
through ctypes, which releases the GIL, with zero-copy descriptors over the numpy buffers.
"""

from __future__ import annotations

import ctypes
import os
import tempfile
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from mind.diagnostics import MindError, error

from .abi import AbiError, Signature, make_arguments
from .cache import KernelCache, cache_key
from .openmp import find_openmp_runtime, load_openmp_runtime
from .pipeline import PipelineError, full_pipeline

__all__ = ["Kernel", "compile_kernel", "load_cached", "resolve_options", "translate_to_llvm_ir", "mlir_to_llvm_ir", "default_threads"]

E_BACKEND = "E6012"


def default_threads() -> int:
    """``$MIND_NUM_THREADS`` or the number of CPUs."""
    env = os.environ.get("MIND_NUM_THREADS")
    if env and env.isdigit() and int(env) > 0:
        return int(env)
    return os.cpu_count() or 1


def _fail(message: str, notes: Sequence[str] = ()) -> MindError:
    return error(E_BACKEND, message, notes=list(notes)[:50])


@dataclass
class Kernel:
    """A compiled kernel: call it with numpy arrays; returns the output array(s)."""

    signature: Signature
    threads: int
    library_path: str
    from_cache: bool
    scheduled: bool | None = None
    _lib: Any = field(default=None, repr=False)
    _fn: Any = field(default=None, repr=False)

    def __call__(self, *inputs: np.ndarray, out: Sequence[np.ndarray] | None = None) -> Any:
        sig = self.signature
        outs = list(out) if out is not None else \
            [np.empty(o.shape, dtype=np.dtype(o.dtype)) for o in sig.outputs]
        if len(outs) != len(sig.outputs):
            raise _fail(f"kernel '{sig.name}' has {len(sig.outputs)} outputs, got {len(outs)} out arrays")
        try:
            descs = make_arguments(sig, inputs, outs)
        except AbiError as e:
            raise _fail(f"kernel '{sig.name}': {e}") from None
        self._fn(*[ctypes.addressof(d) for d in descs])  # ctypes releases the GIL during the call
        return outs[0] if len(outs) == 1 else tuple(outs)


def _load(path: str, sig: Signature, threads: int, from_cache: bool, scheduled: bool | None) -> Kernel:
    if threads > 1:
        load_openmp_runtime()
    try:
        lib = ctypes.CDLL(path)
        fn = getattr(lib, f"_mlir_ciface_{sig.name}")
    except (OSError, AttributeError) as e:
        raise _fail(f"could not load compiled kernel '{sig.name}': {e}") from None
    fn.restype = None
    fn.argtypes = [ctypes.c_void_p] * (len(sig.inputs) + len(sig.outputs))
    return Kernel(sig, threads, path, from_cache, scheduled, lib, fn)


def resolve_options(threads: int | None, cpu: str) -> int:
    """The effective thread count (validated; 1 without an OpenMP runtime); E6012 on bad options."""
    if threads is None:
        threads = default_threads()
    if not isinstance(threads, int) or isinstance(threads, bool) or threads < 1:
        raise _fail(f"thread count must be a positive integer, got {threads!r}")
    if threads > 1 and find_openmp_runtime() is None:
        threads = 1
    if cpu not in ("host", "generic"):
        raise _fail(f"unknown cpu option {cpu!r} (use 'host' or 'generic')")
    return threads


def load_cached(key: str, threads: int, cache: KernelCache | bool = True) -> Kernel | None:
    """The kernel stored under ``key`` (an MLIR-text key or an alias such as ``cache.ir_cache_key``),
    or None: a hit is a JSON read and a ``dlopen``, no MLIR emission or import."""
    store = KernelCache.default() if cache is True else (cache or None)
    if store is None:
        return None
    hit = store.lookup(key)
    if hit is None:
        return None
    so, meta = hit
    return _load(so, Signature.from_json(meta["signature"]), threads, True, meta.get("scheduled"))


def compile_kernel(mlir_text: str, func_name: str, *, threads: int | None = None, schedule: bool = True,
                   cpu: str = "host", cache: KernelCache | bool = True, alias: str | None = None) -> Kernel:
    """Compile ``func_name`` of ``mlir_text`` and return a callable kernel.

    The function takes its inputs as ranked tensors and writes its results into memref
    out-parameters (see ``abi``).  ``threads`` (default ``default_threads()``) > 1 parallelizes the
    ``scf.forall`` loops of the schedule with OpenMP; without an OpenMP runtime it falls back to 1.
    ``schedule`` applies the tiling/vectorization scripts of ``transforms``.  ``cache``: True for the
    default folder, a ``KernelCache``, or False for none (the library then lives in a temp folder).
    ``alias``: a second key (the Core-IR key of ``api``) recorded as pointing at this entry.
    Raises ``MindError`` E6012 on any failure.
    """
    threads = resolve_options(threads, cpu)
    try:
        pipeline_text = full_pipeline(threads).render()
    except PipelineError as e:
        raise _fail(str(e)) from None
    store = KernelCache.default() if cache is True else (cache or None)
    key = cache_key(mlir_text, func_name, pipeline=pipeline_text, threads=threads, schedule=schedule, cpu=cpu)
    if store is not None:
        hit = store.lookup(key)
        if hit is not None:
            so, meta = hit
            if alias is not None:
                _store_alias(store, alias, key, meta)
            return _load(so, Signature.from_json(meta["signature"]), threads, True, meta.get("scheduled"))

    lowered = mlir_to_llvm_ir(mlir_text, func_name, threads=threads, schedule=schedule)
    from .codegen import CodegenError, link_shared, optimize_and_emit_object
    libs = [p] if threads > 1 and (p := find_openmp_runtime()) else []
    try:
        obj = optimize_and_emit_object(lowered.llvm_ir, cpu)
        if store is not None:
            so, _ = store.paths(key)
            link_shared(obj, so, libs)
            meta = {"signature": lowered.signature.to_json(), "scheduled": lowered.scheduled,
                    "threads": threads, "cpu": cpu}
            store.store_metadata(key, meta)
            if alias is not None:
                _store_alias(store, alias, key, meta)
        else:
            tmp = tempfile.mkdtemp(prefix="mind-kernel-")
            so = os.path.join(tmp, f"{key}.so")
            link_shared(obj, so, libs)
    except CodegenError as e:
        raise _fail(f"native code generation failed for '{func_name}': {e}") from None
    except OSError as e:
        raise _fail(f"could not write the compiled kernel for '{func_name}': {e}") from None
    return _load(so, lowered.signature, threads, False, lowered.scheduled)


def _store_alias(store: KernelCache, alias: str, key: str, meta: dict[str, Any]) -> None:
    if alias == key:
        return
    body = {k: v for k, v in meta.items() if k != "format"}
    body["alias_of"] = key
    try:
        store.store_metadata(alias, body)
    except OSError:
        pass  # an alias is an optimization only


def mlir_to_llvm_ir(mlir_text: str, func_name: str, *, threads: int = 1, schedule: bool = True) -> Any:
    """MLIR text -> ``lowering.Lowered`` (LLVM IR text + signature); failures become E6012."""
    from .lowering import LoweringError, lower_to_llvm_ir
    try:
        return lower_to_llvm_ir(mlir_text, func_name, threads=threads, schedule=schedule)
    except LoweringError as e:
        raise _fail(f"MLIR compilation of '{func_name}' failed at stage '{e.stage}'",
                    notes=[str(e).split("\n", 1)[0]] + e.diagnostics) from None
    except MindError:
        raise
    except Exception as e:  # noqa: BLE001 - anything from the bindings must not escape as a crash
        raise _fail(f"MLIR compilation of '{func_name}' failed: {type(e).__name__}: {e}") from None


def translate_to_llvm_ir(module: Any) -> str:
    """LLVM IR text of an LLVM-dialect ``mlir.ir.Module`` (mlirTranslateModuleToLLVMIRToString)."""
    from .lowering import LoweringError
    from .lowering import translate_to_llvm_ir as _translate
    try:
        return _translate(module)
    except LoweringError as e:
        raise _fail(str(e)) from None
