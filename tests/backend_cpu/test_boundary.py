"""What crosses the cpu backend's boundary: bools of any byte, the argument-count limit, and the
memory estimate's soundness against the kernel's own allocations (issue 22)."""

from __future__ import annotations

import re

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import mind
from mind.compiler.backend.cpu.api import MAX_KERNEL_ARGUMENTS, _materializes, emit_stage
from mind.diagnostics import MindError
from mind.ir.parser import parse_module
from mind.calling import select_function
from mind.reference.memory import peak_bytes

BOOLS = """fn main(x: Tensor<bool, [N]>, y: Tensor<bool, [N]>) -> (Tensor<i32, [N]>, Tensor<bool, [N]>, Tensor<bool, [N]>, Tensor<bool, [N]>) {
    (cast(x, i32), x == y, x && y, !x)
}
"""
_BOOL_FNS = {b: mind.compile(BOOLS, backend=b) for b in ("cpu", "reference")}


@given(st.binary(min_size=1, max_size=64), st.data())
def test_any_bytes_viewed_as_bool_give_the_same_results_on_cpu_and_reference(raw, data):
    x = np.frombuffer(raw, np.uint8).view(np.bool_)
    y = np.frombuffer(data.draw(st.binary(min_size=len(raw), max_size=len(raw))), np.uint8).view(np.bool_)
    cpu = _BOOL_FNS["cpu"](x, y)
    ref = _BOOL_FNS["reference"](x, y)
    for c, r in zip(cpu, ref):
        assert c.dtype == r.dtype and np.array_equal(c.view(np.uint8) if c.dtype == bool else c,
                                                       r.view(np.uint8) if r.dtype == bool else r)
    assert cpu[0].tolist() == [int(b != 0) for b in raw]


def test_static_bool_arguments_take_the_fast_path_normalized():
    f = mind.compile("fn main(x: Tensor<bool, [3]>) -> Tensor<i32, [3]> { cast(x, i32) }", backend="cpu")
    x = np.array([2, 0, 255], np.uint8).view(np.bool_)
    assert f(x).tolist() == [1, 0, 1]
    assert f(x).tolist() == [1, 0, 1]  # the second call goes through the kernel's fast path


def test_too_many_arguments_is_e6003_when_compiled():
    """Regression: 1,100 parameters were a raw ctypes.ArgumentError (E7009) at the first call."""
    n = MAX_KERNEL_ARGUMENTS
    params = ", ".join(f"%p{i}: f32[]" for i in range(n))
    text = f"func @main({params}) -> (f32[]) {{\n  %0 = add(%p0, %p1) : f32[]\n  return %0\n}}\n"
    with pytest.raises(MindError) as info:
        mind.compile(parse_module(text), backend="cpu")
    assert info.value.codes == ["E6003"] and "at most 1024" in str(info.value)
    fine = text.replace(f", %p{n - 1}: f32[]", "")  # 1023 parameters + 1 result
    assert mind.compile(parse_module(fine), backend="reference")(*[np.float32(1)] * (n - 1)) == 2
    mind.compile(parse_module(fine), backend="cpu")  # accepted (compiles lazily)


PROGRAMS = [
    "fn main(a: Tensor<f32, [64, 32]>, b: Tensor<f32, [32, 48]>) -> Tensor<f32, []> { sum(matmul(a, b)) }",
    "fn main(a: Tensor<f32, [64, 32]>, b: Tensor<f32, [32, 48]>) -> Tensor<f32, [64, 48]> { relu(matmul(a, b)) }",
    "fn main(a: Tensor<f32, [64, 32]>, b: Tensor<f32, [32, 48]>) -> Tensor<f32, [64]> { sum(exp(matmul(a, b)), axes=[1]) }",
    "fn main(x: Tensor<f32, [1, 16, 16, 3]>, w: Tensor<f32, [3, 3, 3, 8]>) -> Tensor<f32, []> { sum(conv2d(x, w)) }",
    "fn main(x: Tensor<f32, [512]>) -> Tensor<f32, []> { sum(reshape(x, [512, 1]) * reshape(x, [1, 512])) }",
]


@pytest.mark.parametrize("source", PROGRAMS)
def test_the_estimate_never_exceeds_what_the_kernel_allocates(source):
    """The cpu estimate is a lower bound (so no program that fits is refused): at most the result
    buffers plus the heap the kernel's LLVM IR allocates."""
    from mind.compiler.frontend.api import compile_source

    module = compile_source(source)
    fn = select_function(module, None)
    estimate, _, _ = peak_bytes(fn, {}, _materializes)
    outputs = sum(np.dtype(v.type.dtype.numpy).itemsize * int(np.prod(v.type.shape)) for v in fn.results)
    heap = sum(int(n) for n in re.findall(r"call noalias ptr @__mind_alloc\(i64 (\d+)\)", emit_stage(module, "llvm")))
    assert estimate <= outputs + heap
