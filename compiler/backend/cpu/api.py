"""The ``cpu`` backend: Core IR functions compiled to native code through MLIR and LLVM.

``compile_function(fn, **options)`` resolves the options once (``options.CpuOptions``: keywords, then
the environment, then the defaults) and returns a runner ``runner(args) -> list[np.ndarray]`` (args: a
sequence in parameter order or a mapping by parameter name).  A call binds the arguments with
``mind.calling.bind_arguments`` (the checks and diagnostics of every backend: E6009/E6010), so
symbolic dims get their values from the arrays; the function is specialized to those values the
first time they are seen, and the compiled kernel is kept in memory keyed by the symbol values
(later calls with arrays of shapes bound before go straight to that kernel's prepared checks,
``CpuFunction._prepared_call``, and anything those refuse is bound in full again)
(the engine also caches the shared library on disk, keyed by a SHA-256 of the MLIR text, the
pipeline, the thread count and the target, so a second process starts warm).  A second key, from the
canonical Core IR text (``mind.ir.printer``), the symbol values, the options, the target, the
toolchain and the backend sources, aliases that entry: a warm start looks it up before emitting any
MLIR, so it costs printing + hashing the Core IR, a JSON read and a ``dlopen``.

``emit_stage(module, "mlir" | "llvm", **options)`` prints a stage for ``mind ir --emit`` (one thread
unless ``threads`` says otherwise).  Only functions
whose parameter types are concrete can be printed: a function with symbolic dims raises E6003
asking for concrete shapes (the text depends on them).

"""

from __future__ import annotations

import threading
from typing import Any, Mapping, Sequence

import numpy as np

from mind.backends import check_out
from mind.diagnostics import MindError, error
from mind.runtime import heap
from mind.ir.core import Function, Module
from mind.spec.dtypes import DType
from mind.calling import bind_arguments, canonical_bools
from mind.reference.memory import CHECK_FROM, check_memory

from .abi import ELEMENT_TYPES, ArgSpec, Signature
from .cache import ir_cache_key
from ..linalg.emit import ELEM, emit_mlir, kernel_name, specialize_type
# the engine imports neither MLIR nor llvmlite; importing it here keeps module loading out of the
# first call (the warm-start path is then printing + hashing the Core IR, a JSON read and a dlopen)
from .engine import compile_kernel, load_cached
from .options import CpuOptions
from .thread_cost import kernel_cost

__all__ = ["compile_function", "emit_stage", "emit_cpu_mlir", "CpuFunction", "kernel_signature"]

MAX_KERNEL_ARGUMENTS = 1024
"""A kernel takes one pointer per parameter and one per result, and it is called through ctypes,
whose foreign calls take at most 1024 arguments (``CTYPES_MAX_ARGCOUNT``); a function with more is
refused when it is compiled (E6003), before any work."""


def _materializes(op: Any) -> bool:
    """The values a kernel certainly holds in full (``mind.reference.memory``): besides its result
    buffers, the results of contractions, which it always writes whole; elementwise ops, movements
    and reductions may be fused into their consumers and never stored."""
    return op.op in ("matmul", "conv2d")


def _check_memory(fn: Function, env: Mapping[str, int]) -> int:
    """``check_memory`` for the cpu backend: the blocks the kernels' heap cache holds
    (``mind.runtime.heap``) are memory this process kept for later calls, not memory it needs, so
    they are given back before a call is refused (E6004)."""
    try:
        return check_memory(fn, env, _materializes, "cpu")
    except MindError:
        if not heap.release():
            raise
        return check_memory(fn, env, _materializes, "cpu")


def kernel_signature(fn: Function, env: Mapping[str, int]) -> Signature:
    """The signature of ``fn``'s kernel specialized to ``env``, from the Core IR alone (what
    ``emit.emit_mlir`` declares): a cached kernel is loaded with this one, never with what its
    sidecar says."""
    def spec(t: Any) -> ArgSpec:
        dtype, shape = specialize_type(t, env)
        return ArgSpec(ELEMENT_TYPES[ELEM[dtype]], shape)
    return Signature(kernel_name(fn), tuple(spec(p.type) for p in fn.params), tuple(spec(r.type) for r in fn.results))


