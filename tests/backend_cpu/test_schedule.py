"""The default schedule: which kernels get tiled/vectorized, and regressions it once had."""

from __future__ import annotations

import re

import numpy as np
import pytest

from mind.calling import run_reference
from mind.compiler.backend.cpu.api import compile_function
from mind.compiler.frontend.api import compile_source
from mind.compiler.backend.cpu.kernel_library import ISAS
from mind.compiler.backend.cpu.options import CpuOptions
from mind.ir.parser import parse_module
from mind.calling import select_function
from levels import HOST_LEVELS, needs_level


def _fn(text: str):
    return select_function(parse_module(text, "t"), None)


def _kernel(run):
    return next(iter(run._kernels.values()))


def test_matmul_and_elementwise_are_scheduled_by_default():
    fn = _fn("func @main(%a: f32[16, 32], %b: f32[32, 64]) -> (f32[16, 64]) {\n"
             "  %0 = matmul(%a, %b) : f32[16, 64]\n  %1 = exp(%0) : f32[16, 64]\n  return %1\n}\n")
    rng = np.random.default_rng(0)
    a = rng.standard_normal((16, 32), dtype=np.float32) * 0.1
    b = rng.standard_normal((32, 64), dtype=np.float32) * 0.1
    run = compile_function(fn, threads=1)
    out = run([a, b])[0]
    assert _kernel(run).scheduled
    np.testing.assert_allclose(out, np.exp(a.astype(np.float64) @ b), rtol=1e-5)


def test_broadcast_size_one_tiles_do_not_hang():
    # tiles [1, 1] with a broadcast operand made the vector lowering patterns loop forever
    fn = _fn("func @main(%x: f64[3, 1], %y: f64[1]) -> (f64[3, 1]) {\n  %0 = add(%y, %x) : f64[3, 1]\n"
             "  return %0\n}\n")
    x, y = np.array([[1.0], [2.0], [3.0]]), np.array([0.5])
    run = compile_function(fn, threads=1)
    np.testing.assert_array_equal(run([x, y])[0], y + x)
    assert _kernel(run).scheduled


def test_unit_step_slice_smaller_than_input():
    # `d0 + 0` simplifies to `d0`: linalg inferred the loop range from the input (E6012 at parse)
    fn = _fn("func @main(%x: i32[2, 1, 3]) -> (i32[1, 1, 3]) {\n"
             "  %0 = slice(%x) {start = [0, 0, 2], stop = [1, -1, -1], step = [1, -1, -1]} : i32[1, 1, 3]\n"
             "  return %0\n}\n")
    x = np.arange(6, dtype=np.int32).reshape(2, 1, 3)
    for schedule in (False, True):
        np.testing.assert_array_equal(compile_function(fn, threads=1, schedule=schedule)([x])[0],
                                      x[0:1, 0:1, ::-1])


def test_reductions_are_scheduled_and_keep_signed_zero():
    fn = _fn("func @main(%x: f64[1, 3]) -> (f64[1, 1]) {\n"
             "  %0 = reduce_max(%x) {axes = [0, 1], keepdims = true} : f64[1, 1]\n  return %0\n}\n")
    x = np.array([[-0.0, 0.0, -1.0]])
    run = compile_function(fn, threads=1)
    got = run([x])[0]
    assert _kernel(run).scheduled
    assert got[0, 0] == 0.0 and not np.signbit(got[0, 0])


def test_transposed_matmul_and_keepdims_reductions_are_scheduled():
    # what autodiff emits: transpose then matmul, softmax-style max/sum with keepdims
    fn = _fn("func @main(%x: f32[32, 64], %d: f32[32, 16]) -> (f32[64, 16], f32[32, 1], f32[16]) {\n"
             "  %0 = transpose(%x) {permutation = [1, 0]} : f32[64, 32]\n"
             "  %1 = matmul(%0, %d) : f32[64, 16]\n"
             "  %2 = reduce_max(%x) {axes = [1], keepdims = true} : f32[32, 1]\n"
             "  %3 = sub(%x, %2) : f32[32, 64]\n  %4 = exp(%3) : f32[32, 64]\n"
             "  %5 = reduce_sum(%4) {axes = [1], keepdims = true} : f32[32, 1]\n"
             "  %6 = reduce_sum(%d) {axes = [0], keepdims = false} : f32[16]\n"
             "  return %1, %5, %6\n}\n")
    rng = np.random.default_rng(1)
    x = rng.standard_normal((32, 64), dtype=np.float32)
    d = rng.standard_normal((32, 16), dtype=np.float32)
    run = compile_function(fn, threads=1)
    mm, s, cs = run([x, d])
    assert _kernel(run).scheduled
    x64 = x.astype(np.float64)
    np.testing.assert_allclose(mm, x64.T @ d, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(s, np.exp(x64 - x64.max(1, keepdims=True)).sum(1, keepdims=True), rtol=1e-5)
    np.testing.assert_allclose(cs, d.astype(np.float64).sum(0), rtol=1e-4, atol=1e-5)


def _train_step():
    import os

    from mind.compiler.frontend.api import compile_source
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    with open(os.path.join(root, "examples", "train_mlp.mind")) as f:
        mod = compile_source(f.read())
    return select_function(getattr(mod, "module", mod), "train_step")


def _train_inputs(batch: int = 32):
    rng = np.random.default_rng(0)
    y = np.zeros((batch, 10), np.float32)
    y[np.arange(batch), rng.integers(0, 10, batch)] = 1
    r = lambda *s, scale=1.0: (rng.standard_normal(s) * scale).astype(np.float32)  # noqa: E731
    return [r(batch, 784), y, r(784, 256, scale=0.05), r(256, scale=0.1), r(256, 10, scale=0.05),
            r(10, scale=0.1), np.array(0.1, np.float32)]


def test_train_step_is_scheduled_and_matches_the_reference():
    from mind.calling import run_reference
    from mind.bisect import first_divergence

    fn = _train_step()
    args = _train_inputs()
    run = compile_function(fn, cache=False)
    got = run(args)
    assert _kernel(run).scheduled
    for g, w in zip(got, run_reference(fn, args)):
        w = np.asarray(w)
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5 * max(1.0, float(np.max(np.abs(w)))))
    # every op within its spec accuracy (the probe returns every intermediate value; scheduled too)
    probes = []

    def runner(f):
        r = compile_function(f, threads=1, cache=False)
        probes.append(r)
        return r
    assert first_divergence(fn, args, runner) is None
    assert _kernel(probes[0]).scheduled


