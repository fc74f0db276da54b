"""The CPU backend's options: one table of knobs, resolved once (keyword, then environment, then
default), bad values a usage error (E7002) everywhere, and nothing below the front door reading the
environment."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

import mind
from mind.compiler.backend.cpu.api import compile_function
from mind.compiler.backend.cpu.cache import KernelCache
from mind.compiler.backend.cpu.options import KNOBS, CpuOptions
from mind.compiler.backend.cpu.thread_cost import COSTS, KernelCost, kernel_cost, one_thread_seconds
from mind.compiler.backend.cpu.vector_unit import VECTOR_UNITS, vector_unit
from mind.compiler.backend.options import markdown_table
from mind.diagnostics import MindError
from mind.ir.parser import parse_module

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ENV_VARS = sorted(k.env for k in KNOBS if k.env)
SRC = "fn main(x: Tensor<f32, [4, 8]>) -> Tensor<f32, [4, 8]> { relu(x) * 2.0 }"
IR = "func @main(%x: f32[3]) -> (f32[3]) {\n  %0 = add(%x, %x) : f32[3]\n  return %0\n}\n"

#: A valid setting of each environment variable other than the default, and the value it gives.
SETTINGS = {"MIND_NUM_THREADS": ("3", 3), "MIND_CPU_SCHEDULE": ("all", "all"), "MIND_CPU_MATMUL": ("schedule", "schedule"),
            "MIND_CACHE": ("off", None), "MIND_CPU_JIT": ("0", False), "MIND_OPENMP": ("kmpc", "kmpc"),
            "MIND_OPENMP_LIB": ("/nowhere/libomp.so", "/nowhere/libomp.so")}
#: A bad keyword value of each knob.
BAD = {"threads": 0, "schedule": "some", "matmul": "blas", "cpu": "znver9", "opt": "O7", "cache": "yes",
       "jit": 1, "openmp": "iomp", "openmp_lib": ""}


@pytest.fixture
def clean_env(monkeypatch):
    for var in ENV_VARS:
        monkeypatch.delenv(var, raising=False)
    return monkeypatch


def test_the_tables_cover_every_knob():
    assert sorted(SETTINGS) == ENV_VARS and sorted(BAD) == sorted(k.name for k in KNOBS)


@pytest.mark.parametrize("var", sorted(SETTINGS))
def test_keyword_then_environment_then_default(clean_env, var):
    knob = next(k for k in KNOBS if k.env == var)
    field = knob.name
    default = getattr(CpuOptions.resolve(), field)
    text, value = SETTINGS[var]
    clean_env.setenv(var, text)
    assert getattr(CpuOptions.resolve(), field) == value != default
    clean_env.setenv(var, "not a setting")  # the keyword wins: the environment is not read
    given = {"threads": 2, "schedule": False, "matmul": "library", "cache": False, "jit": False, "openmp": "gomp",
             "openmp_lib": "/elsewhere/libiomp5.so"}[field]
    assert getattr(CpuOptions.resolve({field: given}), field) == (None if field == "cache" else given)


@pytest.mark.parametrize("name", sorted(BAD))
def test_a_bad_keyword_is_a_usage_error(clean_env, name):
    with pytest.raises(MindError) as info:
        compile_function(parse_module(IR).functions[0], **{name: BAD[name]})
    d = info.value.diagnostics[0]
    assert d.code == "E7002" and f"`{name}`" in d.message and d.help


@pytest.mark.parametrize("flags", ["avx512", None])
def test_a_level_the_host_does_not_run_is_refused_with_what_it_lacks(clean_env, monkeypatch, flags):
    """On a host without AVX-512 (its flags dropped here) x86-64-v4 is refused, the help naming the
    missing flags and only the levels the host runs; an unknown level lists those levels too."""
    from mind.compiler.backend.cpu import host
    from mind.compiler.backend.cpu.vector_unit import runs_isa
    if not runs_isa("x86-64-v3"):
        pytest.skip("this host does not run x86-64-v3 code")
    model, all_flags = host._once("cpuinfo", host._cpuinfo)
    kept = " ".join(f for f in all_flags.split() if not (flags and f.startswith(flags)))
    monkeypatch.setitem(host._FACTS, "cpuinfo", (model, kept))
    asked = "x86-64-v4" if flags else "x86-64-v5"
    with pytest.raises(MindError) as info:
        CpuOptions.resolve(cpu=asked)
    d = info.value.diagnostics[0]
    assert d.code == "E7002" and repr(asked) in d.message
    if flags:
        assert d.help.startswith("this host does not run x86-64-v4 code (it lacks avx512bw, avx512cd, avx512dq, "
                                 "avx512f, avx512vl): use 'host', 'generic' or 'x86-64-v3'"), d.help
    else:
        assert d.help == {True: "use 'host', 'generic', 'x86-64-v4' or 'x86-64-v3'",
                          False: "use 'host', 'generic' or 'x86-64-v3'"}[runs_isa("x86-64-v4")], d.help


def test_an_unknown_option_is_a_usage_error(clean_env):
    with pytest.raises(MindError) as info:
        mind.compile(IR, threds=2)
    d = info.value.diagnostics[0]
    assert d.code == "E7002" and "threds" in d.message and "threads" in d.help


@pytest.mark.parametrize("var, value", [("MIND_CPU_SCHEDULE", "al"), ("MIND_CACHE", "of"),
                                        ("MIND_FRONTEND_CACHE", "no"), ("MIND_NUM_THREADS", "two")])
def test_a_bad_setting_is_the_same_usage_error_in_python_and_on_the_command_line(clean_env, tmp_path, var, value):
    """The backend's settings and the caches' shared ones follow one rule: E7002, exit status 2."""
    clean_env.setenv("MIND_CACHE_DIR", str(tmp_path))
    clean_env.setenv(var, value)
    with pytest.raises(MindError) as info:
        mind.compile(SRC)
    assert info.value.codes == ["E7002"] and var in info.value.diagnostics[0].message
    r = subprocess.run([sys.executable, "-m", "mind.cli.main", "run", os.path.join(ROOT, "examples", "quickstart.mind")],
                       capture_output=True, text=True, timeout=120, env=dict(os.environ))
    assert r.returncode == 2 and "error[E7002]" in r.stderr and var in r.stderr, r.stderr


class _Guard(dict):
    """An environment that fails the test when anything reads one of the backend's settings."""

    def _check(self, key: object) -> None:
        assert key not in ENV_VARS, f"{key} read below the front door"

    def __getitem__(self, key):
        self._check(key)
        return super().__getitem__(key)

    def get(self, key, default=None):
        self._check(key)
        return super().get(key, default)

    def __contains__(self, key):
        self._check(key)
        return super().__contains__(key)


