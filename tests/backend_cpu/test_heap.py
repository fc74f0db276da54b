"""The kernels' heap cache (``mind.runtime.heap``, ``runtime.link_heap``): a kernel's large
intermediates come back from the blocks its earlier calls freed, results stay right when threads
call one kernel at once, the cache stays within its bound over many calls of changing shapes, and
it is given back when memory is short (E6004) or when nobody attached the kernel."""

from __future__ import annotations

import ctypes
import re
import threading

import numpy as np
import pytest

import mind
from mind.diagnostics import MindError
from mind.compiler.backend.cpu import kernel_library, runtime
from mind.reference import memory
from mind.runtime import heap

# a transpose that a reduction reads is an intermediate of 4 * 256 * n bytes (n = 512: 512 KiB,
# above heap.MIN_BLOCK), freed at the end of each call
SOURCE = """fn f(x: Tensor<f32, [n, 256]>) -> Tensor<f32, [256, n]> {
  let t = transpose(x, perm=[1, 0]);
  t * 2.0 + sum(t, axes=[0], keepdims=true)
}"""


def expected(x: np.ndarray) -> np.ndarray:
    t = x.T.astype(np.float64)
    return (t * 2.0 + t.sum(axis=0, keepdims=True)).astype(np.float32)


def check(got: np.ndarray, x: np.ndarray) -> None:
    np.testing.assert_allclose(got, expected(x), rtol=1e-4, atol=1e-3)


class Compiled:
    """``SOURCE`` compiled for the cpu backend, called with one array; ``kernels``: its kernels
    by shape."""

    def __init__(self) -> None:
        from mind.compiler.backend.cpu.api import compile_function
        self.fn = mind._function_of(SOURCE, "f")
        self.runner = compile_function(self.fn, threads=1)

    def __call__(self, x: np.ndarray) -> np.ndarray:
        return self.runner([x])[0]

    def kernel(self, n: int):
        return self.runner.kernel({"n": n})


@pytest.fixture
def f():
    return Compiled()


def test_link_heap_routes_every_allocation_through_the_cache():
    ir = ("declare ptr @malloc(i64)\ndeclare void @free(ptr)\nattributes #3 = { nounwind }\n"
          "define void @k() {\n  %p = call ptr @malloc(i64 1048576)\n  call void @free(ptr %p)\n  ret void\n}\n")
    linked = runtime.link_heap(ir)
    kernel = linked.split("define void @k()")[1].split("}")[0]
    assert "call noalias ptr @__mind_alloc(i64 1048576)" in kernel and "call void @__mind_free(ptr %p)" in kernel
    assert "@malloc(" not in kernel and "@free(" not in kernel
    # declared only, hidden: the prebuilt heap object defines them and is linked with the kernel
    assert "declare hidden noalias ptr @__mind_alloc(i64) nounwind" in linked
    assert "declare hidden void @__mind_free(ptr) nounwind" in linked
    assert "define" not in linked.split("define void @k()")[1] and heap.SYMBOL + " =" not in linked
    assert kernel_library.objects_for(linked, None, None) == ["heap"]
    assert kernel_library.objects_for(ir, None, None) == []


def test_heap_object_defines_the_cache_and_exports_its_structure():
    """The heap object (``runtime.heap_module``) defines what kernels call and exports the
    structure pointer and drain function the runtime attaches; alloc and free stay hidden."""
    text = runtime.heap_module()
    assert f"@{heap.SYMBOL} = global ptr null, align 8" in text
    assert "define hidden ptr @__mind_alloc(i64 %n)" in text and "define hidden void @__mind_free(ptr %q)" in text
    assert f"define void @{heap.DRAIN_SYMBOL}(ptr %h)" in text
    assert "attributes #0 = { noinline nounwind }" in text
    assert kernel_library.OBJECTS["heap"].defines() == frozenset(runtime.HEAP_SYMBOLS)


def test_link_heap_leaves_a_module_without_allocations():
    assert runtime.link_heap("define void @k() {\n  ret void\n}\n") == "define void @k() {\n  ret void\n}\n"


def test_a_second_call_reuses_the_blocks_the_first_freed(f):
    heap.release()
    x = np.random.default_rng(0).standard_normal((512, 256), dtype=np.float32)
    check(f(x), x)
    held = heap.cached_bytes()
    assert held >= 4 * 256 * 512  # the transpose's block, kept for the next call
    for _ in range(5):
        check(f(x), x)
    assert heap.cached_bytes() == held  # taken and given back: no new block