# ------------------------------------------------------------------ the default cost model

def test_cost_model_leaves_small_ops_unscheduled(monkeypatch):
    """MIND_CPU_SCHEDULE=1 (the default outside these tests): ops below MIN_SCHEDULE_WORK stay
    scalar loops, larger ones are scheduled; "all" schedules the small one too."""
    from mind.compiler.backend.cpu.kernel_library import host_isa
    from mind.compiler.backend.cpu.transforms import MIN_SCHEDULE_WORK

    monkeypatch.setenv("MIND_CPU_SCHEDULE", "1")
    rng = np.random.default_rng(3)
    for (m, k, n), want in (((10, 20, 30), False), ((32, 64, 64), True)):
        assert (m * k * n >= MIN_SCHEDULE_WORK) == want
        fn = _fn(f"func @main(%a: f32[{m}, {k}], %b: f32[{k}, {n}]) -> (f32[{m}, {n}]) {{\n"
                 f"  %0 = matmul(%a, %b) : f32[{m}, {n}]\n  return %0\n}}\n")
        a = rng.standard_normal((m, k), dtype=np.float32)
        b = rng.standard_normal((k, n), dtype=np.float32)
        for schedule, scheduled in ((None, want), ("all", True)):
            run = compile_function(fn, threads=1, schedule=schedule, cache=False, matmul="schedule")
            np.testing.assert_allclose(run([a, b])[0], a.astype(np.float64) @ b, rtol=1e-4, atol=1e-4)
            assert _kernel(run).scheduled == scheduled, (m, k, n, schedule)
            # a call of the prebuilt GEMM costs no compile time: every size calls it
            run = compile_function(fn, threads=1, schedule=schedule, cache=False, matmul="library")
            np.testing.assert_allclose(run([a, b])[0], a.astype(np.float64) @ b, rtol=1e-4, atol=1e-4)
            assert _kernel(run).matmul_library == host_isa(), (m, k, n, schedule)


def test_unknown_schedule_option_is_rejected():
    import pytest

    from mind.diagnostics import MindError

    fn = _fn("func @main(%a: f32[2]) -> (f32[2]) {\n  %0 = add(%a, %a) : f32[2]\n  return %0\n}\n")
    with pytest.raises(MindError, match="E7002"):  # a bad option is a usage error
        compile_function(fn, schedule="some")


def test_train_step_under_the_cost_model(monkeypatch):
    """The default policy still schedules train_step's large ops (matmuls, 784x256 updates) and the
    result matches the reference."""
    from mind.calling import run_reference

    monkeypatch.setenv("MIND_CPU_SCHEDULE", "1")
    fn = _train_step()
    args = _train_inputs()
    run = compile_function(fn, threads=1, cache=False)
    got = run(args)
    assert _kernel(run).scheduled
    for g, w in zip(got, run_reference(fn, args)):
        w = np.asarray(w)
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5 * max(1.0, float(np.max(np.abs(w)))))


@pytest.mark.parametrize("cpu", ISAS)
def test_matmul_register_block_lowers_to_a_compact_inner_loop(cpu):
    """Per-op ``vectorize`` leaves matmul as broadcast + mul + multi_reduction; without the
    reduction-to-contract patterns its 8x32 register block lowered through 256 scalar extracts per k
    (3.5k lines of LLVM IR for one 128x256x512 matmul, 2.5x slower at run time).  Now one broadcast
    and one FMA on a register block row per row and k (8 on vector<32xf32> on AVX-512, 4 on
    vector<16xf32> on AVX2), on each level the host runs."""
    import kernels as K

    from mind.compiler.backend.cpu.engine import mlir_to_llvm_ir
    from mind.compiler.backend.cpu.transforms import choose_matmul_tiles
    from mind.compiler.backend.cpu.vector_unit import vector_unit

    needs_level(cpu)
    options = CpuOptions.resolve(threads=1, schedule=True, matmul="schedule", cpu=cpu)
    block = choose_matmul_tiles(128, 512, 256, 32, False, vector_unit(cpu))
    low = mlir_to_llvm_ir(K.matmul(128, 256, 512), "mm", options)
    assert low.scheduled
    assert low.llvm_ir.count("\n") < 1200
    assert (block.reg_m, block.reg_n) == {"x86-64-v4": (8, 32), "x86-64-v3": (4, 16)}[cpu]
    assert low.llvm_ir.count(f"@llvm.fmuladd.v{block.reg_n}f32(") >= block.reg_m


