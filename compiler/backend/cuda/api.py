"""The ``cuda`` backend: ``compile_function(fn, **options)`` returns a runner on NumPy arrays (or
device arrays), ``compile_program`` the kernels of one specialization (PTX, a cubin per
architecture, the launch plan: what ``mind build --target cuda`` writes), ``emit_ptx`` the PTX for
``mind ir --emit ptx``.

A runner needs a GPU and its driver (``mind.runtime.cuda``); without them a call is E6002, never a
traceback.  Compiling needs neither: PTX comes from MLIR and cubins from ``ptxas``.
"""

from __future__ import annotations

import threading
from typing import Any, Mapping, Sequence

from mind.diagnostics import MindError, error
from mind.ir.core import Function, Module
from mind.runtime.memref import ELEMENT_TYPES, ArgSpec, Signature

from ..linalg.emit import ELEM, emit_mlir, kernel_name, specialize_type
from .options import CudaOptions
from .ptxas import PtxasError, as_diagnostic, assemble

__all__ = ["compile_function", "compile_program", "emit_ptx", "CudaFunction", "Compiled"]


class Compiled:
    """One specialization: the launch ``plan``, the ``ptx`` of each kernel module and its ``cubins``
    (module -> architecture -> bytes)."""

    def __init__(self, plan: dict[str, Any], ptx: dict[str, str], cubins: dict[str, dict[str, bytes]]) -> None:
        self.plan, self.ptx, self.cubins = plan, ptx, cubins

    def images(self) -> dict[str, dict[str, bytes]]:
        """Per kernel module, what the runtime may load: ``ptx`` and each ``sm_XX`` cubin."""
        return {m: {"ptx": self.ptx[m].encode("utf-8"), **self.cubins[m]} for m in self.plan["modules"]}


def signature_of(fn: Function, env: Mapping[str, int]) -> Signature:
    def spec(t: Any) -> ArgSpec:
        dtype, shape = specialize_type(t, env)
        return ArgSpec(ELEMENT_TYPES[ELEM[dtype]], shape)
    return Signature(kernel_name(fn), tuple(spec(p.type) for p in fn.params), tuple(spec(r.type) for r in fn.results))


def _lower(fn: Function, env: Mapping[str, int], options: CudaOptions) -> Any:
    from .lowering import LoweringError, lower_to_ptx

    text, name = emit_mlir(fn, env)
    try:
        return lower_to_ptx(text, name, signature_of(fn, env), options)
    except LoweringError as e:
        if e.stage == "unsupported":
            raise error("E6003", f"@{fn.name} cannot run on the cuda backend: {str(e).split(chr(10))[0]}", fn.span,
                        help="run it with --backend cpu") from None
        raise error("E6012", f"CUDA compilation of '{name}' failed at stage '{e.stage}'",
                    notes=[str(e).split("\n", 1)[0]] + list(e.diagnostics)[:50]) from None
    except MindError:
        raise
    except Exception as e:  # noqa: BLE001 - anything from the bindings must not escape as a crash
        raise error("E6012", f"CUDA compilation of '{name}' failed: {type(e).__name__}: {e}") from None


def compile_program(fn: Function, env: Mapping[str, int], options: CudaOptions) -> Compiled:
    """The kernels of ``fn`` for the symbol values ``env``: PTX, and a cubin per ``options.sms``."""
    program = _lower(fn, env, options)
    cubins: dict[str, dict[str, bytes]] = {}
    for module, ptx in program.ptx.items():
        try:
            cubins[module] = {sm: assemble(ptx, sm, opt=options.ptxas_opt, configured=options.ptxas)
                              for sm in options.sms}
        except PtxasError as e:
            raise as_diagnostic(e, kernel_name(fn)) from None
    return Compiled(program.plan, program.ptx, cubins)


def emit_ptx(module: Module | Function, fn: str | None = None, **options: Any) -> str:
    """The PTX of every kernel of every function of ``module`` (or of ``fn``); concrete shapes only."""
    resolved = CudaOptions.resolve(options)
    fns = [module] if isinstance(module, Function) else [f for f in module.functions if fn is None or f.name == fn]
    parts = []
    for f in fns:
        if f.symbols():
            raise error("E6003", f"@{f.name} has symbolic dims ({', '.join(f.symbols())}); the PTX is specialized "
                                 "per concrete shape", help="give the parameters concrete shapes")
        program = _lower(f, {}, resolved)
        if not program.plan["modules"]:
            parts.append(f"// @{f.name}: no kernel (the host only copies constants)\n")
        for name in program.plan["modules"]:
            parts.append(f"// @{f.name}: kernel module {name}\n{program.ptx[name]}")
    return "\n".join(parts)


class CudaFunction:
    """A Core IR function with its compiled specializations, run by ``mind.runtime.cuda``."""

    supports_out = False

    def __init__(self, fn: Function, options: CudaOptions) -> None:
        self.fn, self.options = fn, options
        self._programs: dict[tuple[tuple[str, int], ...], Any] = {}
        self._bind: Any = None  # mind.runtime.cuda.Binder, made at the first call
        self._lock = threading.Lock()

    def program(self, env: Mapping[str, int]) -> Any:
        from mind.runtime.cuda import Program, device

        key = tuple(sorted(env.items()))
        p = self._programs.get(key)
        if p is None:
            with self._lock:
                p = self._programs.get(key)
                if p is None:
                    dev = device(self.options.device)  # E6002 without a GPU, before compiling anything
                    compiled = compile_program(self.fn, env, self.options)
                    p = self._programs[key] = Program(dev, compiled.plan, compiled.images())
        return p

    def __call__(self, args: Sequence[Any] | Mapping[str, Any]) -> list[Any]:
        if self._bind is None:
            from mind.runtime.cuda import Binder
            self._bind = Binder(self.fn)
        arrays, env = self._bind(args)
        return self.program(env).run(arrays, device_results=self.options.device_results)


def compile_function(fn: Function, **options: Any) -> CudaFunction:
    """The ``cuda`` backend's runner of ``fn``: ``options`` (``options.KNOBS``) resolved once, here."""
    return CudaFunction(fn, CudaOptions.resolve(options))
