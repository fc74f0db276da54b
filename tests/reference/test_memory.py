"""The memory check before a run (E6004 instead of a crash or an internal error; issue 22)."""

from __future__ import annotations

import numpy as np
import pytest

import mind
from mind.cli.main import main
from mind.diagnostics import MindError
from mind.ir.parser import parse_module
from mind.reference import interpreter, memory
from mind.calling import run_reference, select_function

CHAIN = """func @main(%x: f32[N]) -> (f32[]) {
  %0 = exp(%x) : f32[N]
  %1 = mul(%0, %0) : f32[N]
  %2 = reduce_sum(%1) {axes = [0], keepdims = false} : f32[]
  return %2
}
"""
OUTER = "fn main(x: Tensor<f32, [N]>) -> Tensor<f32, []> { sum(reshape(x, [N, 1]) * reshape(x, [1, N])) }\n"
GRAM = "fn main(x: Tensor<f32, [N]>) -> Tensor<f32, []> { sum(matmul(reshape(x, [N, 1]), reshape(x, [1, N]))) }\n"


def _fn(text):
    return select_function(parse_module(text), None)


def test_peak_of_live_values():
    fn = _fn(CHAIN)
    peak, op, n = memory.peak_bytes(fn, {"N": 1000}, lambda op: True)
    assert peak == 8000 and op is fn.ops[0] and n == 4000  # %0 and %1 live together at op 1
    assert memory.peak_bytes(fn, {"N": 1000}, lambda op: False)[0] == 4  # only the result


@pytest.fixture
def little_memory(monkeypatch):
    """A machine with 10 MiB to spare, and every estimate checked."""
    monkeypatch.setattr(memory, "CHECK_FROM", 0)
    monkeypatch.setattr(memory, "available_memory", lambda: memory.Available(10 << 20, "a test"))


def _x(tmp_path, n):
    np.save(tmp_path / "x.npy", np.ones(n, np.float32))
    return f"--input=x={tmp_path / 'x.npy'}"


def _prog(tmp_path, text):
    (tmp_path / "p.mind").write_text(text)
    return str(tmp_path / "p.mind")


@pytest.mark.parametrize("backend", ["reference", "cpu"])
def test_a_huge_intermediate_is_e6004_before_running(tmp_path, capsys, backend):
    """Regression: a 100 GB intermediate was a SIGSEGV on cpu and E7009 on the reference.  Here
    the matmul's result takes 16 TiB, more than any machine the tests run on has."""
    assert main(["run", _prog(tmp_path, GRAM), "--backend", backend, _x(tmp_path, 1 << 21)]) == 1
    err = capsys.readouterr().err
    assert "error[E6004]" in err and "`%2 = matmul`, f32[2097152, 2097152] alone takes 16.0 TiB" in err
    assert "are available (" in err and "p.mind:1:55" in err  # at the matmul


def test_the_reference_counts_every_value(tmp_path, capsys, little_memory):
    assert main(["run", _prog(tmp_path, OUTER), "--backend", "reference", _x(tmp_path, 2000)]) == 1
    assert "error[E6004]" in capsys.readouterr().err


def test_cpu_does_not_refuse_what_it_fuses(tmp_path, capsys, little_memory):
    """The cpu kernel never stores the 16 MB outer product (it is fused into the sum): not refused."""
    assert main(["run", _prog(tmp_path, OUTER), "--backend", "cpu", _x(tmp_path, 2000), "--json"]) == 0
    assert '"values": 4000000.0' in capsys.readouterr().out


def test_cpu_refuses_a_contraction_result(little_memory):
    f = mind.compile(GRAM, backend="cpu")
    with pytest.raises(MindError) as info:
        f(np.ones(2000, np.float32))
    assert info.value.codes == ["E6004"]


def test_a_failed_allocation_in_an_op_is_e6004(monkeypatch):
    def no_memory(*args, **kwargs):
        raise MemoryError()
    monkeypatch.setitem(interpreter.OP_FUNCTIONS, "mul", no_memory)
    with pytest.raises(MindError) as info:
        run_reference(_fn(CHAIN), [np.ones(3, np.float32)])
    assert info.value.codes == ["E6004"] and "allocating it failed" in str(info.value)
    assert "%1 = mul" in str(info.value)


def _fake_files(monkeypatch, files):
    monkeypatch.setattr(memory, "_read", lambda path: files.get(path))


def test_memory_figures(monkeypatch):
    meminfo = "MemTotal:  1000 kB\nMemAvailable:  600 kB\nSwapFree:  100 kB\n"
    _fake_files(monkeypatch, {"/proc/meminfo": meminfo, "/proc/self/cgroup": "0::/a/b\n",
                              "/sys/fs/cgroup/a/b/memory.max": "max\n", "/sys/fs/cgroup/a/b/memory.current": "5\n",
                              "/sys/fs/cgroup/a/memory.max": "300000\n", "/sys/fs/cgroup/a/memory.current": "200000\n",
                              "/sys/fs/cgroup/a/memory.stat": "anon 1\ninactive_file 50000\n"})
    monkeypatch.setattr(memory, "_rlimit_as", lambda: None)
    avail = memory.available_memory()
    assert avail.bytes == 300000 - (200000 - 50000) and "cgroup /sys/fs/cgroup/a" in avail.source
    _fake_files(monkeypatch, {"/proc/meminfo": meminfo})
    assert memory.available_memory() == memory.Available(700 * 1024, "MemAvailable + SwapFree in /proc/meminfo")
    _fake_files(monkeypatch, {})
    assert memory.available_memory() is None  # nothing known: nothing refused


@pytest.mark.parametrize("backend", ["reference", "cpu"])
def test_an_empty_value_numpy_cannot_represent_is_e6004(tmp_path, capsys, backend):
    """Found by fuzzing: f32[0, 2310000000000000000] has no elements, but NumPy refuses its shape
    (E7009 on both backends)."""
    np.save(tmp_path / "x.npy", np.zeros(0, np.float32))
    big = 2310000000000000000
    src = _prog(tmp_path, f"fn main(x: Tensor<f32, [0]>) -> Tensor<f32, [0, {big}]> {{ reshape(x, [0, {big}]) }}\n")
    assert main(["run", src, "--backend", backend, f"--input=x={tmp_path / 'x.npy'}"]) == 1
    assert "error[E6004]" in capsys.readouterr().err