def _scalar_work(text: str, **options) -> int:
    from mind.compiler.backend.cpu.lowering import lower_to_llvm_dialect
    from mind.compiler.backend.linalg.emit import emit_mlir
    mlir_text, name = emit_mlir(_fn(text), {})
    report: dict = {}
    options.setdefault("schedule", True)  # the cost model (the tests' default schedules every op)
    lower_to_llvm_dialect(mlir_text, name, CpuOptions.resolve(**options), report=report)
    return report["scalar_work"]


def test_a_fill_the_schedule_vectorized_is_not_counted_as_scalar_loops():
    # a convolution's zero init is fused into its tiles and vectorized there: nothing is left to
    # scalar loops, so the kernel gets the short LLVM pipeline (weighed before the script ran, the
    # whole fill counted, 8*27*27*128 elements, and sent the kernel to LLVM's loop pipeline)
    from mind.compiler.backend.cpu.transforms import MIN_SCHEDULE_WORK
    text = ("func @main(%x: f32[8, 56, 56, 64], %w: f32[3, 3, 64, 128]) -> (f32[8, 27, 27, 128]) {\n"
            "  %0 = conv2d(%x, %w) {strides = [2, 2], padding = [[0, 0], [0, 0]], lhs_dilation = [1, 1], "
            "rhs_dilation = [1, 1]} : f32[8, 27, 27, 128]\n"
            "  return %0\n}\n")
    for threads in (1, 2):
        assert _scalar_work(text, threads=threads) < MIN_SCHEDULE_WORK


def test_ops_left_as_loops_count_their_whole_work():
    # below the cost model's threshold: the whole op is one loop nest
    assert _scalar_work("func @main(%x: f32[40, 40]) -> (f32[40, 40]) {\n  %0 = add(%x, %x) : f32[40, 40]\n"
                        "  return %0\n}\n", threads=1) == 40 * 40


def test_a_padded_conv_leaves_no_scalar_loops():
    # the padding in front of a conv is a pad (border fills and a copy, each planned and vectorized
    # as a pad's), where the copy fused into the conv's tiles had stayed a scalar loop nest
    from mind.compiler.backend.cpu.transforms import MIN_SCHEDULE_WORK
    text = ("func @main(%x: f32[4, 64, 64, 32], %w: f32[3, 3, 32, 32]) -> (f32[4, 64, 64, 32]) {\n"
            "  %0 = conv2d(%x, %w) {strides = [1, 1], padding = [[1, 1], [1, 1]], lhs_dilation = [1, 1], "
            "rhs_dilation = [1, 1]} : f32[4, 64, 64, 32]\n"
            "  return %0\n}\n")
    for threads in (1, 2):
        assert _scalar_work(text, threads=threads) < MIN_SCHEDULE_WORK


def test_a_pad_copy_that_a_conv_also_reads_is_not_left_as_loops(monkeypatch):
    # a stride-2 conv's input gradient is four phase convs over the padded cotangent; the 1x1 phase
    # reads the pad's copy itself, so the copy has two users.  Its run was counted as its last extent
    # (32 < 4 vectors) and it stayed a scalar loop nest, which sent a CNN's whole training kernel
    # through LLVM's loop pipeline (438 of its 1054 ms cold compile); the pad's window keeps runs of
    # 16 x 32 and the conv reads the whole copy, so it is vectorized into memmoves
    import mind
    from mind.compiler.backend.cpu import engine
    from mind.compiler.backend.cpu.transforms import MIN_SCHEDULE_WORK
    lowered: list = []
    real = engine.mlir_to_llvm_ir
    monkeypatch.setattr(engine, "mlir_to_llvm_ir", lambda *a, **k: lowered.append(real(*a, **k)) or lowered[-1])
    src = ("fn loss(x: Tensor<f32, [4, 32, 32, 16]>, k: Tensor<f32, [3, 3, 16, 32]>) -> f32 {\n"
           "  let h = conv2d(x, k, strides=[2, 2], padding=\"same\");\n"
           "  sum(h * h, axes=[0, 1, 2, 3], keepdims=false)\n}\n"
           "fn g(x: Tensor<f32, [4, 32, 32, 16]>, k: Tensor<f32, [3, 3, 16, 32]>)"
           " -> (Tensor<f32, [4, 32, 32, 16]>, Tensor<f32, [3, 3, 16, 32]>) {\n"
           "  grad(loss(x, k), wrt=[x, k])\n}\n")
    rng = np.random.default_rng(0)
    x = rng.standard_normal((4, 32, 32, 16)).astype(np.float32)
    k = (rng.standard_normal((3, 3, 16, 32)) * 0.1).astype(np.float32)
    got = mind.compile(src, fn="g", threads=2, cache=False)(x, k)
    assert lowered and all(low.scalar_work < MIN_SCHEDULE_WORK for low in lowered)
    want = mind.compile(src, fn="g", backend="reference")(x, k)
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-4 * float(np.max(np.abs(b))))