@pytest.mark.parametrize("jit", [True, False])
def test_no_stage_reads_the_environment_after_the_front_door(clean_env, tmp_path, jit):
    fn = mind.compile(SRC, backend="reference").function
    # resolving the options reads the environment: that is the front door
    cold, warm = (compile_function(fn, threads=2, cache=KernelCache(str(tmp_path / "cache")), jit=jit)
                  for _ in range(2))
    clean_env.setattr(os, "environ", _Guard(os.environ))
    x = np.linspace(-1, 1, 32, dtype=np.float32).reshape(4, 8)
    np.testing.assert_array_equal(cold([x])[0], np.maximum(x, 0) * 2)  # emit, lower, codegen, load, store
    assert cold.kernel({}).wait_stored(60)
    np.testing.assert_array_equal(warm([x])[0], np.maximum(x, 0) * 2)  # the cached kernel
    assert warm.kernel({}).from_cache


def test_the_options_are_resolved_once(clean_env):
    run = compile_function(parse_module(IR).functions[0], cache=False)
    clean_env.setenv("MIND_NUM_THREADS", "not a number")  # too late: the record is made
    clean_env.setenv("MIND_CPU_SCHEDULE", "0")
    np.testing.assert_array_equal(run([np.ones(3, np.float32)])[0], [2, 2, 2])
    assert run.options.schedule is True and run.options.threads is None


