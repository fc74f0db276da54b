"""MLIR pass pipelines kept as plain data: every pass and option any backend may give MLIR, validated.

Why data and not strings: MLIR 22 aborts the whole Python process (a libstdc++ assertion) when a
pass option has an invalid *value*, where it should raise.  Every pass and option that can reach
MLIR is therefore declared here (``_KNOWN``) with a validator, and ``Pipeline.render`` refuses
anything not declared.  Rendering is deterministic (options keep their declared order).  The
target-neutral pipelines are here (``prefusion``, ``bufferize``); a target's own (``cpu.pipeline``,
``cuda.pipeline``) are built from the same passes.  This module imports nothing from MLIR.
"""

from __future__ import annotations

from mind.spec.record import FrozenRecord
from typing import Callable, Mapping

__all__ = ["PassSpec", "Nest", "Pipeline", "PipelineError", "bufferize", "prefusion", "pass_spec", "MAX_THREADS"]

MAX_THREADS = 1024
"""The largest ``num-threads`` of ``convert-scf-to-openmp``."""


class PipelineError(ValueError):
    """A pass or option that our own table does not allow; raised before anything reaches MLIR."""


def _is_bool(v: object) -> bool:
    return isinstance(v, bool)


def _pos_int(limit: int) -> Callable[[object], bool]:
    def check(v: object) -> bool:
        return isinstance(v, int) and not isinstance(v, bool) and 1 <= v <= limit
    return check


def _one_of(*choices: str) -> Callable[[object], bool]:
    return lambda v: isinstance(v, str) and v in choices


def _int_range(low: int, high: int) -> Callable[[object], bool]:
    return lambda v: isinstance(v, int) and not isinstance(v, bool) and low <= v <= high


def _int_list(limit: int) -> Callable[[object], bool]:
    """A non-empty tuple of integers in [1, limit] (rendered ``a,b``)."""
    return lambda v: isinstance(v, tuple) and bool(v) and all(_pos_int(limit)(x) for x in v)


def _sm_name(v: object) -> bool:
    """A CUDA architecture such as ``sm_80`` or ``sm_90a`` (digits, then at most one letter)."""
    import re
    return isinstance(v, str) and re.fullmatch(r"sm_[1-9][0-9]{1,2}[a-z]?", v) is not None


# pass name -> {option name -> validator}.  Only what the backends use is listed.
_KNOWN: dict[str, dict[str, Callable[[object], bool]]] = {
    "eliminate-empty-tensors": {},
    "one-shot-bufferize": {
        "bufferize-function-boundaries": _is_bool,
        "function-boundary-type-conversion": _one_of("identity-layout-map", "fully-dynamic-layout-map",
                                                     "infer-layout-map"),
    },
    "drop-equivalent-buffer-results": {},
    "cse": {},
    "canonicalize": {},
    "buffer-deallocation-pipeline": {},
    "convert-bufferization-to-memref": {},
    "linalg-fuse-elementwise-ops": {},
    "scf-forall-to-parallel": {},
    "convert-scf-to-openmp": {"num-threads": _pos_int(MAX_THREADS)},
    "convert-vector-to-scf": {"full-unroll": _is_bool},
    "convert-linalg-to-loops": {},
    "lower-affine": {},
    "convert-scf-to-cf": {},
    "convert-vector-to-llvm": {},
    "expand-strided-metadata": {},
    "convert-arith-to-llvm": {},
    "convert-math-to-llvm": {},
    "finalize-memref-to-llvm": {},
    "convert-func-to-llvm": {},
    "convert-cf-to-llvm": {},
    "convert-index-to-llvm": {},
    "convert-ub-to-llvm": {},
    "convert-openmp-to-llvm": {},
    "reconcile-unrealized-casts": {},
    # the GPU path (compiler/backend/cuda)
    "convert-linalg-to-parallel-loops": {},
    "scf-parallel-loop-tiling": {"parallel-loop-tile-sizes": _int_list(1024), "no-min-max-bounds": _is_bool},
    "gpu-map-parallel-loops": {},
    "convert-parallel-loops-to-gpu": {},
    "gpu-launch-sink-index-computations": {},
    "gpu-kernel-outlining": {},
    "nvvm-attach-target": {"chip": _sm_name, "O": _int_range(0, 3)},
    "convert-gpu-to-nvvm": {"use-bare-ptr-memref-call-conv": _is_bool},
    "gpu-module-to-binary": {"format": _one_of("isa")},
}