def test_loop_work_multiplies_the_trips_of_the_loops_around_an_op():
    from mlir import ir

    from mind.compiler.backend.linalg.context import new_context
    from mind.compiler.backend.linalg.schedule import largest_loop_work
    body = ("  %c0 = arith.constant 0 : index\n  %c2 = arith.constant 2 : index\n  %c8 = arith.constant 8 : index\n"
            "  %z = arith.constant 0.0 : f32\n"
            "  %r = scf.forall (%i) = (0) to (12) step (4) shared_outs(%o = %t) -> (tensor<8x8xf32>) {\n"
            "    %u = scf.for %k = %c0 to UPPER step %c2 iter_args(%a = %o) -> (tensor<8x8xf32>) {\n"
            "      %f = linalg.fill ins(%z : f32) outs(%a : tensor<8x8xf32>) -> tensor<8x8xf32>\n"
            "      scf.yield %f : tensor<8x8xf32>\n    }\n"
            "    scf.forall.in_parallel {\n"
            "      tensor.parallel_insert_slice %u into %o[0, 0] [8, 8] [1, 1] : tensor<8x8xf32> into tensor<8x8xf32>\n"
            "    }\n  }\n  return %r : tensor<8x8xf32>\n")
    with new_context() as ctx:
        static = ir.Module.parse("func.func @f(%t: tensor<8x8xf32>) -> tensor<8x8xf32> {\n"
                                 + body.replace("UPPER", "%c8") + "}\n", ctx)
        assert largest_loop_work(static) == 64 * 3 * 4  # the fill's 64 elements, 3 x 4 trips
        dynamic = ir.Module.parse("func.func @f(%t: tensor<8x8xf32>, %n: index) -> tensor<8x8xf32> {\n"
                                  + body.replace("UPPER", "%n") + "}\n", ctx)
        assert largest_loop_work(dynamic) == 1 << 62  # a bound that is not a constant: large


def test_an_op_with_a_long_body_counts_its_operations_not_its_iterations():
    # an f32 RMS norm over 6000 rows of 24: rows of less than 2 AVX-512 vectors stay with the per-op
    # plans, and its per-row sqrt (an f64 exp and log, some 130 operations per row) is 6000
    # iterations, below MIN_SCHEDULE_WORK: counted as iterations it stayed a scalar loop nest that
    # took 5x the time of the rest of the kernel; counted as operations it is scheduled
    from mind.calling import select_function as select
    from mind.compiler.backend.cpu.engine import mlir_to_llvm_ir
    from mind.compiler.backend.cpu.lowering import lower_to_llvm_dialect
    from mind.compiler.backend.cpu.transforms import MIN_SCHEDULE_WORK
    from mind.compiler.backend.linalg.emit import emit_mlir
    from mind.compiler.backend.linalg.payload import BODY_OPS
    from mind.compiler.frontend.api import compile_source
    src = ("fn f(x: Tensor<f32, [6000, 24]>, g: Tensor<f32, [24]>) -> Tensor<f32, [6000, 24]> {\n"
           "  x / sqrt(mean(x * x, axes=[1], keepdims=true) + 1e-5) * g\n}")
    fn = select(compile_source(src, "<test>"), "f")
    mlir_text, name = emit_mlir(fn, {})
    for cpu in HOST_LEVELS:  # the options refuse a level the host cannot run
        options = CpuOptions.resolve(threads=2, cpu=cpu, schedule=True)
        report: dict = {}
        lower_to_llvm_dialect(mlir_text, name, options, report=report)
        assert report["scalar_work"] < MIN_SCHEDULE_WORK, cpu
        # the sqrt in f64 vectors (a scalar loop has none: the rest of the kernel is f32)
        assert re.search(r"<\d+ x double>", mlir_to_llvm_ir(mlir_text, name, options).llvm_ir), cpu
    assert 6000 < MIN_SCHEDULE_WORK < 6000 * 100 // BODY_OPS  # the per-row op's iterations, its operations
    x = np.random.default_rng(5).standard_normal((6000, 24)).astype(np.float32)
    g = np.random.default_rng(6).standard_normal(24).astype(np.float32)
    import mind
    got = mind.compile(src, fn="f", threads=2, cache=False)(x, g)
    want = x / np.sqrt((x.astype(np.float64) ** 2).mean(axis=1, keepdims=True) + 1e-5) * g
    np.testing.assert_allclose(got, want, rtol=2e-6, atol=2e-6)