def _cost(ir: str, env: dict[str, int] | None = None) -> KernelCost:
    return kernel_cost(parse_module(ir, "<t>").functions[0], env or {})


def _scaled(cost: KernelCost, seconds: float) -> KernelCost:
    """``cost``'s regions with memory traffic (outside the cache) that takes ``seconds`` on one core."""
    n = int(seconds * COSTS["stream_bytes_per_s"])
    return KernelCost(n, max(n, max(u.l2_bytes for u in VECTOR_UNITS.values()) + 1), 0.0, cost.regions)


ADD = "func @f(%x: {t}[N]) -> ({t}[N]) {{\n  %0 = add(%x, %x) : {t}[N]\n  return %0\n}}\n"
MATMUL = ("func @f(%a: f32[M, M], %b: f32[M, M]) -> (f32[M, M]) {\n  %c = matmul(%a, %b) : f32[M, M]\n"
          "  return %c\n}\n")


def test_the_thread_count_of_a_kernel_is_a_function_of_the_options_and_its_cost(clean_env):
    auto = CpuOptions.resolve().replace(cpus=4, abi="gomp", cpu="x86-64-v3")
    unit = vector_unit("x86-64-v3")
    one = _cost(ADD.format(t="f32"), {"N": 1})
    # the boundary: the saving of 4 threads (3/4 of the one-thread time) against the regions' cost
    boundary = COSTS["gain_over_regions"] * one.regions * COSTS["region_s"] / (3 / 4)
    below, above = _scaled(one, boundary * 0.99), _scaled(one, boundary * 1.01)
    assert one_thread_seconds(below, unit) < boundary < one_thread_seconds(above, unit)
    assert auto.for_kernel(below).threads == 1
    assert auto.for_kernel(above).threads == 4 == auto.for_kernel(None).threads
    more_regions = KernelCost(above.bytes, above.footprint, 0.0, 2 * above.regions)  # each region costs
    assert auto.for_kernel(more_regions).threads == 1
    assert auto.replace(threads=3).for_kernel(below).threads == 3  # asked for: honored
    assert auto.replace(threads=3, abi=None).for_kernel(below).threads == 1  # no OpenMP runtime
    assert auto.replace(cpus=1).for_kernel(above).threads == 1
    assert auto.for_kernel(above) == auto.for_kernel(above)


