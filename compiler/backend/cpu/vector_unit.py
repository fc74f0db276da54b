"""The vector unit the schedules are sized for: register width and count, from the options' ``cpu``.

Why an input and not a constant: a tile of two AVX-512 vectors is four AVX2 vectors (or eight SSE
ones) on a host without AVX-512, and a register block of 16 accumulators spills on a machine with 16
vector registers.  The cost model (``transforms``, ``conv_schedule``) reads lanes and registers from
the ``VectorUnit`` of the level the kernel is compiled for, so ``cpu="x86-64-v3"`` gets AVX2-sized
tiles on any host, and ``cpu="host"`` gets the tiles of the best level the host runs.
"""

from __future__ import annotations

from mind.spec.record import FrozenRecord

from . import host

__all__ = ["VectorUnit", "VECTOR_UNITS", "AVX512", "CACHE_LINE_BYTES", "LEVEL_FLAGS", "runs_isa", "vector_unit"]


class VectorUnit(FrozenRecord):
    """``bits``: one vector register's width; ``registers``: how many the ISA names; ``l2_bytes``:
    the L2 cache per core assumed for a CPU of this level, the smallest of its class (AVX-512 parts,
    Zen 4/5 and Ice Lake servers and later, have 1-2 MB; AVX2 parts 512 KB-1 MB; SSE2-only parts
    256 KB or more), so that what the cost model sizes to fit in L2 fits wherever the level runs;
    ``fma_per_cycle``: the full-width vector multiply-adds one core issues per cycle, again the fewest
    of its class (Zen 4 issues a 512-bit FMA over both of its 256-bit FMA pipes, as do Intel parts with
    one AVX-512 FMA unit; AVX2 parts have two 256-bit FMA pipes; SSE2 has no FMA), which the thread
    cost model charges a contraction's multiply-adds at; ``maximum_instructions``: the instructions
    of one vector IEEE maximum (NaN if either operand is, +0 above -0): 3 with AVX-512DQ's ``vrange``
    (``range_max``), 6 as LLVM expands it without (sign blends, ``maxps``, a NaN fix-up);
    ``direct_conv_factor``: the direct conv schedule's measured cycles per FMA over its blocks'
    estimate (``conv_schedule.block_cost``, fitted on AVX-512: 1; AVX2 code on an AVX2-only Zen 3
    ran at 1.6-2.4x it, the lowest taken), which ``conv_gemm`` weighs the matmuls of a conv against;
    ``pack_cycles_per_element``: what packing one element of a conv's filter slice costs, in
    ``conv_schedule.block_cost``'s cycles (``conv_schedule.packed_cost``): about a cycle with
    AVX-512's slices of 64-byte row pieces on an Intel Xeon, where packed blocks ran 1.4-3.2x faster
    than in place; 14 fitted on an AVX2-only Zen 2, where the slices of 32-byte pieces packed per 49
    pixels ran 2.1x slower than in place, per 7 pixels 4.2x (the slowest of its class measured, as
    the unit's other figures are).  Baseline (SSE2) code has no measurement and takes AVX2's."""

    __slots__ = ("bits", "registers", "l2_bytes", "fma_per_cycle", "maximum_instructions", "direct_conv_factor",
                 "pack_cycles_per_element")

    bits: int
    registers: int
    l2_bytes: int
    fma_per_cycle: int
    maximum_instructions: int
    direct_conv_factor: float
    pack_cycles_per_element: float

    def __init__(self, bits: int, registers: int, l2_bytes: int, fma_per_cycle: int,
                 maximum_instructions: int, direct_conv_factor: float = 1.0,
                 pack_cycles_per_element: float = 1.0) -> None:
        object.__setattr__(self, "bits", bits)
        object.__setattr__(self, "registers", registers)
        object.__setattr__(self, "l2_bytes", l2_bytes)
        object.__setattr__(self, "fma_per_cycle", fma_per_cycle)
        object.__setattr__(self, "maximum_instructions", maximum_instructions)
        object.__setattr__(self, "direct_conv_factor", direct_conv_factor)
        object.__setattr__(self, "pack_cycles_per_element", pack_cycles_per_element)

    def replaced(self, **changes: float) -> "VectorUnit":
        """This unit with the named fields changed: what a benchmark or test that varies one figure
        builds, so that the figures it does not name keep this unit's values (a copy spelled field by
        field drops any field added later)."""
        return VectorUnit(**{**{name: getattr(self, name) for name in self.__slots__}, **changes})

    def lanes(self, elem_bits: int) -> int:
        """Elements of ``elem_bits`` in one register (at least 1)."""
        return max(1, self.bits // max(8, elem_bits))


VECTOR_UNITS: dict[str, VectorUnit] = {
    "x86-64-v4": VectorUnit(512, 32, 1 << 20, 1, 3),    # AVX-512: 32 zmm, L2 >= 1 MB, 1 zmm FMA per cycle, vrange
    "x86-64-v3": VectorUnit(256, 16, 512 << 10, 2, 6, 1.6, 14.0),  # AVX2 + FMA: 16 ymm, L2 >= 512 KB, 2 ymm FMAs
    "x86-64": VectorUnit(128, 16, 256 << 10, 1, 6, 1.0, 14.0),  # the baseline: SSE2, 16 xmm, L2 >= 256 KB, mul + add
}
"""The unit of each x86-64 level the options may name (``codegen.FIXED_TARGETS``)."""

AVX512 = VECTOR_UNITS["x86-64-v4"]

CACHE_LINE_BYTES = 64
"""An x86 cache line, at every level: a tile row narrower than it leaves lines that other tiles
finish (``transforms``: an AVX2 vector is half a line)."""

# cpuinfo flags each level needs (LLVM's definitions of x86-64-v3 and -v4; ``abm`` is LZCNT)
_V3_FLAGS = frozenset({"avx", "avx2", "bmi1", "bmi2", "f16c", "fma", "abm", "movbe", "xsave"})
LEVEL_FLAGS: dict[str, frozenset[str]] = {
    "x86-64-v4": _V3_FLAGS | {"avx512f", "avx512bw", "avx512cd", "avx512dq", "avx512vl"},
    "x86-64-v3": _V3_FLAGS,
}
"""The CPU flags of each level above the baseline, best first."""


def missing_flags(isa: str) -> frozenset[str]:
    """The flags of the level ``isa`` of ``LEVEL_FLAGS`` that this machine lacks (the kernel's
    flags, as the OS enables them): what a refused ``cpu`` option names."""
    return LEVEL_FLAGS[isa] - host.cpu_flags()


def runs_isa(isa: str) -> bool:
    """Whether this machine runs code of the level ``isa`` of ``LEVEL_FLAGS``."""
    return not missing_flags(isa)


def vector_unit(cpu: str) -> VectorUnit:
    """The unit of the options' ``cpu``: a named level's own; ``"generic"`` the baseline's; ``"host"``
    the best level of ``LEVEL_FLAGS`` the host runs, else the baseline's."""
    if cpu == "host":
        cpu = next((isa for isa in LEVEL_FLAGS if runs_isa(isa)), "x86-64")
    elif cpu == "generic":
        cpu = "x86-64"
    return VECTOR_UNITS[cpu]
