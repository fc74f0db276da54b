"""A fusion block's intermediate written in the block's output rows (``compiler/backend/linalg/
block_in_place.py``): which blocks qualify, and that the kernels compute the same bits."""

from __future__ import annotations

import re

import numpy as np
import pytest

from mind.calling import run_reference
from mind.compiler.backend.cpu import lowering
from mind.compiler.backend.cpu.api import compile_function, emit_stage
from mind.compiler.backend.cpu.vector_unit import runs_isa
from mind.compiler.frontend.api import compile_source


def _allocations(fn, cpu: str) -> list[int]:
    return [int(n) for n in re.findall(r"@__mind_alloc\(i64 (\d+)\)", emit_stage(fn, "llvm", threads=2, cpu=cpu))]


@pytest.mark.parametrize("cpu", ["host", "x86-64-v3"])
@pytest.mark.parametrize("dtype,shape", [("f32", (512, 1000)), ("f32", (8, 40, 526)), ("f64", (256, 384))])
def test_softmax_exps_are_written_in_the_output_rows(cpu, dtype, shape, monkeypatch):
    """A softmax's block keeps its rows' exps for the division: they are written in the block's
    output rows, which the division then updates in place.  The block's own buffer for them is gone
    (one allocation fewer), and the results are bit for bit those of the buffer's path, 1 and 2
    threads, and within the reference's bound."""
    if cpu != "host" and not runs_isa(cpu):
        pytest.skip(f"this host does not run {cpu}")
    t = f"Tensor<{dtype}, [{', '.join(map(str, shape))}]>"
    src = f"fn main(x: {t}) -> {t} {{ softmax(x, axis=-1) }}"
    counts: list[int] = []
    real = lowering.write_blocks_in_place
    monkeypatch.setattr(lowering, "write_blocks_in_place",
                        lambda m, keep=None: counts.append(real(m, keep)) or counts[-1])
    fn = compile_source(src).functions[0]
    with_rows = _allocations(fn, cpu)
    assert sum(counts) >= 1
    x = np.random.default_rng(len(shape)).standard_normal(shape).astype(np.float32 if dtype == "f32" else np.float64) * 4
    x.flat[::97] = np.inf
    x.flat[5::101] = -np.inf
    x.flat[7::103] = np.nan
    got = [compile_function(fn, threads=th, cpu=cpu, cache=False)([x])[0] for th in (1, 2)]
    np.testing.assert_array_equal(got[0], got[1])
    want = run_reference(fn, [x])[0]
    np.testing.assert_allclose(got[0], want, rtol=2e-6 if dtype == "f32" else 1e-14, atol=0)
    monkeypatch.setattr(lowering, "write_blocks_in_place", lambda m, keep=None: 0)
    fn2 = compile_source(src + " ").functions[0]
    assert len(_allocations(fn2, cpu)) == len(with_rows) + 1
    np.testing.assert_array_equal(compile_function(fn2, threads=2, cpu=cpu, cache=False)([x])[0], got[1])