def test_an_f64_kernel_costs_what_an_f32_kernel_of_twice_its_elements_costs(clean_env):
    auto = CpuOptions.resolve().replace(cpus=2, abi="gomp")
    n = 1024
    while auto.for_kernel(_cost(ADD.format(t="f32"), {"N": n})).threads == 1:  # the f32 boundary
        n *= 2
    f32, f64 = _cost(ADD.format(t="f32"), {"N": n // 2}), _cost(ADD.format(t="f64"), {"N": n // 2})
    assert f64.bytes == 2 * f32.bytes and f64.lane_ops == 2 * f32.lane_ops
    assert f64 == _cost(ADD.format(t="f32"), {"N": n})
    assert auto.for_kernel(f32).threads == 1 and auto.for_kernel(f64).threads == 2


def test_a_matmul_is_costed_by_its_multiply_adds(clean_env):
    auto = CpuOptions.resolve().replace(cpus=2, abi="gomp")
    small, large = _cost(MATMUL, {"M": 32}), _cost(MATMUL, {"M": 256})
    assert small.lane_ops == 32 ** 3 and large.lane_ops == 256 ** 3
    assert small.bytes == 32 * 32 * 4 * 3  # its operands and result once: the op reads and writes them
    assert small.regions == 1  # the matmul's; no elementwise op, no region for one
    assert auto.for_kernel(small).threads == 1 and auto.for_kernel(large).threads == 2
    assert large.multiply_adds == large.lane_ops  # all of it a contraction's
    # the vector unit sets the rates: simple vector operations take twice as long on AVX2 as on
    # AVX-512, and multiply-adds as long (two ymm FMAs a cycle, one zmm FMA a cycle: the fewest of
    # each class, a Zen 4 core's)
    v3, v4 = vector_unit("x86-64-v3"), vector_unit("x86-64-v4")
    simple = KernelCost(0, 0, large.lane_ops, 1)
    fmas = KernelCost(0, 0, large.lane_ops, 1, large.multiply_adds)
    assert one_thread_seconds(simple, v3) == 2 * one_thread_seconds(simple, v4)
    assert one_thread_seconds(fmas, v3) == one_thread_seconds(fmas, v4) == 2 * one_thread_seconds(simple, v4)


def test_each_option_that_changes_the_code_changes_the_fingerprint(clean_env):
    base = CpuOptions.resolve(threads=1, matmul="schedule")
    fingerprints = [base.replace(**change).fingerprint() for change in (
        {}, {"threads": 2}, {"schedule": False}, {"schedule": "all"}, {"opt": "full"}, {"cpu": "generic"},
        {"library": "x86-64-v3"}, {"threads": 2, "abi": "kmpc"})]
    assert len({repr(sorted(f.items())) for f in fingerprints}) == len(fingerprints)
    assert base.replace(jit=False).fingerprint() == base.fingerprint()  # the same object code either way
    assert base.replace(abi="kmpc").fingerprint() == base.fingerprint()  # one thread: no OpenMP call


def test_the_doc_prints_the_knob_table():
    with open(os.path.join(ROOT, "docs", "backend-cpu.md"), encoding="utf-8") as fh:
        doc = fh.read()
    assert markdown_table(KNOBS) in doc, "docs/backend-cpu.md must print:\n" + markdown_table(KNOBS)


EXP = "func @f(%x: f32[N]) -> (f32[N]) {\n  %0 = exp(%x) : f32[N]\n  return %0\n}\n"


def test_exp_is_costed_by_the_instructions_of_its_polynomial(clean_env):
    # the cost model charges exp what linalg.mathlib emits for one vector of it (constants and
    # bitcasts free), not a guess: 12 per element undercounted the polynomial twice over
    from mind.compiler.backend.linalg.mathlib import TextEmitter, build_exp
    em = TextEmitter("vector<16xf32>")
    build_exp(em, "%x")
    emitted = sum(1 for line in em.lines if "arith.constant" not in line and "arith.bitcast" not in line)
    n = 1 << 16
    assert _cost(EXP, {"N": n}).lane_ops - _cost(ADD.format(t="f32"), {"N": n}).lane_ops == (emitted - 1) * n
    assert emitted >= 20


SOFTMAX = ("func @f(%x: f32[128, 384]) -> (f32[128, 384]) {\n"
           "  %0 = reduce_max(%x) {axes = [1], keepdims = true} : f32[128, 1]\n  %1 = sub(%x, %0) : f32[128, 384]\n"
           "  %2 = exp(%1) : f32[128, 384]\n  %3 = reduce_sum(%2) {axes = [1], keepdims = true} : f32[128, 1]\n"
           "  %4 = div(%2, %3) : f32[128, 384]\n  return %4\n}\n")
ATTENTION = ("func @f(%q: f32[4, 64, 16], %k: f32[4, 64, 16], %v: f32[4, 64, 16]) -> (f32[4, 64, 16]) {\n"
             "  %0 = transpose(%k) {permutation = [0, 2, 1]} : f32[4, 16, 64]\n"
             "  %1 = matmul(%q, %0) : f32[4, 64, 64]\n"
             "  %2 = reduce_max(%1) {axes = [2], keepdims = true} : f32[4, 64, 1]\n"
             "  %3 = sub(%1, %2) : f32[4, 64, 64]\n  %4 = exp(%3) : f32[4, 64, 64]\n"
             "  %5 = reduce_sum(%4) {axes = [2], keepdims = true} : f32[4, 64, 1]\n"
             "  %6 = div(%4, %5) : f32[4, 64, 64]\n  %7 = matmul(%6, %v) : f32[4, 64, 16]\n  return %7\n}\n")
ROW_SUM = "func @f(%x: f32[256, 500]) -> (f32[256]) {\n  %0 = reduce_sum(%x) {axes = [1], keepdims = false} : f32[256]\n  return %0\n}\n"


def test_regions_and_traffic_follow_what_the_kernel_runs():
    # a softmax's two reductions run in one fusion group, its elementwise ops inside it: one region
    assert _cost(SOFTMAX).regions == 1
    # an attention: two GEMMs (the transpose read in place) and the softmax's group
    attention = _cost(ATTENTION)
    assert attention.regions == 3
    given_kt = (ATTENTION.replace("%k: f32[4, 64, 16]", "%k: f32[4, 16, 64]")
                .replace("  %0 = transpose(%k) {permutation = [0, 2, 1]} : f32[4, 16, 64]\n", "")
                .replace("matmul(%q, %0)", "matmul(%q, %k)"))
    assert attention == _cost(given_kt)  # no copy of k: as if kᵀ were given
    assert _cost(ATTENTION.replace("[0, 2, 1]", "[1, 0, 2]").replace("f32[4, 16, 64]", "f32[64, 4, 16]")
                 .replace("%k: f32[4, 64, 16]", "%k: f32[64, 4, 16]")).regions == 4  # a real transpose
    # an elementwise op that a reduction's group neither reads nor feeds is a region of its own
    assert _cost(SOFTMAX.replace("return %4", "%5 = exp(%x) : f32[128, 384]\n  %6 = add(%4, %5) : f32[128, 384]\n"
                                 "  return %6")).regions == 1
    assert _cost(SOFTMAX.replace("(f32[128, 384])", "(f32[128, 384], f32[128, 384])", 1)
                 .replace("return %4", "%5 = exp(%x) : f32[128, 384]\n  return %4, %5")).regions == 2
    # a row sum reads its input once and writes its result once, in its one region
    row_sum = _cost(ROW_SUM)
    assert row_sum.bytes == 256 * 500 * 4 + 256 * 4 and row_sum.regions == 1
    # two reductions of unrelated inputs are two regions
    two = ("func @f(%x: f32[64, 32], %y: f32[64, 32]) -> (f32[64], f32[64]) {\n"
           "  %0 = reduce_sum(%x) {axes = [1], keepdims = false} : f32[64]\n"
           "  %1 = reduce_max(%y) {axes = [1], keepdims = false} : f32[64]\n  return %0, %1\n}\n")
    assert _cost(two).regions == 2


def test_the_thread_rule_is_one_function():
    # worth_threads decides by saving_pays, which thread_choice.py also weighs other factors with
    from mind.compiler.backend.cpu.thread_cost import COSTS, KernelCost, one_thread_seconds, saving_pays, worth_threads
    from mind.compiler.backend.cpu.vector_unit import VECTOR_UNITS
    unit = VECTOR_UNITS["x86-64-v4"]
    edge = 2 * COSTS["gain_over_regions"] * 2 * COSTS["region_s"]  # two regions, two threads
    assert saving_pays(edge, 2, 2) and not saving_pays(edge * 0.99, 2, 2)
    assert saving_pays(edge, 2, 2, gain=COSTS["gain_over_regions"] / 2) and not saving_pays(edge, 2, 2, gain=10.0)
    for n in (1 << 10, 1 << 16, 1 << 22):
        cost = KernelCost(8 * n, 8 * n, float(n), 2)
        assert worth_threads(cost, unit, 2) == saving_pays(one_thread_seconds(cost, unit), 2, 2)
