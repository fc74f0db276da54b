"""The CPU backend's options: one table of knobs (``KNOBS``), resolved once into a frozen ``CpuOptions``.

``compile_function`` / ``mind.compile`` resolve the record once from their keywords, then the
environment, then the defaults (``compiler.backend.options``), and every stage below (emission,
lowering, code generation, loading, the caches) is a function of its inputs and this record: none
reads the environment for a setting.  Besides the knobs, the record holds what they resolve to on
this machine: the prebuilt GEMM level its matmuls call (``library``), the OpenMP ABI a threaded
kernel is built for (``abi``, None without a runtime) and the CPU count (the automatic thread count).
The decisions of one specialization (its thread count, from the kernel's cost: ``thread_cost``) are
pure functions of the record and the kernel (``for_kernel``), and the record gives the one cache-key fingerprint of a
kernel (``fingerprint``).
"""

from __future__ import annotations

import os
from typing import Any, Mapping

from mind.cache_store import SETTING as CACHE_SETTING, SETTINGS as CACHE_SETTINGS
from mind.spec.record import FrozenRecord

from ..options import Knob, choice, resolve_knobs
from .cache import KernelCache
from .host import host_fingerprint, source_fingerprint, toolchain_fingerprint
from .kernel_library import (ISAS, MATMUL_POLICIES, LibraryError, damaged, gemm_object, object_digest, runs_isa,
                             runtime_object, runtime_target, select_isa)
from .openmp import ABIS, preferred_abi
from .pipeline import MAX_THREADS
from .thread_cost import KernelCost, worth_threads
from .vector_unit import missing_flags, vector_unit

__all__ = ["CpuOptions", "KNOBS"]