_BLOCK = """\
func.func @f(%x: tensor<8x64xf32>) -> tensor<8x64xf32> {{
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c16 = arith.constant 16 : index
  %c64 = arith.constant 64 : index
  %pad = arith.constant 0.0 : f32
  %init = tensor.empty() : tensor<8x64xf32>
  %r = scf.forall (%i) in (4) shared_outs(%o = %init) -> (tensor<8x64xf32>) {{
    %row = affine.apply affine_map<(d0) -> (d0 * 2)>(%i)
    %e0 = tensor.empty() : tensor<2x64xf32>
    %p = scf.for %a = %c0 to %c2 step %c1 iter_args(%t = %e0) -> (tensor<2x64xf32>) {{
      %q = scf.for %b = %c0 to %c64 step %c16 iter_args(%u = %t) -> (tensor<2x64xf32>) {{
        %ra = arith.addi %row, %a : index
        %v = vector.transfer_read %x[%ra, %b], %pad {{in_bounds = [true, true]}} : tensor<8x64xf32>, vector<1x16xf32>
        %w = math.exp %v : vector<1x16xf32>
        %u2 = vector.transfer_write %w, %u[%a, %b] {{in_bounds = [true, true]}} : vector<1x16xf32>, tensor<2x64xf32>
        scf.yield %u2 : tensor<2x64xf32>
      }}
      scf.yield %q : tensor<2x64xf32>
    }}
    %s = tensor.extract_slice %o[%row, 0] [2, 64] [1, 1] : tensor<8x64xf32> to tensor<2x64xf32>
    %c = scf.for %a = %c0 to %c2 step %c1 iter_args(%t = %s) -> (tensor<2x64xf32>) {{
      %q = scf.for %b = %c0 to %c64 step %c16 iter_args(%u = %t) -> (tensor<2x64xf32>) {{
        {before}
        %w = arith.addf %v, %v : vector<1x16xf32>
        %u2 = vector.transfer_write %w, %u[%a, %b] {{in_bounds = [true, true]}} : vector<1x16xf32>, tensor<2x64xf32>
        {after}
        scf.yield %u2 : tensor<2x64xf32>
      }}
      scf.yield %q : tensor<2x64xf32>
    }}
    {later}
    scf.forall.in_parallel {{
      tensor.parallel_insert_slice %c into %o[%row, 0] [2, 64] [1, 1] : tensor<2x64xf32> into tensor<8x64xf32>
    }}
  }}
  return %r : tensor<8x64xf32>
}}
"""
_READ = "%v = vector.transfer_read %p[%a, {col}], %pad {{in_bounds = [true, true]}} : tensor<2x64xf32>, vector<1x16xf32>"


@pytest.mark.parametrize("case,rewritten", [
    ("matched", 1),           # the step reads the intermediate where it then writes
    ("other column", 0),      # it reads another column than it writes: a later step would read a result
    ("read after write", 0),  # it reads after its write (here of another value than the intermediate's)
    ("read after", 0),        # the intermediate is read again after the consumer
    ("accumulates", 0),       # the consumer reads its own start (the output's values), not only writes it
])
def test_only_reads_of_the_places_written_are_rewritten(case, rewritten):
    """The rewrite is taken only where every read of the intermediate inside the consumer reads what
    the same step then writes, before it writes it, and nothing reads the intermediate afterwards."""
    from mlir import ir

    from mind.compiler.backend.linalg.block_in_place import write_blocks_in_place
    from mind.compiler.backend.linalg.context import new_context
    parts = {"before": _READ.format(col="%b"), "after": "", "later": ""}
    if case == "other column":
        parts["before"] = _READ.format(col="%c0")
    elif case == "read after write":
        parts["before"] = "%v = vector.transfer_read %x[%a, %c0], %pad {in_bounds = [true, true]} : " \
                          "tensor<8x64xf32>, vector<1x16xf32>"
        parts["after"] = "%z = " + _READ.format(col="%b")[4:]
    elif case == "accumulates":
        parts["after"] = "%z = vector.transfer_read %u[%a, %b], %pad {in_bounds = [true, true]} : " \
                         "tensor<2x64xf32>, vector<1x16xf32>"
    elif case == "read after":
        parts["later"] = "%z = " + _READ.format(col="%c0").replace("%a,", "%c0,")[4:]
    ctx = new_context()
    with ctx, ir.Location.unknown():
        module = ir.Module.parse(_BLOCK.format(**parts))
        assert write_blocks_in_place(module) == rewritten
        assert module.operation.verify()
        text = str(module)
    # rewritten: the exps' loop starts on the output's slice (no buffer of its own), and the consumer
    # reads its own loop value (a block argument) where it read the exps
    assert ("tensor.empty() : tensor<2x64xf32>" not in text) == bool(rewritten)
    if rewritten:
        assert re.search(r"vector\.transfer_read %arg\d+\[%arg\d+, %arg\d+\]", text)

