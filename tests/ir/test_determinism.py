"""Printing and hashing do not depend on the process (PYTHONHASHSEED, dict/set order)."""

from __future__ import annotations

import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

SCRIPT = r"""
import sys
from mind.ir.builder import FunctionBuilder
from mind.ir.core import Assumption, Module
from mind.ir.parser import parse_module
from mind.spec.dims import sym
from mind.spec.dtypes import DType
from mind.spec.ops import OPS, TensorType

texts = []
for op in OPS.values():
    for k, ex in enumerate(op.examples):
        texts.append(ex.ir.replace("@main", f"@{op.name}_{k}"))
texts.append(open("examples/affine.mir").read().replace("@main", "@affine"))
module = parse_module("\n".join(texts))
# symbolic dims built in a set/dict-heavy way: normal forms must not depend on hash order
B, N, Z = sym("B"), sym("N"), sym("Zeta")
fb = FunctionBuilder("sym", [Assumption(B, ">=", 1), Assumption(N, ">=", 2), Assumption(Z, ">=", 1)])
x = fb.param("x", TensorType(DType.F32, (Z, B, N, 3)))
r = fb.emit("reshape", x, shape=(Z * B * N * 3,))
r2 = fb.emit("reshape", x, shape=(3 * N, B * Z))
t = fb.emit("transpose", x, permutation=(3, 2, 1, 0))
s = fb.emit("slice", x, start=(Z - 1, 0, N - 1, 0), stop=(-1, B, -1, 3), step=(-1, 1, -1, 2))
module.functions.append(fb.finish([r, r2, t, s]))
sys.stdout.write(module.sha256() + "\n" + module.text())
"""


def _run(seed: str) -> str:
    env = dict(os.environ, PYTHONHASHSEED=seed)
    r = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, cwd=ROOT, env=env)
    assert r.returncode == 0, r.stderr
    return r.stdout


def test_print_and_hash_identical_across_processes():
    outs = {seed: _run(seed) for seed in ("0", "1", "random")}
    assert outs["0"] == outs["1"] == outs["random"]
    sha, text = outs["0"].split("\n", 1)
    import hashlib

    assert hashlib.sha256(text.encode()).hexdigest() == sha
    assert "func @sym" in text