class CpuFunction:
    """A Core IR function with its compiled specializations (one per symbol environment), compiled
    with the resolved ``options`` (see ``options.KNOBS`` for what each does)."""

    def __init__(self, fn: Function, options: CpuOptions) -> None:
        self.fn = fn
        n_args = len(fn.params) + len(fn.results)
        if n_args > MAX_KERNEL_ARGUMENTS:
            raise error("E6003", f"@{fn.name} has {len(fn.params)} parameters and {len(fn.results)} results; "
                                 f"a cpu kernel takes at most {MAX_KERNEL_ARGUMENTS} of them together (one "
                                 "pointer each, passed through ctypes, which limits a call to "
                                 f"{MAX_KERNEL_ARGUMENTS} arguments)", fn.span,
                        help="pack parameters into fewer, larger tensors, or use --backend reference")
        self.options = options
        self._kernels: dict[tuple[tuple[str, int], ...], Any] = {}
        self._needs: dict[tuple[tuple[str, int], ...], int] = {}  # memory estimate per environment
        self._lock = threading.Lock()
        self._ir_text: str | None = None
        # the kernels of argument shapes bound before (``_remember``): the one of a function
        # without symbols, and those of a function with symbols by their inputs' shapes
        self._static: Any = None
        self._by_shapes: dict[tuple[tuple[int, ...], ...], Any] = {}
        self._bool_params = tuple(i for i, p in enumerate(fn.params) if p.type.dtype is DType.BOOL)

    def kernel(self, env: Mapping[str, int]) -> Any:
        key = tuple(sorted(env.items()))
        k = self._kernels.get(key)
        if k is None:
            with self._lock:
                k = self._kernels.get(key)
                if k is None:
                    # E6004 before compiling a kernel that could not run here
                    self._needs[key] = _check_memory(self.fn, env)
                    k = self._compile(env)
                    self._kernels[key] = k
        elif self._needs.get(key, 0) >= CHECK_FROM:  # memory may have gone since: check again
            _check_memory(self.fn, env)
        return k

    def _compile(self, env: Mapping[str, int]) -> Any:
        """Disk-cache hit by the Core-IR key first (no MLIR emission), else emit and compile."""
        options = self.options.for_kernel(kernel_cost(self.fn, env) if self.options.threads is None else None)
        alias = None
        signature = kernel_signature(self.fn, env)
        if options.cache is not None:
            if self._ir_text is None:
                self._ir_text = self.fn.canonical_text
            if self._ir_text is None:
                from mind.ir.printer import print_function
                self._ir_text = print_function(self.fn)
            alias = ir_cache_key(self._ir_text, dict(env), options.fingerprint())
            k = load_cached(alias, options, signature=signature)
            if k is not None:
                return k
        text, name = emit_cpu_mlir(self.fn, env, options.library, options.cpu)
        return compile_kernel(text, name, options, alias=alias, signature=signature)

    supports_out = True

    def __call__(self, args: Sequence[Any] | Mapping[str, Any],
                 out: Sequence[np.ndarray] | None = None) -> list[np.ndarray]:
        """Run on ``args``; ``out`` (one preallocated array per result: exact shape and dtype,
        C-contiguous, writeable, not overlapping an input) receives the results, else new arrays
        are allocated.  A wrong ``out`` raises E6009 before anything runs."""
        if type(args) is tuple or type(args) is list:
            k = self._static
            if k is not None and out is None and not self._bool_params:  # the common call, written out
                try:
                    outs = k.new_outputs()
                except MemoryError:
                    outs = self._outputs(k, None, args)  # (E6004)
                if k.binder.call(k._fn, args, outs, True):
                    return outs
            outs = self._prepared_call(args, out)
            if outs is not None:
                return outs
        k, ins = self._bound_inputs(args)
        outs = self._outputs(k, out, ins)
        k(*ins, out=outs)
        return outs

    def _outputs(self, k: Any, out: Sequence[np.ndarray] | None, ins: Sequence[Any]) -> list[np.ndarray]:
        """``out`` checked against ``k``'s results (E6009), or new result arrays (E6004 when they
        cannot be allocated)."""
        if out is not None:
            return check_out(self.fn.name, out, k.signature.outputs, ins)
        try:
            return k.new_outputs()
        except MemoryError:
            raise error("E6004", f"cannot allocate the results of @{self.fn.name}",
                        help="run it on smaller inputs, or on a machine with more memory") from None

    def _prepared_call(self, args: Sequence[Any], out: Sequence[np.ndarray] | None) -> list[np.ndarray] | None:
        """A call without the general argument binding: arguments positional, of shapes that an
        earlier call bound to a kernel (``_remember``), each an array (or a scalar) of exactly its
        parameter's dtype and layout (``ArgBinder.call``'s quick checks).  None, with nothing run,
        sends anything else through ``bind_arguments``, which also reports what is wrong
        (E6009/E6010)."""
        k = self._static
        if k is None:
            if not self._by_shapes:
                return None
            try:
                k = self._by_shapes.get(tuple([a.shape for a in args]))
            except AttributeError:  # not arrays: the general path converts them
                return None
            if k is None:
                return None
        if self._bool_params:
            args = list(args)
            for i in self._bool_params:
                args[i] = canonical_bools(np.asarray(args[i]))
        # given ``out`` arrays: the quick checks hold them to what ``check_out`` asks, and anything
        # else goes to the general path, which reports it after the arguments' own diagnostics
        outs = self._outputs(k, out, args) if out is None else list(out) if type(out) in (list, tuple) else [out]
        call = k.binder.call
        if call(k._fn, args, outs, out is None):
            return outs
        if all(type(a) is np.ndarray for a in args):
            return None
        args = [np.asarray(a) for a in args]  # numpy or Python scalars, as bind_arguments reads them
        return outs if call(k._fn, args, outs, out is None) else None

    def _remember(self, env: Mapping[str, int], k: Any, ins: Sequence[np.ndarray]) -> None:
        """Record ``k`` as the kernel of arguments of ``ins``' shapes, which ``bind_arguments`` has
        just accepted (every check that depends on more than dtypes and shapes, the assumptions,
        holds for every call with these shapes), unless its memory needs are checked on every call
        (``check_memory``)."""
        key = tuple(a.shape for a in ins)
        if key in self._by_shapes or self._needs.get(tuple(sorted(env.items())), 0) >= CHECK_FROM:
            return
        with self._lock:
            if env:
                self._by_shapes[key] = k
            else:
                self._static = k

    def _bound_inputs(self, args: Sequence[Any] | Mapping[str, Any]) -> tuple[Any, list[np.ndarray]]:
        """Bind ``args`` to the parameters (symbols, checks), pick the kernel, and make the arrays
        C-contiguous in the kernel's dtypes."""
        arrays, env = bind_arguments(self.fn, args)  # (bools made 0/1 there)
        k = self.kernel(env)
        self._remember(env, k, arrays)
        ins = []
        for a, spec in zip(arrays, k.signature.inputs):
            if not a.flags.c_contiguous:
                a = np.ascontiguousarray(a).reshape(a.shape)
            if a.dtype != np.dtype(spec.dtype):
                a = a.astype(spec.dtype)
            ins.append(a)
        return k, ins


