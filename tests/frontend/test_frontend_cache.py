"""The frontend's caches (``compiler/frontend/cache.py``): a disk hit gives back the same module
without running (or importing) the frontend's passes; anything that could make an entry stale
misses; failures are never cached."""

from __future__ import annotations

import glob
import os
import pathlib
import subprocess
import sys
import textwrap

import pytest

from mind.compiler.frontend import cache as fcache
from mind.compiler.frontend.api import compile_source
from mind.diagnostics import MindError

ROOT = pathlib.Path(__file__).resolve().parents[2]
SOURCE = "fn f(x: Tensor<f32, [B, 4]>) -> Tensor<f32, [B, 4]> { relu(x) * 2.0 + 1.0 }"


@pytest.fixture
def disk_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("MIND_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("MIND_FRONTEND_CACHE", raising=False)
    fcache.clear()
    yield tmp_path
    fcache.clear()


def _entries(root) -> list[str]:
    return sorted(glob.glob(os.path.join(str(root), "frontend", "*", "*.pickle")))


@pytest.mark.parametrize("path", sorted(str(p) for p in (ROOT / "examples").rglob("*.mind")))
def test_a_disk_hit_is_the_module_the_frontend_makes(disk_cache, path):
    text = pathlib.Path(path).read_text()
    first = fcache.compile_cached(text, path)
    assert len(_entries(disk_cache)) == 1
    fcache.clear()  # forget the in-memory entry: the next call reads the file
    again = fcache.compile_cached(text, path)
    assert again is not first
    assert again.text() == compile_source(text, path).text()
    assert [f.name for f in again.functions] == [f.name for f in first.functions]


_HIT = textwrap.dedent("""
    import sys
    from mind.compiler.frontend.cache import compile_cached
    m = compile_cached({src!r}, "<t>")
    print(m.sha256(), "mind.compiler.passes" in sys.modules, "mind.compiler.autodiff" in sys.modules)
""")


def test_a_new_process_hits_without_importing_the_passes(disk_cache):
    env = dict(os.environ, MIND_CACHE_DIR=str(disk_cache))
    runs = [subprocess.run([sys.executable, "-c", _HIT.format(src=SOURCE)], env=env, capture_output=True,
                           text=True, timeout=120) for _ in range(2)]
    assert all(r.returncode == 0 for r in runs), runs[0].stderr + runs[1].stderr
    cold, warm = (r.stdout.split() for r in runs)
    assert cold[0] == warm[0] == compile_source(SOURCE, "<t>").sha256()
    assert cold[1:] == ["True", "False"] and warm[1:] == ["False", "False"]


def test_a_different_name_text_or_frontend_misses(disk_cache, monkeypatch):
    fcache.compile_cached(SOURCE, "<a>")
    fcache.compile_cached(SOURCE, "<b>")  # spans and diagnostics name the file
    fcache.compile_cached(SOURCE + " ", "<a>")
    assert len(_entries(disk_cache)) == 3
    fcache.clear()
    monkeypatch.setattr(fcache, "_FINGERPRINT", ["edited frontend"])
    fcache.compile_cached(SOURCE, "<a>")
    assert len(_entries(disk_cache)) == 4


def test_failures_are_not_cached(disk_cache):
    bad = "fn f(x: Tensor<f32, [2]>) -> Tensor<f32, [3]> { x }"
    for _ in range(2):
        with pytest.raises(MindError):
            fcache.compile_cached(bad, "<bad>")
    assert _entries(disk_cache) == []


def test_a_damaged_entry_is_recompiled_and_replaced(disk_cache):
    good = fcache.compile_cached(SOURCE, "<t>")
    (entry,) = _entries(disk_cache)
    for junk in (b"", b"not a pickle", __import__("pickle").dumps({"not": "a module"})):
        pathlib.Path(entry).write_bytes(junk)
        fcache.clear()
        assert fcache.compile_cached(SOURCE, "<t>").text() == good.text()
        assert pathlib.Path(entry).read_bytes() != junk


def test_the_disk_layer_can_be_turned_off(disk_cache, monkeypatch):
    monkeypatch.setenv("MIND_FRONTEND_CACHE", "0")
    fcache.compile_cached(SOURCE, "<t>")
    assert _entries(disk_cache) == []
    assert fcache.compile_cached(SOURCE, "<u>", disk=False) is not None
    assert _entries(disk_cache) == []


def test_sources_fingerprint_follows_edits_additions_and_only_python_files(tmp_path):
    from mind.disk import sources_fingerprint
    (tmp_path / "a.py").write_text("x = 1\n")
    folders = [("pkg", str(tmp_path))]
    base = sources_fingerprint(folders)
    assert sources_fingerprint(folders) == base
    (tmp_path / "notes.txt").write_text("not code")
    assert sources_fingerprint(folders) == base
    (tmp_path / "a.py").write_text("x = 22\n")  # size and time change
    edited = sources_fingerprint(folders)
    assert edited != base
    st = os.stat(tmp_path / "a.py")
    os.utime(tmp_path / "a.py", ns=(st.st_atime_ns, st.st_mtime_ns + 1))  # same size, newer
    touched = sources_fingerprint(folders)
    assert touched != edited
    (tmp_path / "b.py").write_text("")
    assert sources_fingerprint(folders) != touched
    assert sources_fingerprint([("pkg", str(tmp_path / "missing"))]) == sources_fingerprint([])


@pytest.mark.parametrize("value", ["off", "yes", "2"])
def test_a_misspelt_switch_is_a_diagnostic(disk_cache, monkeypatch, value):
    monkeypatch.setenv("MIND_FRONTEND_CACHE", value)
    with pytest.raises(MindError) as info:
        fcache.compile_cached(SOURCE, "<t>")
    d = info.value.diagnostics[0]
    assert d.code == "E7002" and "MIND_FRONTEND_CACHE" in d.message and d.help
    assert _entries(disk_cache) == []
