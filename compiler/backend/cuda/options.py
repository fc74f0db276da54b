"""The CUDA backend's options: one table of knobs (``KNOBS``), resolved once into a frozen ``CudaOptions``.

The same mechanism as the cpu backend's (``compiler.backend.options``): keywords, then the
environment, then the defaults, every bad value E7002 before anything reaches MLIR or ptxas (a bad
pass-option value aborts the whole process inside MLIR, so nothing unvalidated may get there).
"""

from __future__ import annotations

import os
import re
from typing import Any, Mapping

from mind.spec.record import FrozenRecord

from ..options import Knob, resolve_knobs

__all__ = ["CudaOptions", "KNOBS", "DEFAULT_SMS", "MAX_BLOCK_THREADS", "GRID_YZ_MAX"]

DEFAULT_SMS = ("sm_80", "sm_90")
MAX_BLOCK_THREADS = 1024
"""The most threads a CUDA block may have on every architecture MIND builds for."""
GRID_YZ_MAX = 65535
"""The most blocks a grid may have along y and z (x allows 2**31 - 1)."""


def _sm(v: Any) -> bool:
    return isinstance(v, str) and re.fullmatch(r"sm_[1-9][0-9]{1,2}", v) is not None


def _sms(v: Any) -> bool:
    return isinstance(v, tuple) and bool(v) and all(_sm(s) for s in v) and len(set(v)) == len(v)


def _sms_text(text: str) -> tuple[str, ...]:
    sms = tuple(s.strip() for s in text.split(","))
    if not _sms(sms):
        raise ValueError(text)
    return sms


def _tile(v: Any) -> bool:
    if not (isinstance(v, tuple) and 1 <= len(v) <= 3):
        return False
    if not all(isinstance(x, int) and not isinstance(x, bool) and x >= 1 for x in v):
        return False
    n = 1
    for x in v:
        n *= x
    return n <= MAX_BLOCK_THREADS


def _tile_text(text: str) -> tuple[int, ...]:
    try:
        tile = tuple(int(x) for x in text.split(","))
    except ValueError:
        raise ValueError(text) from None
    if not _tile(tile):
        raise ValueError(text)
    return tile


def _ordinal_text(text: str) -> int:
    if not text.isdigit():
        raise ValueError(text)
    return int(text)


def _opt(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and 0 <= v <= 3


KNOBS: tuple[Knob, ...] = (
    Knob("sms", DEFAULT_SMS, _sms, "a tuple of CUDA architectures such as ('sm_80', 'sm_90')",
         "the architectures ptxas assembles a cubin for (the PTX is kept too, for newer GPUs)",
         env="MIND_CUDA_SMS", from_env=_sms_text, shown_default="sm_80,sm_90"),
    Knob("tile", (32, 8), _tile, f"a tuple of 1 to 3 positive integers whose product is at most {MAX_BLOCK_THREADS}",
         "the threads of a block along a parallel loop's dimensions, last first (the contiguous one on x; the rest of a loop is the grid)",
         env="MIND_CUDA_TILE", from_env=_tile_text, shown_default="32,8"),
    Knob("ptxas_opt", 3, _opt, "an integer from 0 to 3", "ptxas's optimization level", env="MIND_CUDA_PTXAS_OPT",
         from_env={str(i): i for i in range(4)}),
    Knob("ptxas", None, lambda v: isinstance(v, str) and v != "", "the path of a ptxas",
         "the assembler to run", env="MIND_PTXAS", from_env=str,
         shown_default="the nvidia-cuda-nvcc wheel's, else one on PATH"),
    Knob("device", 0, lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 0, "a device ordinal",
         "the GPU a runner uses", env="MIND_CUDA_DEVICE", from_env=_ordinal_text),
    Knob("device_results", False, lambda v: isinstance(v, bool), "True or False",
         "leave results on the GPU (objects with __cuda_array_interface__) instead of copying them to NumPy"),
)
"""Every knob of the CUDA backend (``docs/backend-cuda.md`` prints this table)."""

_FIELDS = tuple(k.name for k in KNOBS)


class CudaOptions(FrozenRecord):
    """The resolved options (the knobs of ``KNOBS``)."""

    __slots__ = _FIELDS

    sms: tuple[str, ...]
    tile: tuple[int, ...]
    ptxas_opt: int
    ptxas: str | None
    device: int
    device_results: bool

    def __init__(self, **fields: Any) -> None:
        for name in _FIELDS:
            object.__setattr__(self, name, fields[name])

    @classmethod
    def resolve(cls, keywords: Mapping[str, Any] | None = None, environ: Mapping[str, str] | None = None,
                **more: Any) -> "CudaOptions":
        """The record for ``keywords`` (and ``more``), then ``environ`` (default ``os.environ``), then
        the defaults; E7002 for an unknown option or a bad value."""
        values = resolve_knobs(KNOBS, {**(keywords or {}), **more}, os.environ if environ is None else environ,
                               "cuda")
        return cls(**values)

    def record(self) -> dict[str, Any]:
        """What a build records of these options (``mind build``'s manifest): what the code depends on."""
        return {"sms": list(self.sms), "tile": list(self.tile), "ptxas_opt": self.ptxas_opt}
