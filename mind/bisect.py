"""Which op of a function makes an implementation depart from the reference (``mind.reference.bisect``).

The implementation runs the function's probe: the same parameters and ops, every op result
returned.  The reference then checks each op on the implementation's own operand values, so the
first op that leaves its accuracy bound is named, whatever the later ops do.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping, Sequence

import numpy as np

from mind.calling import bind_arguments
from mind.ir.core import Function
from mind.reference.bisect import Divergence, divergence

__all__ = ["Divergence", "Runner", "first_divergence", "probe_function"]

Runner = Callable[[Sequence[Any] | Mapping[str, Any]], list[np.ndarray]]


def probe_function(fn: Function) -> Function:
    """``fn`` with every op result returned, in program order."""
    return Function(f"{fn.name}_probe", list(fn.params), list(fn.ops), [op.result for op in fn.ops],
                    list(fn.assumptions), fn.span)


def first_divergence(fn: Function, args: Sequence[Any] | Mapping[str, Any],
                     compile_runner: Callable[[Function], Runner]) -> Divergence | None:
    """Run ``fn``'s probe through ``compile_runner`` on ``args`` and check each op against the reference."""
    arrays, env = bind_arguments(fn, args)
    if not fn.ops:
        return None
    return divergence(fn, arrays, env, compile_runner(probe_function(fn))(list(arrays)))