_NESTED = ("func.func", "gpu.module")
"""The operations a pipeline may nest passes under (``Nest``)."""


class PassSpec(FrozenRecord):
    """One pass with its options, e.g. ``PassSpec("convert-scf-to-openmp", (("num-threads", 2),))``."""

    __slots__ = ("name", "options")

    name: str
    options: tuple[tuple[str, object], ...]

    def __init__(self, name: str, options: tuple[tuple[str, object], ...] = ()) -> None:
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "options", options)

    def validate(self) -> None:
        allowed = _KNOWN.get(self.name)
        if allowed is None:
            raise PipelineError(f"pass '{self.name}' is not in the backends' pass table")
        seen: set[str] = set()
        for key, value in self.options:
            check = allowed.get(key)
            if check is None:
                raise PipelineError(f"pass '{self.name}' has no option '{key}' in the pass table")
            if key in seen:
                raise PipelineError(f"pass '{self.name}': option '{key}' given twice")
            seen.add(key)
            if not check(value):
                raise PipelineError(f"pass '{self.name}': invalid value {value!r} for option '{key}'")

    def render(self) -> str:
        self.validate()
        if not self.options:
            return self.name
        parts = []
        for key, value in self.options:
            if isinstance(value, bool):
                parts.append(f"{key}={'true' if value else 'false'}")
            elif isinstance(value, tuple):
                parts.append(f"{key}={','.join(str(x) for x in value)}")
            else:
                parts.append(f"{key}={value}")
        return f"{self.name}{{{' '.join(parts)}}}"


def pass_spec(name: str, **options: object) -> PassSpec:
    """``PassSpec`` with the options as keywords (``num_threads=2`` for ``num-threads``)."""
    return PassSpec(name, tuple((k.replace("_", "-"), v) for k, v in options.items()))


_p = pass_spec


class Nest(FrozenRecord):
    """Passes that run on each op named ``anchor`` (``func.func``, ``gpu.module``) of the module."""

    __slots__ = ("anchor", "passes")

    anchor: str
    passes: tuple[PassSpec, ...]

    def __init__(self, anchor: str, passes: tuple[PassSpec, ...]) -> None:
        object.__setattr__(self, "anchor", anchor)
        object.__setattr__(self, "passes", passes)

    def render(self) -> str:
        if self.anchor not in _NESTED:
            raise PipelineError(f"passes cannot be nested under '{self.anchor}'")
        return f"{self.anchor}(" + ",".join(p.render() for p in self.passes) + ")"


class Pipeline(FrozenRecord):
    """An ordered tuple of passes (or ``Nest``s of them) nested under ``builtin.module``."""

    __slots__ = ("passes",)

    passes: tuple[PassSpec | Nest, ...]

    def __init__(self, passes: tuple[PassSpec | Nest, ...]) -> None:
        object.__setattr__(self, "passes", passes)

    def __add__(self, other: "Pipeline") -> "Pipeline":
        return Pipeline(self.passes + other.passes)

    def render(self) -> str:
        """The textual pipeline for ``PassManager.parse``; validates every pass first."""
        return "builtin.module(" + ",".join(p.render() for p in self.passes) + ")"


def prefusion() -> Pipeline:
    """Fuse chains of elementwise ``linalg.generic`` ops into one before tiling."""
    return Pipeline((_p("linalg-fuse-elementwise-ops"), _p("canonicalize"), _p("cse")))


def bufferize() -> Pipeline:
    """Tensors to memrefs with identity layouts at function boundaries (the ABI the engine calls)."""
    return Pipeline((
        _p("eliminate-empty-tensors"),
        _p("one-shot-bufferize", bufferize_function_boundaries=True,
           function_boundary_type_conversion="identity-layout-map"),
        _p("drop-equivalent-buffer-results"),
        _p("cse"),  # after bufferizing scf.forall, before canonicalize, or a strided memref.copy survives
        # canonicalizes first thing (after expand-realloc, which has no realloc to expand here): a
        # canonicalize of our own before it cost a tenth of the pipeline and changed nothing
        _p("buffer-deallocation-pipeline"),
        _p("convert-bufferization-to-memref"),
    ))