def test_op_work_weighs_a_generic_by_its_body():
    from mlir import ir

    from mind.compiler.backend.linalg.payload import BODY_OPS, op_work

    def chain(n: int) -> str:
        return ("#m = affine_map<(d0) -> (d0)>\n"
                "func.func @f(%x: tensor<1000xf32>) -> tensor<1000xf32> {\n"
                "  %0 = linalg.generic {indexing_maps = [#m, #m], iterator_types = [\"parallel\"]} "
                "ins(%x : tensor<1000xf32>) outs(%x : tensor<1000xf32>) {\n"
                "  ^bb0(%a: f32, %o: f32):\n" +
                "".join(f"    %v{i} = arith.mulf {'%a' if i == 0 else f'%v{i - 1}'}, %a : f32\n" for i in range(n)) +
                f"    linalg.yield %v{n - 1} : f32\n  }} -> tensor<1000xf32>\n  return %0 : tensor<1000xf32>\n}}\n")
    with ir.Context(), ir.Location.unknown():
        for n, work in ((32, 1000 * 32 // BODY_OPS), (BODY_OPS, 1000), (1, 1000)):  # a short body: its iterations
            m = ir.Module.parse(chain(n))
            op = next(o for o in m.body.operations[0].regions[0].blocks[0].operations if o.name == "linalg.generic")
            assert op_work(op) == work, n


def test_small_ops_with_costly_bodies_are_scheduled(monkeypatch):
    """The default cost model counts a body's operations (``payload.BODY_OPS``): an ``exp`` of 1024
    elements, a ``sigmoid`` or ``tanh`` of 2000 (an ``exp`` and a division each) are scheduled, where
    their scalar loops took several times a call; a cheap body of as many elements, and a classifier
    head's 32x10 log-softmax (its ops, and its group: ``fusion_groups.GROUP_BODY_OPS``), stay scalar
    loops.  The values: the reference's, within its bound."""
    monkeypatch.setenv("MIND_CPU_SCHEDULE", "1")  # the default cost model, not every op
    rng = np.random.default_rng(3)
    for body, shape, scheduled in (("exp(x)", (32, 32), True), ("sigmoid(x)", (40, 50), True),
                                   ("tanh(x)", (40, 50), True), ("x * 2.0 + 1.0", (40, 50), False)):
        t = f"Tensor<f32, [{shape[0]}, {shape[1]}]>"
        fn = select_function(compile_source(f"fn f(x: {t}) -> {t} {{ {body} }}", "<test>"), "f")
        script, _ = _script_and_ir(fn, threads=1)
        assert ("transform.structured.vectorize" in script) == scheduled, body
        x = rng.standard_normal(shape).astype(np.float32) * 4
        got = compile_function(fn, threads=1, cache=False)([x])[0]
        np.testing.assert_allclose(got, run_reference(fn, [x])[0], rtol=4e-7)
    fn = select_function(compile_source("fn f(x: Tensor<f32, [32, 10]>) -> Tensor<f32, [32, 10]> "
                                        "{ log_softmax(x, axis=-1) }", "<test>"), "f")
    assert _script_and_ir(fn, threads=1)[0] == ""


def test_row_statistics_broadcast_over_several_rows_stay_row_splats():
    """A reduction tile of several rows (a softmax over the last axis of 165x3x48: tiles of 3 rows of
    48) broadcasts each row's statistic along its row: a broadcast and a transpose, which the vector
    lowering used to expand into 144-lane shuffles (280 KB of LLVM IR).  Folded before the transposes
    are lowered, they are a splat per row; the values are the reference's."""
    fn = select_function(compile_source("fn f(x: Tensor<f32, [165, 3, 48]>) -> Tensor<f32, [165, 3, 48]> "
                                        "{ softmax(x, axis=-1) }", "<test>"), "f")
    for cpu in ("host", "x86-64-v3"):
        _, ir = _script_and_ir(fn, cpu=cpu)
        widths = [int(n) for n in re.findall(r"shufflevector <\d+ x float> [^,]+, <\d+ x float> [^,]+, <(\d+) x i32>", ir)]
        assert max(widths, default=0) <= 64, (cpu, max(widths))
    x = np.random.default_rng(4).standard_normal((165, 3, 48)).astype(np.float32)
    got = compile_function(fn, threads=2, cache=False)([x])[0]
    np.testing.assert_allclose(got, run_reference(fn, [x])[0], rtol=4e-7, atol=1e-9)


def _script_and_ir(fn, threads: int = 2, cpu: str = "host") -> tuple[str, str]:
    """The transform script the lowering applies to ``fn`` and the kernel's LLVM IR."""
    from mind.compiler.backend.cpu import lowering
    from mind.compiler.backend.cpu.api import emit_stage
    scripts: list[str] = []
    real = lowering.apply_script
    try:
        lowering.apply_script = lambda m, script: (scripts.append(script), real(m, script))[1]
        ir = emit_stage(fn, "llvm", threads=threads, cpu=cpu)
    finally:
        lowering.apply_script = real
    return "\n".join(scripts), ir


@pytest.mark.parametrize("cpu", ["host", "x86-64-v3"])
@pytest.mark.parametrize("body,dtype,shape", [
    ("exp", "f32", (836, 64, 4)),      # whole vectors: 214016 elements, tiles of 4 vectors
    ("exp", "f32", (837, 63, 5)),      # whole tiles and a tail
    ("gelu", "f32", (4238, 13)),
    ("exp", "f64", (301, 3)),
    ("mask", "f32", (97, 11)),         # an i8 result beside f32 operands
    ("gelu", "f32", (64, 857)),        # long rows without a vector-wide divisor (857 is prime)
    ("gelu", "f32", (81, 857)),        # the same, and a tail
    ("exp", "f64", (16, 3, 134)),      # 2 x 67: its largest divisor up to 4 vectors is 2
    ("exp", "f64", (13, 3, 134)),
    ("exp", "f32", (64, 1000)),        # tiles of 50 (3 vectors and a piece); whole tiles divide 64000
    ("gelu", "f32", (64, 1975)),       # tiles of 25
    ("gelu", "f32", (61, 1975)),       # tiles of 25 and a tail
    ("exp", "f32", (1000001,)),        # one dim, 101 x 9901: tiles of one element
    ("gelu", "f32", (100003,)),        # one dim, prime
    ("exp", "f64", (20,)),             # one dim, less than a tile
])
def test_elementwise_ops_over_short_rows_are_flattened(cpu, body, dtype, shape):
    """An elementwise op over contiguous operands whose rows are shorter than two vectors, or whose
    rows' largest divisor of at most 4 vectors is not whole vectors (of any rank), runs as one loop
    (``transforms._flat_section``), split after its last whole tile of 4 vectors where they do not
    divide it (the whole tiles on the threads, a tail of static size after them; not masked):
    its tiles were a row or two (2x4 elements of an ``exp``) or a divisor of its rows (one element
    of a row of 857, or of a vector of 1000001).  Its result is written in the out-parameter (``result_roots`` follows the
    reshapes and the split's writes): no temporary, no copy.  Bit for bit against the unflattened
    plan's and within the reference's bound, 1 and 2 threads."""
    from mind.compiler.backend.cpu import transforms
    from mind.compiler.backend.cpu.vector_unit import vector_unit
    needs_level(cpu)
    t = f"Tensor<{dtype}, [{', '.join(map(str, shape))}]>"
    bodies = {"exp": (t, "exp(x)"), "gelu": (t, "x * sigmoid(x * 1.702)"),
              "mask": (f"Tensor<bool, [{', '.join(map(str, shape))}]>", "x > 0.0")}
    out, expr = bodies[body]
    fn = compile_source(f"fn main(x: {t}) -> {out} {{ {expr} }}").functions[0]
    script, ir = _script_and_ir(fn, cpu=cpu)
    assert ("flatten_elementwise" in script) == (len(shape) > 1)  # one loop is flat already
    tile = 4 * vector_unit(cpu).lanes(64 if dtype == "f64" else 32)
    total = int(np.prod(shape))
    assert ("transform.structured.split" in script) == (total % tile != 0 and total > tile)
    assert "vector_sizes" not in script  # no masked tile
    assert "llvm.memcpy" not in ir and "__mind_alloc(" not in ir
    x = np.random.default_rng(len(shape)).standard_normal(shape).astype(dtype.replace("f", "float")) * 3
    got = [compile_function(fn, threads=th, cpu=cpu, cache=False)([x])[0] for th in (1, 2)]
    want = run_reference(fn, [x])[0]
    np.testing.assert_allclose(got[0], want, rtol=4e-7 if dtype == "f32" else 1e-15)
    np.testing.assert_array_equal(got[0], got[1])
    real = transforms._flattens
    try:
        transforms._flattens = lambda *a: False
        np.testing.assert_array_equal(compile_function(fn, threads=2, cpu=cpu, cache=False)([x])[0], got[1])
    finally:
        transforms._flattens = real


@pytest.mark.parametrize("cpu", ["host", "x86-64-v3"])
@pytest.mark.parametrize("shape,out,expr", [
    ((200, 200), (200, 199), "slice(x, axis=1, start=1, end=200) - slice(x, axis=1, start=0, end=199)"),
    ((100, 1000), (100, 500), "slice(x, axis=1, start=0, end=500) * sigmoid(slice(x, axis=1, start=500, end=1000))"),
    ((64, 30, 31), (64, 29, 31), "slice(x, axis=1, start=1, end=30) - slice(x, axis=1, start=0, end=29)"),
    ((50, 3, 67), (50, 2, 67), "exp(slice(x, axis=1, start=1, end=3))"),
])
def test_ops_over_windows_of_part_of_rows_are_not_flattened(cpu, shape, out, expr):
    """An elementwise op reading a window that leaves out part of its source's rows (a difference of
    neighbours, the halves of a gated unit) is not flattened: collapsed, each window was copied into
    a new buffer first (``payload.row_major_run``; 2000x2000 f32 neighbours: 8.7 -> 1.8 ms).  Its
    rows are peeled (or tiled) in place; the values are the reference's."""
    needs_level(cpu)
    t = f"Tensor<f32, [{', '.join(map(str, shape))}]>"
    fn = compile_source(f"fn main(x: {t}) -> Tensor<f32, [{', '.join(map(str, out))}]> {{ {expr} }}").functions[0]
    script, ir = _script_and_ir(fn, cpu=cpu, threads=2)
    assert "flatten_elementwise" not in script and "transform.structured.split" not in script
    assert "memrefCopy" not in ir and "llvm.memcpy" not in ir and "__mind_alloc(" not in ir
    x = np.random.default_rng(5).standard_normal(shape).astype(np.float32)
    got = compile_function(fn, threads=2, cpu=cpu, cache=False)([x])[0]
    np.testing.assert_allclose(got, run_reference(fn, [x])[0], rtol=4e-7)


@pytest.mark.parametrize("cpu", ["host", "x86-64-v3"])
@pytest.mark.parametrize("src,shapes", [
    ("fn main(x: Tensor<f32, [100003]>, s: Tensor<f32, []>) -> Tensor<f32, [100003]> { exp(x) * s }",
     [(100003,), ()]),
    ("fn main(x: Tensor<f32, [100003]>) -> Tensor<f32, [100003]> { softmax(x, axis=0) }", [(100003,)]),
    ("fn main(x: Tensor<f64, [5003]>) -> Tensor<f64, [5003]> { x - mean(x) }", [(5003,)]),
], ids=["scaled", "softmax", "centred"])
def test_ops_of_one_loop_with_a_scalar_operand_are_split(cpu, src, shapes):
    """An op of one loop whose extent has no whole-vector divisor up to 4 vectors (100003 is prime,
    5003 too) and that reads a scalar (a softmax's max and sum, a mean) runs in whole tiles on the
    threads and a static tail (``transforms._flat_section`` without the flattening): its tiles were
    one element (a 100003-element softmax ran 5.5x slower than torch eager).  Within the
    reference's bound, 1 and 2 threads, bit for bit against the plan without it."""
    from mind.compiler.backend.cpu import transforms
    needs_level(cpu)
    fn = compile_source(src).functions[0]
    script, ir = _script_and_ir(fn, cpu=cpu)
    assert "transform.structured.split" in script and "flatten_elementwise" not in script
    assert "llvm.memcpy" not in ir
    rng = np.random.default_rng(7)
    dtype = np.float64 if "f64" in src else np.float32
    args = [np.asarray(rng.standard_normal(s) * 3, dtype=dtype) for s in shapes]
    got = [compile_function(fn, threads=th, cpu=cpu, cache=False)(args)[0] for th in (1, 2)]
    np.testing.assert_allclose(got[0], run_reference(fn, args)[0], rtol=2e-6 if dtype == np.float32 else 1e-13,
                               atol=1e-12)
    np.testing.assert_array_equal(got[0], got[1])
    real = transforms._flattens
    try:
        transforms._flattens = lambda *a: False
        np.testing.assert_array_equal(compile_function(fn, threads=2, cpu=cpu, cache=False)(args)[0], got[1])
    finally:
        transforms._flattens = real


def test_rows_of_whole_vectors_and_broadcasts_are_not_flattened():
    """Rows of two vectors and more whose largest divisor up to 4 vectors is whole vectors keep
    their tiles (500x32 f32), and an op with a broadcast operand (its map not an identity: the
    flattened op would need a gather) is not flattened either."""
    whole = _fn("func @main(%x: f32[500, 32]) -> (f32[500, 32]) {\n  %0 = exp(%x) : f32[500, 32]\n  return %0\n}\n")
    bcast = _fn("func @main(%x: f32[500, 4], %y: f32[500, 1]) -> (f32[500, 4]) {\n"
                "  %0 = sub(%x, %y) : f32[500, 4]\n  return %0\n}\n")
    for fn in (whole, bcast):
        assert "flatten_elementwise" not in _script_and_ir(fn)[0]


_PEELED_ROWS = {
    "tiles_of_25": ("fn main(x: Tensor<f32, [61, 1975]>, b: Tensor<f32, [1975]>) -> Tensor<f32, [61, 1975]> "
                    "{ tanh(x) * b }", [(61, 1975), (1975,)]),
    "tiles_of_50": ("fn main(x: Tensor<f32, [32, 1000]>, b: Tensor<f32, [1000]>) -> Tensor<f32, [32, 1000]> "
                    "{ exp(x) * b }", [(32, 1000), (1000,)]),
    "prime_rows": ("fn main(x: Tensor<f32, [81, 857]>, m: Tensor<f32, [81, 1]>) -> Tensor<f32, [81, 857]> "
                   "{ sigmoid(x * 1.702) * m }", [(81, 857), (81, 1)]),
    "f64_3d": ("fn main(x: Tensor<f64, [13, 3, 134]>, g: Tensor<f64, [3, 1]>) -> Tensor<f64, [13, 3, 134]> "
               "{ exp(x) * g }", [(13, 3, 134), (3, 1)]),
    "row_affine": ("fn main(x: Tensor<f32, [115, 880]>, g: Tensor<f32, [880]>, b: Tensor<f32, [880]>) -> "
                   "Tensor<f32, [115, 880]> { x * g + b }", [(115, 880), (880,), (880,)]),
    "per_row_f64": ("fn main(x: Tensor<f64, [37, 1009]>, m: Tensor<f64, [37, 1]>) -> Tensor<f64, [37, 1009]> "
                    "{ sigmoid(x - m) }", [(37, 1009), (37, 1)]),
}


@pytest.mark.parametrize("cpu", ["host", "x86-64-v3"])
@pytest.mark.parametrize("name", sorted(_PEELED_ROWS))
def test_rows_of_pieces_of_vectors_are_peeled(cpu, name):
    """An elementwise op with a broadcast operand whose rows of at least two vectors have no
    whole-vector divisor of at most 4 vectors (857, 1975 = 25 x 79, 1000 = 50 x 20 f32; 134 and
    1009 f64) runs each row as whole tiles of vectors on a peeled loop and one tail
    (``transforms._peeled_rows``): its tiles were pieces of vectors (25 elements) or one element.  Within a few ULP of the reference (a composite of
    ``tanh`` or ``sigmoid`` and a product), 1 and 2 threads, and
    bit for bit against the plan without peeling."""
    from mind.compiler.backend.cpu import transforms
    needs_level(cpu)
    src, shapes = _PEELED_ROWS[name]
    fn = compile_source(src).functions[0]
    script, _ = _script_and_ir(fn, cpu=cpu)
    assert "transform.loop.peel" in script
    rng = np.random.default_rng(len(name))
    dtype = np.float64 if "f64" in src else np.float32
    args = [(rng.standard_normal(s) * 3).astype(dtype) for s in shapes]
    got = [compile_function(fn, threads=th, cpu=cpu, cache=False)(args)[0] for th in (1, 2)]
    np.testing.assert_allclose(got[0], run_reference(fn, args)[0], rtol=1e-6 if dtype == np.float32 else 1e-15)
    np.testing.assert_array_equal(got[0], got[1])
    real = transforms._peeled_row_tile
    try:
        transforms._peeled_row_tile = lambda *a: 0
        script, _ = _script_and_ir(fn, cpu=cpu)
        assert "transform.loop.peel" not in script
        np.testing.assert_array_equal(compile_function(fn, threads=2, cpu=cpu, cache=False)(args)[0], got[1])
    finally:
        transforms._peeled_row_tile = real


def test_rows_of_pieces_of_vectors_fewer_than_threads_are_not_peeled():
    """The peeled plan puts the rows on the threads: an op of one row keeps the plan that tiles the
    row itself (each thread takes part of it)."""
    def source(rows: int) -> str:
        return (f"fn main(x: Tensor<f32, [{rows}, 8001]>, b: Tensor<f32, [8001]>) -> Tensor<f32, [{rows}, 8001]> "
                "{ tanh(x) * b }")
    assert "transform.loop.peel" not in _script_and_ir(compile_source(source(1)).functions[0], threads=2)[0]
    assert "transform.loop.peel" in _script_and_ir(compile_source(source(2)).functions[0], threads=2)[0]


@pytest.mark.parametrize("cpu", ["host", "x86-64-v3"])
@pytest.mark.parametrize("src,shapes", [
    # a per-row operand: the op runs over the frontend's [R, 1, C] view, its result collapsed to [R, C]
    ("fn main(x: Tensor<f32, [300, 257]>, m: Tensor<f32, [300, 1]>) -> Tensor<f32, [300, 257]> { x - m }",
     [(300, 257), (300, 1)]),
    ("fn main(x: Tensor<f64, [64, 40]>, m: Tensor<f64, [64, 1]>) -> Tensor<f64, [64, 40]> { exp(x / m) }",
     [(64, 40), (64, 1)]),
    # a per-channel scale and shift over the middle axis of [N, C, HW]
    ("fn main(x: Tensor<f32, [4, 24, 100]>, g: Tensor<f32, [24, 1]>, b: Tensor<f32, [24, 1]>) -> "
     "Tensor<f32, [4, 24, 100]> { x * g + b }", [(4, 24, 100), (24, 1), (24, 1)]),
], ids=["per_row_f32", "per_row_f64", "per_channel"])
def test_results_through_reshapes_are_written_in_place(cpu, src, shapes):
    """An elementwise result computed over another shape than the out-parameter's (the frontend's
    ``expand_shape`` of an operand broadcast against a unit dim, collapsed back) is written in the
    out-parameter seen through the reshapes undone (``result_roots._undo``): each call allocated a
    temporary of the result's size and copied it out, at half the speed or less.  Bit for bit the
    values of the temporary's path, 1 and 2 threads, and against the reference."""
    from mind.compiler.backend.linalg import result_roots
    needs_level(cpu)
    fn = compile_source(src).functions[0]
    _, ir = _script_and_ir(fn, cpu=cpu)
    assert "llvm.memcpy" not in ir and "__mind_alloc(" not in ir
    rng = np.random.default_rng(len(src))
    args = [rng.standard_normal(s).astype(np.float64 if "f64" in src else np.float32) + 2 for s in shapes]
    got = [compile_function(fn, threads=th, cpu=cpu, cache=False)(args)[0] for th in (1, 2)]
    np.testing.assert_array_equal(got[0], got[1])
    np.testing.assert_allclose(got[0], run_reference(fn, args)[0], rtol=1e-6 if "f32" in src else 1e-15)
    real = result_roots._chain_root
    try:  # the path before: a chain whose reshapes change the shape was left to bufferization
        result_roots._chain_root = lambda v: None
        fn2 = compile_source(src + " ").functions[0]
        assert "llvm.memcpy" in _script_and_ir(fn2, cpu=cpu)[1]
        np.testing.assert_array_equal(compile_function(fn2, threads=2, cpu=cpu, cache=False)(args)[0], got[1])
    finally:
        result_roots._chain_root = real
