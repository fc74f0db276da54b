"""The ``cpu`` backend: Core IR functions compiled to native code through MLIR and LLVM.

``compile_function(fn, **options)`` returns a runner ``runner(args) -> list[np.ndarray]`` (args: a
sequence in parameter order or a mapping by parameter name).  Each call binds the arguments with
the reference interpreter's ``bind_arguments`` (same checks and diagnostics: E6009/E6010), so
symbolic dims get their values from the arrays; the function is specialized to those values the
first time they are seen, and the compiled kernel is kept in memory keyed by the symbol values
(the engine also caches the shared library on disk, keyed by a SHA-256 of the MLIR text, the
pipeline, the thread count and the target, so a second process starts warm).  A second key, from the
canonical Core IR text (``mind.ir.printer``), the symbol values, the options, the target, the
toolchain and the backend sources, aliases that entry: a warm start looks it up before emitting any
MLIR, so it costs printing + hashing the Core IR, a JSON read and a ``dlopen``.

``emit_stage(module, "mlir" | "llvm")`` prints a stage for ``mind ir --emit``.  Only functions
whose parameter types are concrete can be printed: a function with symbolic dims raises E6003
asking for concrete shapes (the text depends on them).

"""

from __future__ import annotations

import os
import threading
from typing import Any, Mapping, Sequence

import numpy as np

from mind.backends import check_out
from mind.diagnostics import error
from mind.ir.core import Function, Module
from mind.calling import bind_arguments, canonical_bools
from mind.reference.memory import CHECK_FROM, check_memory

from .abi import ELEMENT_TYPES, ArgSpec, Signature
from .cache import ir_cache_key
from .emit import ELEM, emit_mlir, kernel_name, specialize_type
# the engine imports neither MLIR nor llvmlite; importing it here keeps module loading out of the
# first call (the warm-start path is then printing + hashing the Core IR, a JSON read and a dlopen)
from .engine import compile_kernel, library_key, load_cached, matmul_library, resolve_options, schedule_policy
from .outputs import new_output

__all__ = ["compile_function", "emit_stage", "CpuFunction", "kernel_signature"]

_KNOWN_OPTIONS = ("threads", "schedule", "cpu", "cache", "opt", "matmul")

MAX_KERNEL_ARGUMENTS = 1024
"""A kernel takes one pointer per parameter and one per result, and it is called through ctypes,
whose foreign calls take at most 1024 arguments (``CTYPES_MAX_ARGCOUNT``); a function with more is
refused when it is compiled (E6003), before any work."""


def _materializes(op: Any) -> bool:
    """The values a kernel certainly holds in full (``mind.reference.memory``): besides its result
    buffers, the results of contractions, which it always writes whole; elementwise ops, movements
    and reductions may be fused into their consumers and never stored."""
    return op.op in ("matmul", "conv2d")


AUTO_PARALLEL_MIN_WORK = 1 << 25
"""Below this ``work_estimate`` a default-threaded function runs on one thread.

On an idle machine a second thread already pays from ~1 M element operations (matmuls on the 2-core
test machine, median per call at 1 / 2 threads: 32x256x256 22.5 / 16.0 µs, 32x784x256 61 / 43 µs,
128x256x512 153 / 87 µs; train_step at B=32 216 / 165 µs), but it has two costs that a per-call
median does not show: starting the OpenMP runtime in every process (~0.5 ms with libgomp, 2.5-6 ms
with Intel OpenMP, see ``openmp``); and when another process holds a core the workers' barrier
waits for it (128x256x512: 297 µs at 2 threads vs 160 µs at 1 on a busy machine; a 32x784x256
layer once 265 vs 60 µs).  Cold compiles gain little: a threaded module compiles on two cores
but its OpenMP lowering adds MLIR work (train_step, 4 interleaved pairs: 320-334 ms at 2 threads
vs 341-361 ms at 1, within this machine's noise).  Up to here one thread is already faster than NumPy's multi-threaded BLAS on these
shapes; above it the second core's gain dominates.  ``threads=`` or ``$MIND_NUM_THREADS`` overrides
the choice (a long training loop wants ``threads=2``)."""


def work_estimate(fn: Function, env: Mapping[str, int]) -> int:
    """A rough count of element operations: the result size of every op, times the contraction
    length for matmul/conv2d; an op reading a larger operand (a reduction) counts that operand."""
    total = 0
    shapes: dict[Any, tuple[int, ...]] = {}  # values repeat a few shapes; a symbolic one costs substitutions

    def shape(t: Any) -> tuple[int, ...]:
        s = shapes.get(t.shape)
        if s is None:
            s = shapes[t.shape] = _shape(t, env)
        return s
    try:
        for op in fn.ops:
            n = _prod(shape(op.result.type))
            ins = [shape(v.type) for v in op.operands]
            if op.op == "matmul" and ins and ins[0]:
                n *= ins[0][-1]
            elif op.op == "conv2d" and len(ins) > 1 and len(ins[1]) == 4:
                n *= ins[1][0] * ins[1][1] * ins[1][2]
            else:
                n = max([n] + [_prod(s) for s in ins])
            total += n
    except Exception:  # noqa: BLE001 - an estimate only: unknown means "large"
        return AUTO_PARALLEL_MIN_WORK
    return total