def compile_function(fn: Function, **options: Any) -> CpuFunction:
    """The ``cpu`` backend's runner of ``fn``: ``options`` (``options.KNOBS``) resolved once, here."""
    return CpuFunction(fn, CpuOptions.resolve(options))


def _concrete_env(fn: Function) -> dict[str, int]:
    syms = fn.symbols()
    if syms:
        raise error("E6003", f"@{fn.name} has symbolic dims ({', '.join(syms)}); the compiled code is "
                             "specialized per concrete shape",
                    help="give the parameters concrete shapes to print the MLIR/LLVM stages")
    return {}


def emit_cpu_mlir(fn: Function, env: Mapping[str, int], library: str | None,
                  cpu: str = "x86-64-v4") -> tuple[str, str]:
    """The MLIR text of ``fn`` as the CPU backend compiles it (``emit.emit_mlir``): pads fill only
    their border, matmuls read a transposed lhs or rhs in place where the prebuilt GEMM of
    ``library`` does (``library_calls.transposed_operands``; so are the matmuls of several or broadcast
    batch dims it computes as ``linalg.contract``), and convs are as wide
    as the register blocks of ``cpu``'s vector unit take (``conv_schedule.block_pixels``)."""
    from .conv_schedule import block_pixels
    from .library_calls import transposed_operands  # the GEMM's build side: never imported on a cache hit
    from .vector_unit import vector_unit
    transposed = transposed_operands(library)
    return emit_mlir(fn, env, transposed, pad_border=True, conv_pixels=block_pixels(vector_unit(cpu)),
                     transposed_rhs=transposed, contractions=transposed)


def emit_stage(module: Module | Function, stage: str, fn: str | None = None, **options: Any) -> str:
    """The MLIR text (``"mlir"``) or LLVM IR (``"llvm"``) of every function of ``module`` (or of
    ``fn``), compiled with ``options`` (one thread unless they say otherwise)."""
    if stage not in ("mlir", "llvm"):
        raise error("E6002", f"unknown stage `{stage}`", help="stages: mlir, llvm")
    resolved = CpuOptions.resolve({"threads": 1, **options})
    fns = [module] if isinstance(module, Function) else list(module.functions)
    if fn is not None:
        fns = [f for f in fns if f.name == fn]
    parts = []
    for f in fns:
        text, name = emit_cpu_mlir(f, _concrete_env(f), resolved.library, resolved.cpu)
        if stage == "mlir":
            parts.append(text)
        else:
            from .engine import mlir_to_llvm_ir
            parts.append(mlir_to_llvm_ir(text, name, resolved).llvm_ir)
    return "\n".join(parts)
