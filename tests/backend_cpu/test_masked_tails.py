"""``masked_tails.forward_masked_tails``: a peeled reduction's masked tail as selects, not as a stack
buffer: the pattern on a hand-written payload, its absence where the tensor is read otherwise, and
whole reductions with tails (rows of 100, 37) whose rows hold NaNs and zeros of both signs, bit
for bit against the reference on both vector units."""

from __future__ import annotations

import numpy as np
import pytest

from mind.calling import run_reference
from mind.compiler.backend.cpu.api import compile_function
from mind.compiler.backend.cpu.vector_unit import runs_isa
from mind.ir.builder import FunctionBuilder
from mind.spec.dtypes import DType
from mind.spec.ops import TensorType

CPUS = [c for c in ("x86-64-v4", "x86-64-v3") if runs_isa(c)]

# the tail of one row as the schedule leaves it (a 46x208x100 f64 row max): the accumulator %v
# written whole, its first 4 lanes read masked, combined with the row's last 4 elements, written
# back masked and inserted, the whole tensor read for the row's combination
_TAIL = """
func.func @f(%x: tensor<1x1x4xf64>, %v: vector<1x1x16xf64>, %t: tensor<1x1x16xf64>) -> vector<1x1x16xf64> {
  %c0 = arith.constant 0 : index
  %c4 = arith.constant 4 : index
  %c1 = arith.constant 1 : index
  %pad = arith.constant 0xFFF0000000000000 : f64
  %m = vector.create_mask %c1, %c1, %c4 : vector<1x1x16xi1>
  %w = vector.transfer_write %v, %t[%c0, %c0, %c0] {in_bounds = [true, true, true]} : vector<1x1x16xf64>, tensor<1x1x16xf64>
  %s = tensor.extract_slice %w[0, 0, 0] [1, 1, 4] [1, 1, 1] : tensor<1x1x16xf64> to tensor<1x1x4xf64>
  %a = vector.transfer_read %x[%c0, %c0, %c0], %pad, %m {in_bounds = [true, true, true]} : tensor<1x1x4xf64>, vector<1x1x16xf64>
  %b = vector.transfer_read %s[%c0, %c0, %c0], %pad, %m {in_bounds = [true, true, true]} : tensor<1x1x4xf64>, vector<1x1x16xf64>
  %u = arith.maximumf %b, %a : vector<1x1x16xf64>
  %k = vector.transfer_write %u, %s[%c0, %c0, %c0], %m {in_bounds = [true, true, true]} : vector<1x1x16xf64>, tensor<1x1x4xf64>
  %i = tensor.insert_slice %k into %w[0, 0, 0] [1, 1, 4] [1, 1, 1] : tensor<1x1x4xf64> into tensor<1x1x16xf64>
  %r = vector.transfer_read %i[%c0, %c0, %c0], %pad {in_bounds = [true, true, true]} : tensor<1x1x16xf64>, vector<1x1x16xf64>
  return %r : vector<1x1x16xf64>
}
"""


def _forwarded(text: str) -> tuple[int, str]:
    from mlir import ir

    from mind.compiler.backend.linalg.context import new_context
    from mind.compiler.backend.linalg.masked_tails import forward_masked_tails
    with new_context(), ir.Location.unknown():
        module = ir.Module.parse(text)
        n = forward_masked_tails(module)
        assert module.operation.verify()
        return n, str(module)


def test_both_reads_of_the_tail_become_selects():
    n, text = _forwarded(_TAIL)
    assert n == 2
    body = text.split("vector.create_mask")[1]
    # the operand rows' read stays; the accumulator's two reads are gone
    assert body.count("vector.transfer_read") == 1 and body.count("arith.select") == 2
    assert "return" in body and "vector.broadcast" in body  # the masked read's padding lanes


def test_a_tensor_read_at_an_offset_or_unmasked_is_left_alone():
    offset = _TAIL.replace("%s = tensor.extract_slice %w[0, 0, 0]", "%s = tensor.extract_slice %w[0, 0, 4]") \
        .replace("%i = tensor.insert_slice %k into %w[0, 0, 0]", "%i = tensor.insert_slice %k into %w[0, 0, 4]")
    assert _forwarded(offset)[0] == 0
    unmasked = _TAIL.replace(", %m {in_bounds = [true, true, true]} : vector<1x1x16xf64>, tensor<1x1x4xf64>",
                             " {in_bounds = [true, true, true]} : vector<1x1x16xf64>, tensor<1x1x4xf64>")
    assert _forwarded(unmasked)[0] == 1  # the masked read of the slice still is one


def _reduction(op: str, dtype: DType, shape):
    b = FunctionBuilder("main")
    x = b.param("x", TensorType(dtype, shape))
    return b.finish([b.emit(op, x, axes=(1,), keepdims=False)])


@pytest.mark.parametrize("cpu", CPUS)
@pytest.mark.parametrize("op", ["reduce_max", "reduce_sum"])
@pytest.mark.parametrize("dtype,width", [(DType.F64, 100), (DType.F32, 37), (DType.F64, 37)])
def test_reductions_with_tails_match_the_reference(cpu, op, dtype, width):
    from mind.compiler.backend.cpu import lowering
    counts: list[int] = []
    real = lowering.forward_masked_tails
    rows = 300
    x = np.random.default_rng(5).integers(-8, 8, (rows, width)).astype(dtype.numpy)
    x[0] = -0.0  # an all -0 row: its sum is -0, its max -0
    x[1, ::3] = 0.0
    x[1, 1::3] = -0.0
    for r in range(2, rows, 7):
        x[r, (r * 5) % width] = np.nan
    x[3, -1] = np.nan  # in the tail
    fn = _reduction(op, dtype, (rows, width))
    try:
        lowering.forward_masked_tails = lambda m: (lambda n: (counts.append(n), n)[1])(real(m))
        got = compile_function(fn, threads=2, cache=False, cpu=cpu)([x])[0]
    finally:
        lowering.forward_masked_tails = real
    want = run_reference(fn, [x])[0]
    bits = np.uint32 if dtype == DType.F32 else np.uint64
    # a max is exact (+0 above -0); a sum's class puts +0 and -0 at distance 0 (spec.accuracy), and
    # its small integers add exactly
    same = (np.isnan(got) & np.isnan(want)) | \
        ((got.view(bits) == want.view(bits)) if op == "reduce_max" else (got == want))
    assert same.all(), (got[~same], want[~same])
    if (dtype, width) == (DType.F64, 100):
        assert counts == [2]  # tiles of 16 lanes: 96 and a masked tail of 4, forwarded
    # rows of 37 take one masked tile of the whole row (``fusion_groups._masked_vectors``): no peel