def _shape(t: Any, env: Mapping[str, int]) -> tuple[int, ...]:
    return specialize_type(t, env)[1]


def kernel_signature(fn: Function, env: Mapping[str, int]) -> Signature:
    """The signature of ``fn``'s kernel specialized to ``env``, from the Core IR alone (what
    ``emit.emit_mlir`` declares): a cached kernel is loaded with this one, never with what its
    sidecar says."""
    def spec(t: Any) -> ArgSpec:
        dtype, shape = specialize_type(t, env)
        return ArgSpec(ELEMENT_TYPES[ELEM[dtype]], shape)
    return Signature(kernel_name(fn), tuple(spec(p.type) for p in fn.params), tuple(spec(r.type) for r in fn.results))


def _numel(t: Any, env: Mapping[str, int]) -> int:
    return _prod(_shape(t, env))


def _prod(shape: Sequence[int]) -> int:
    n = 1
    for d in shape:
        n *= int(d)
    return n


class CpuFunction:
    """A Core IR function with its compiled specializations (one per symbol environment).

    ``threads`` (default: ``$MIND_NUM_THREADS`` or the CPU count, but 1 for functions whose
    ``work_estimate`` is below ``AUTO_PARALLEL_MIN_WORK`` when neither is given explicitly).

    ``schedule`` (default True) tiles and vectorizes the ops that have a validated schedule (2-D
    matmul, fills, elementwise chains and reductions; see ``transforms.schedule_module``) and enough
    work to pay for their compile time (``transforms.MIN_SCHEDULE_WORK``); every other op is lowered
    to scalar loops.  ``"all"`` schedules every op that has a schedule, however small.
    ``$MIND_CPU_SCHEDULE`` (``0``, ``1`` or ``all``) sets the default for a process.

    ``matmul`` (default ``$MIND_CPU_MATMUL`` or ``"library"``): f32/f64 matmuls with as much work call
    the prebuilt GEMM of ``kernel_library`` where the host runs one of its variants; ``"schedule"``
    compiles them per program with the transform schedule instead.
    """

    def __init__(self, fn: Function, *, threads: int | None = None, schedule: bool | str | None = None, cpu: str = "host",
                 cache: Any = True, opt: str = "fast", matmul: str | None = None) -> None:
        self.fn = fn
        n_args = len(fn.params) + len(fn.results)
        if n_args > MAX_KERNEL_ARGUMENTS:
            raise error("E6003", f"@{fn.name} has {len(fn.params)} parameters and {len(fn.results)} results; "
                                 f"a cpu kernel takes at most {MAX_KERNEL_ARGUMENTS} of them together (one "
                                 "pointer each, passed through ctypes, which limits a call to "
                                 f"{MAX_KERNEL_ARGUMENTS} arguments)", fn.span,
                        help="pack parameters into fewer, larger tensors, or use --backend reference")
        schedule = schedule_policy(schedule)
        # E6012 on a bad choice (or a damaged library), before any call; resolved once
        self._library = matmul_library(cpu, matmul)
        self.options = {"threads": threads, "schedule": schedule, "cpu": cpu, "cache": cache, "opt": opt,
                        "matmul": matmul}
        self._kernels: dict[tuple[tuple[str, int], ...], Any] = {}
        self._needs: dict[tuple[tuple[str, int], ...], int] = {}  # memory estimate per environment
        self._lock = threading.Lock()
        self._out_specs = None
        self._ir_text: str | None = None
        self._input_specs: list[tuple[np.dtype, tuple[int, ...]]] | None = None

    def kernel(self, env: Mapping[str, int]) -> Any:
        key = tuple(sorted(env.items()))
        k = self._kernels.get(key)
        if k is None:
            with self._lock:
                k = self._kernels.get(key)
                if k is None:
                    # E6004 before compiling a kernel that could not run here
                    self._needs[key] = check_memory(self.fn, env, _materializes, "cpu")
                    k = self._compile(env)
                    self._kernels[key] = k
        elif self._needs.get(key, 0) >= CHECK_FROM:  # memory may have gone since: check again
            check_memory(self.fn, env, _materializes, "cpu")
        return k

    def _compile(self, env: Mapping[str, int]) -> Any:
        """Disk-cache hit by the Core-IR key first (no MLIR emission), else emit and compile."""
        opts = dict(self.options)
        threads = opts["threads"]
        if threads is None and not os.environ.get("MIND_NUM_THREADS") and \
                work_estimate(self.fn, env) < AUTO_PARALLEL_MIN_WORK:
            threads = 1  # too little work to pay for waking and joining OpenMP workers
        opts["threads"] = resolve_options(threads, opts["cpu"])
        alias = None
        signature = kernel_signature(self.fn, env)
        if opts["cache"] is not False and opts["cache"] is not None:
            if self._ir_text is None:
                from mind.ir.printer import print_function
                self._ir_text = print_function(self.fn)
            alias = ir_cache_key(self._ir_text, dict(env), threads=opts["threads"], schedule=opts["schedule"],
                                 cpu=opts["cpu"], opt=str(opts["opt"]), matmul=library_key(self._library, opts["threads"]))
            k = load_cached(alias, opts["threads"], opts["cache"], signature=signature, library=self._library)
            if k is not None:
                return k
        text, name = emit_mlir(self.fn, env)
        return compile_kernel(text, name, alias=alias, signature=signature, **opts)

    supports_out = True

    def __call__(self, args: Sequence[Any] | Mapping[str, Any],
                 out: Sequence[np.ndarray] | None = None) -> list[np.ndarray]:
        """Run on ``args``; ``out`` (one preallocated array per result: exact shape and dtype,
        C-contiguous, writeable, not overlapping an input) receives the results, else new arrays
        are allocated.  A wrong ``out`` raises E6009 before anything runs."""
        fast = self._static_inputs(args)
        if fast is not None:
            k, ins = fast
        else:
            k, ins = self._bound_inputs(args)
        if out is None:
            try:
                outs = [new_output(o.shape, o.dtype) for o in k.signature.outputs]
            except MemoryError:
                raise error("E6004", f"cannot allocate the results of @{self.fn.name}",
                            help="run it on smaller inputs, or on a machine with more memory") from None
        else:
            outs = check_out(self.fn.name, out, k.signature.outputs, ins)
        k(*ins, out=outs)
        return outs

    def _static_inputs(self, args: Any) -> tuple[Any, list[np.ndarray]] | None:
        """The common call, without the general argument binding: a function without symbolic dims
        whose kernel exists, called positionally with arrays (or numpy scalars) of exactly the
        parameter dtypes and shapes.  None sends anything else through ``_bound_inputs``, which
        also reports what is wrong (E6009/E6010)."""
        k = self._kernels.get(())  # present only for a function without symbols (env {})
        if k is None or type(args) not in (list, tuple) or len(args) != len(k.signature.inputs) \
                or self._needs.get((), 0) >= CHECK_FROM:  # (large: the general path checks memory)
            return None
        specs = self._input_specs
        if specs is None:
            specs = self._input_specs = [(np.dtype(s.dtype), tuple(s.shape)) for s in k.signature.inputs]
        ins = []
        for a, (dtype, shape) in zip(args, specs):
            a = np.asarray(a)
            if a.dtype != dtype or a.shape != shape or not a.flags.c_contiguous:
                return None
            ins.append(canonical_bools(a) if dtype == np.bool_ else a)
        return k, ins

    def _bound_inputs(self, args: Sequence[Any] | Mapping[str, Any]) -> tuple[Any, list[np.ndarray]]:
        """Bind ``args`` to the parameters (symbols, checks), pick the kernel, and make the arrays
        C-contiguous in the kernel's dtypes."""
        arrays, env = bind_arguments(self.fn, args)  # (bools made 0/1 there)
        k = self.kernel(env)
        ins = []
        for a, spec in zip(arrays, k.signature.inputs):
            if not a.flags.c_contiguous:
                a = np.ascontiguousarray(a).reshape(a.shape)
            if a.dtype != np.dtype(spec.dtype):
                a = a.astype(spec.dtype)
            ins.append(a)
        return k, ins