def test_many_threads_calling_one_kernel_get_their_own_blocks(f):
    rng = np.random.default_rng(1)
    inputs = [rng.standard_normal((512, 256), dtype=np.float32) for _ in range(8)]
    wrong: list[int] = []
    start = threading.Barrier(len(inputs))

    def work(i: int) -> None:
        x = inputs[i]
        start.wait()
        for _ in range(40):
            got = f(x)
            if not np.allclose(got, expected(x), rtol=1e-4, atol=1e-3):
                wrong.append(i)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(inputs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not wrong
    assert heap.cached_bytes() <= heap.limit()


def _resident_bytes() -> int:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * 4096


@pytest.mark.skipif(not hasattr(ctypes, "CDLL") or not __import__("os").path.exists("/proc/self/statm"),
                    reason="needs /proc")
def test_memory_stays_bounded_over_calls_of_alternating_shapes(f, monkeypatch):
    rng = np.random.default_rng(2)
    xs = [rng.standard_normal((n, 256), dtype=np.float32) for n in (512, 768, 1024)]
    for x in xs:
        check(f(x), x)  # compiled, first blocks cached
    before = _resident_bytes()
    for i in range(1000):
        x = xs[i % len(xs)]
        got = f(x)
        assert heap.cached_bytes() <= heap.limit()
    check(got, x)
    assert _resident_bytes() - before < 16 << 20  # no growth with the calls (the blocks are reused)


def test_a_full_cache_gives_blocks_back_and_stays_within_its_limit(f):
    rng = np.random.default_rng(3)
    xs = [rng.standard_normal((n, 256), dtype=np.float32) for n in (512, 1024, 2048)]
    limit = heap.set_limit(3 << 20)  # room for the 2 MiB block or the 1 MiB and 512 KiB ones, not all
    try:
        for i in range(30):
            x = xs[i % len(xs)]
            check(f(x), x)
            assert 0 < heap.cached_bytes() <= 3 << 20
        heap.set_limit(0)
        assert heap.cached_bytes() == 0
        check(f(xs[0]), xs[0])
        assert heap.cached_bytes() == 0  # nothing kept
    finally:
        heap.set_limit(limit)


def test_a_kernel_nobody_attached_calls_malloc_and_free(f):
    x = np.random.default_rng(4).standard_normal((512, 256), dtype=np.float32)
    check(f(x), x)
    lib = f.kernel(512)._lib
    address = lib.data_address(heap.SYMBOL) if hasattr(lib, "data_address") else \
        ctypes.addressof(ctypes.c_void_p.in_dll(lib, heap.SYMBOL))
    pointer = ctypes.c_void_p.from_address(address)
    assert pointer.value  # attached when it was loaded
    heap.release()
    saved = pointer.value
    pointer.value = None
    try:
        for _ in range(3):
            check(f(x), x)
        assert heap.cached_bytes() == 0  # its blocks went back to free
    finally:
        pointer.value = saved
    check(f(x), x)
    assert heap.cached_bytes() > 0


def test_the_cache_is_given_back_before_a_call_is_refused(f, monkeypatch):
    x = np.random.default_rng(5).standard_normal((512, 256), dtype=np.float32)
    check(f(x), x)
    assert heap.cached_bytes() > 0
    monkeypatch.setattr(memory, "available_memory", lambda: memory.Available(10 << 20, "a test"))
    with pytest.raises(MindError) as e:
        f.kernel(1 << 17)  # 128 MiB a value: checked (and refused) before anything compiles
    assert e.value.diagnostics[0].code == "E6004"
    assert heap.cached_bytes() == 0


def test_kernels_are_byte_identical_with_the_cache():
    from mind.compiler.backend.cpu.api import emit_stage
    source = SOURCE.replace("[n, 256]", "[512, 256]").replace("[256, n]", "[256, 512]")
    ir = emit_stage(mind._function_of(source, "f"), "llvm")
    assert ir == emit_stage(mind._function_of(source, "f"), "llvm")
    assert re.search(r"call noalias ptr @__mind_alloc\(i64 \d+\)", ir)


def test_a_built_artifact_caches_its_intermediates_too(tmp_path):
    import mind.runtime
    from mind.cli.main import main

    src = tmp_path / "t.mind"
    src.write_text(SOURCE)
    assert main(["build", str(src), "--fn", "f", "--shapes", "x=f32[512,256]", "--out", str(tmp_path / "a")]) == 0
    art = mind.runtime.load(str(tmp_path / "a"))
    x = np.random.default_rng(6).standard_normal((512, 256), dtype=np.float32)
    heap.release()
    check(art(x), x)
    held = heap.cached_bytes()
    assert held >= 4 * 256 * 512
    check(art(x), x)
    assert heap.cached_bytes() == held
