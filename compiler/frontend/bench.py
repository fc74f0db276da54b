"""Time the lexer and parser on example programs: ``python -m mind.compiler.frontend.bench [files]``.

Prints the median over 7 repeats of ``tokenize`` and of ``parse`` (which includes tokenizing).
Defaults to ``examples/bench/*.mind`` and ``examples/*.mind`` under the current directory.
``--cpu`` times with the thread's CPU clock instead of the wall clock (steadier on a busy machine).
"""

from __future__ import annotations

import statistics
import sys
import time
import timeit
from pathlib import Path

from .lexer import tokenize
from .parser import parse


def _median_us(fn, number: int, timer=time.perf_counter) -> float:
    return statistics.median(timeit.repeat(fn, number=number, repeat=7, timer=timer)) / number * 1e6


def main(argv: list[str]) -> int:
    timer = time.perf_counter
    if "--cpu" in argv:
        argv = [a for a in argv if a != "--cpu"]
        timer = time.thread_time
    paths = [Path(a) for a in argv] or sorted(Path("examples/bench").glob("*.mind")) + \
        sorted(Path("examples").glob("*.mind"))
    print(f"{'program':32s} {'tokens':>6s} {'lex us':>8s} {'parse us':>9s}")
    for path in paths:
        src = path.read_text()
        name = str(path)
        n = len(tokenize(src, name))
        number = max(200, 200_000 // max(n, 1))
        lex = _median_us(lambda: tokenize(src, name), number, timer)
        par = _median_us(lambda: parse(src, name), number, timer)
        print(f"{path.stem:32s} {n:6d} {lex:8.1f} {par:9.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