def compile_function(fn: Function, **options: Any) -> CpuFunction:
    unknown = sorted(set(options) - set(_KNOWN_OPTIONS))
    if unknown:
        raise error("E6002", f"unknown cpu backend option(s): {', '.join(unknown)}",
                    help="options: " + ", ".join(_KNOWN_OPTIONS))
    return CpuFunction(fn, **options)


def _concrete_env(fn: Function) -> dict[str, int]:
    syms = fn.symbols()
    if syms:
        raise error("E6003", f"@{fn.name} has symbolic dims ({', '.join(syms)}); the compiled code is "
                             "specialized per concrete shape",
                    help="give the parameters concrete shapes to print the MLIR/LLVM stages")
    return {}


def emit_stage(module: Module | Function, stage: str, fn: str | None = None) -> str:
    """The MLIR text (``"mlir"``) or LLVM IR (``"llvm"``) of every function of ``module``."""
    if stage not in ("mlir", "llvm"):
        raise error("E6002", f"unknown stage `{stage}`", help="stages: mlir, llvm")
    fns = [module] if isinstance(module, Function) else list(module.functions)
    if fn is not None:
        fns = [f for f in fns if f.name == fn]
    parts = []
    for f in fns:
        text, name = emit_mlir(f, _concrete_env(f))
        if stage == "mlir":
            parts.append(text)
        else:
            from .engine import matmul_library, mlir_to_llvm_ir
            parts.append(mlir_to_llvm_ir(text, name, threads=1, library=matmul_library("host")).llvm_ir)
    return "\n".join(parts)