def _thread_count(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and 1 <= v <= MAX_THREADS


def _cpu_level(v: Any) -> bool:
    return v in ("host", "generic") or (v in ISAS and runs_isa(v))


def _cpu_advice(v: Any) -> str:
    """The help line for a refused ``cpu``: the levels this host runs, and what it lacks for the one
    asked for (an AVX2-only host asked for x86-64-v4)."""
    runs = ["'host'", "'generic'"] + [repr(isa) for isa in ISAS if runs_isa(isa)]
    use = "use " + ", ".join(runs[:-1]) + " or " + runs[-1]
    if v in ISAS:
        lacks = ", ".join(sorted(missing_flags(v)))
        return f"this host does not run {v} code (it lacks {lacks}): {use}"
    return use


def _thread_text(text: str) -> int:
    if not (text.isdigit() and _thread_count(int(text))):
        raise ValueError(text)
    return int(text)


KNOBS: tuple[Knob, ...] = (
    Knob("threads", None, _thread_count, f"an integer from 1 to {MAX_THREADS}",
         "OpenMP threads of the scheduled loops and the prebuilt GEMM", env="MIND_NUM_THREADS",
         from_env=_thread_text, shown_default="the CPU count, but 1 for a function whose estimated time a second "
                                             "thread would not clearly cut (see Threads) and without an "
                                             "OpenMP runtime"),
    Knob("schedule", True, lambda v: v is True or v is False or v == "all", "True, False or 'all'",
         "tile and vectorize the ops that pay for their compile time (`MIN_SCHEDULE_WORK`), every op that "
         "has a schedule (\"all\") or none", env="MIND_CPU_SCHEDULE", from_env={"0": False, "1": True, "all": "all"}),
    choice("matmul", MATMUL_POLICIES, "library", "f32/f64 matmuls (2-D and batched) call the prebuilt GEMM where the host runs "
           "one of its variants, or are compiled per program with the transform schedule", env="MIND_CPU_MATMUL"),
    Knob("cpu", "host", _cpu_level, "'host', 'generic', or one of "
         + ", ".join(repr(isa) for isa in ISAS) + " that this host runs", "LLVM's target and the vector unit the schedules are sized "
         "for: the host CPU and its features, portable x86-64 (which never calls the prebuilt GEMM), or an "
         "x86-64 level (x86-64-v3: AVX2, x86-64-v4: AVX-512) and its GEMM; a kernel runs in this process, so "
         "a level the host cannot run is refused", advice=_cpu_advice),
    choice("opt", ("fast", "full"), "fast", "LLVM's optimization: a short pipeline for scheduled kernels and "
           "O2 without unrolling and vectorizers for scalar loops, or O3"),
    Knob("cache", True, lambda v: isinstance(v, (bool, KernelCache)), "True, False or a KernelCache",
         "the on-disk kernel cache ([cache.md](cache.md))", env=CACHE_SETTING,
         from_env={setting: setting == "on" for setting in CACHE_SETTINGS},
         shown_default="the folder `MIND_CACHE_DIR`, else `~/.cache/mind`"),
    Knob("jit", True, lambda v: isinstance(v, bool), "True or False", "load a new kernel in-process (LLVM's ORC JIT "
         "with JITLink) and link its shared object into the cache in the background, or link it with `ld` first "
         "(see Loading)",
         env="MIND_CPU_JIT",
         from_env={"0": False, "1": True}),
    choice("openmp", ABIS, None, "the OpenMP ABI of threaded kernels (see Threads)", env="MIND_OPENMP",
           shown_default="gomp where libgomp is installed, else kmpc"),
    Knob("openmp_lib", None, lambda v: isinstance(v, str) and v != "", "the path of a runtime",
         "an LLVM/Intel OpenMP runtime to use (then preferred)", env="MIND_OPENMP_LIB", from_env=str,
         shown_default="the runtimes MIND finds"),
)
"""Every knob of the CPU backend (``docs/backend-cpu.md`` prints this table)."""

_FIELDS = tuple(k.name for k in KNOBS) + ("library", "abi", "cpus")


class CpuOptions(FrozenRecord):
    """The resolved options (the knobs of ``KNOBS``, ``cache`` as a ``KernelCache`` or None) and what
    they resolve to here: ``library`` (the ``kernel_library`` level the matmuls call, None for
    per-program schedules), ``abi`` (the OpenMP ABI of threaded kernels, None: no runtime) and
    ``cpus`` (the thread count when it is automatic and the work large)."""

    __slots__ = _FIELDS

    threads: int | None
    schedule: bool | str
    matmul: str
    cpu: str
    opt: str
    cache: KernelCache | None
    jit: bool
    openmp: str | None
    openmp_lib: str | None
    library: str | None
    abi: str | None
    cpus: int

    def __init__(self, **fields: Any) -> None:
        for name in _FIELDS:
            object.__setattr__(self, name, fields[name])

    @classmethod
    def resolve(cls, keywords: Mapping[str, Any] | None = None, environ: Mapping[str, str] | None = None,
                **more: Any) -> "CpuOptions":
        """The record for ``keywords`` (and ``more``), then ``environ`` (default ``os.environ``), then
        the defaults.  E7002 for an unknown option or a bad value; E6012 when the prebuilt GEMM the
        options would call is damaged; E7010 when the cache folder is not safe to use is reported
        where the cache is first used."""
        values = resolve_knobs(KNOBS, {**(keywords or {}), **more}, os.environ if environ is None else environ,
                               "cpu")
        values["cache"] = _cache(values["cache"])
        values["library"] = _library(values["cpu"], values["matmul"])
        values["abi"] = preferred_abi(values["openmp"], values["openmp_lib"])
        values["cpus"] = os.cpu_count() or 1
        return cls(**values)

    def replace(self, **changes: Any) -> "CpuOptions":
        return CpuOptions(**{**{name: getattr(self, name) for name in _FIELDS}, **changes})

    def for_kernel(self, cost: KernelCost | None = None) -> "CpuOptions":
        """The record one kernel is compiled with, its thread count decided: the one asked for, else
        the CPU count, but 1 when the kernel's ``cost`` (``thread_cost.kernel_cost``) says the
        threads would not clearly pay for their parallel regions on this ``cpu``'s vector unit
        (``thread_cost.worth_threads``); 1 without an OpenMP runtime."""
        threads = self.threads
        if threads is None:
            threads = self.cpus
            if cost is not None and threads > 1 and not worth_threads(cost, vector_unit(self.cpu), threads):
                threads = 1
        if threads > 1 and self.abi is None:
            threads = 1
        return self if threads == self.threads else self.replace(threads=threads)

    def openmp_abis(self) -> tuple[str | None, ...]:
        """The OpenMP ABIs a kernel built with these options may need (what a cached kernel's
        sidecar may name): none on one thread; else the LLVM/Intel ABI, and libgomp's where it is
        the ABI new kernels are built for."""
        if self.threads is None or self.threads <= 1:
            return (None,)
        return (None, "kmpc") + (("gomp",) if self.abi == "gomp" else ())

    def fingerprint(self) -> dict[str, Any]:
        """Everything of these options and of this machine that the compiled code depends on: the
        cache keys' one source (``cache.ir_cache_key``, ``cache.mlir_cache_key``).  The thread count
        must be decided (``for_kernel``).  The backend's own sources are part of it, so a changed
        constant (the schedule's cost model, a pass) misses too."""
        assert isinstance(self.threads, int), "fingerprint of undecided options"
        abi = self.abi if self.threads > 1 else None  # a threaded kernel's code depends on its runtime's ABI
        return {
            "threads": self.threads, "schedule": self.schedule, "opt": self.opt,
            "matmul": self._library_key(),
            "target": host_fingerprint() if self.cpu == "host" else f"{os.uname().machine}|{self.cpu}",
            "toolchain": toolchain_fingerprint(), "sources": source_fingerprint(),
            "openmp": abi, "openmp_support": _object_digest("openmp-gomp") if abi == "gomp" else None,
            "heap": _object_digest("heap"), "runtime": _object_digest(runtime_object(runtime_target(self.cpu))),
        }

    def _library_key(self) -> str:
        """What the matmuls call: the GEMM's level and the digests of the objects they may link (the
        threaded driver too on more than one thread), or the per-program schedule."""
        if self.library is None:
            return "schedule"
        names = [gemm_object(self.library)] + (["gemm-parallel"] if self.threads > 1 else [])
        digests = []
        for name in names:
            try:
                digests.append(object_digest(name))
            except LibraryError as e:
                raise damaged(e, name) from None
        return ":".join(["library", self.library, *digests])


def _cache(value: Any) -> KernelCache | None:
    """The kernel cache of a ``cache`` option: True is the folder of ``mind.cache_store``
    (``$MIND_CACHE_DIR``, ...), a ``KernelCache`` is used as given, False (``MIND_CACHE=off``) none."""
    if value is True:
        return KernelCache.default()
    return value or None


def _library(cpu: str, matmul: str) -> str | None:
    """The prebuilt GEMM level the matmuls of a ``cpu`` kernel call, or None; E6012 when its object
    does not match the manifest."""
    isa = select_isa(cpu, matmul)
    if isa is not None:
        try:
            object_digest(gemm_object(isa))
        except LibraryError as e:
            raise damaged(e, gemm_object(isa)) from None
    return isa


def _object_digest(name: str) -> str:
    """The digest of a prebuilt object a kernel may link whatever its matmuls do (``openmp-gomp``
    for a kernel adapted to libgomp, ``heap`` for one that allocates, ``runtime`` for one that
    copies a strided view).  A damaged manifest gives a
    key all the same: linking the kernel then reports the damage (E6012)."""
    try:
        return object_digest(name)
    except LibraryError:
        return "unavailable"
