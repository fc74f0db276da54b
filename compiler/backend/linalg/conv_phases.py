"""A conv2d over an input dilated by ``D`` (``lhs_dilation``: the input gradient of a strided conv) as
``D x D`` convolutions of the undilated input, one per phase of the output.

Why: the dilated input is mostly the zeros between its rows and columns (3 in 4 values for D = 2),
and a direct convolution over it spends that share of its multiply-adds on them, after writing the
dilated copy.  Output row ``oy = i * D + p`` (phase ``p``) only meets input rows through the taps
``ky`` whose dilated position ``p + ky * r - pt`` is a multiple of ``D``: an arithmetic progression
of taps (step ``D / gcd(r, D)``), reading the undilated rows ``i + b + m * r'``.  So each phase is a
plain convolution (stride 1, filter dilation ``r'``) of a window of the input padded once, with
every ``step``-th tap of the filter, whose result is written into every ``D``-th row and column.

Pure arithmetic (the plan of one spatial dim); ``lowerings.conv2d`` emits it.
"""

from __future__ import annotations

from math import gcd

from mind.spec.record import FrozenRecord

__all__ = ["AxisPhase", "axis_phases", "phase_padding"]

_set = object.__setattr__


class AxisPhase(FrozenRecord):
    """One phase ``p`` of one spatial dim: output rows ``p, p + D, ...`` (``out`` of them) are the
    taps ``k0, k0 + step, ...`` (``taps`` of them) of the filter over the undilated input rows
    ``i + first + m * dilation`` (``first`` may be negative: rows of the low padding)."""

    __slots__ = ("p", "out", "k0", "step", "taps", "first", "dilation")

    p: int
    out: int
    k0: int
    step: int
    taps: int
    first: int
    dilation: int

    def __init__(self, p: int, out: int, k0: int, step: int, taps: int, first: int, dilation: int) -> None:
        for k, v in zip(self.__slots__, (p, out, k0, step, taps, first, dilation)):
            _set(self, k, v)

    @property
    def last(self) -> int:
        """The last undilated input row the phase reads (``first`` when it reads one)."""
        return self.first + (self.out - 1) + (self.taps - 1) * self.dilation

    @property
    def rows(self) -> int:
        """How many consecutive input rows the phase's window spans."""
        return self.last - self.first + 1


def axis_phases(size: int, out: int, kernel: int, lhs_dilation: int, rhs_dilation: int,
                pad_lo: int) -> list[AxisPhase]:
    """The phases of one spatial dim (input ``size``, output ``out``, ``kernel`` taps, stride 1) that
    compute something: a phase with no output row or no tap landing on an input row is left out (its
    rows are zeros)."""
    d, r = lhs_dilation, rhs_dilation
    step = d // gcd(r, d)
    phases = []
    for p in range(min(d, out)):
        ks = [k for k in range(kernel) if (p + k * r - pad_lo) % d == 0]
        if not ks:
            continue
        k0, taps = ks[0], len(ks)
        first = (p + k0 * r - pad_lo) // d
        n_out = len(range(p, out, d))
        phases.append(AxisPhase(p, n_out, k0, step, taps, first, r * step // d))
    return phases


def phase_padding(size: int, phases: list[AxisPhase]) -> tuple[int, int]:
    """Low and high padding of the undilated input (``size`` rows) that holds every phase's window."""
    lo = max([0] + [-ph.first for ph in phases])
    hi = max([0] + [ph.last - (size - 1) for ph in phases])
    return lo, hi
