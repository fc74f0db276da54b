"""``mind/cache_store.py``: where the caches live, and the ``~/.ssh`` rules every folder and file in
them passes (owner, mode, no links, regular files, bounded size)."""

from __future__ import annotations

import os

import pytest

from mind import cache_store
from mind.cache_store import EntryProblem, cache_dir, is_key, open_entry, trusted_folder
from mind.compiler.frontend import cache as fcache
from mind.diagnostics import MindError

OTHER_UID = 65534  # nobody


@pytest.fixture(autouse=True)
def _fresh_checks():
    cache_store.forget_checks()
    fcache.clear()
    yield
    cache_store.forget_checks()
    fcache.clear()


def _refusal(root: str, *parts: str) -> str:
    with pytest.raises(MindError) as info:
        trusted_folder(root, *parts, create=True)
    (d,) = info.value.diagnostics
    assert d.code == "E7010" and d.severity == "error" and d.help and "MIND_CACHE=off" in d.help
    return d.message


def _chown_or_skip(path: str) -> None:
    try:
        os.chown(path, OTHER_UID, -1, follow_symlinks=False)
    except (PermissionError, OSError) as e:
        pytest.skip(f"cannot give a file to uid {OTHER_UID} here ({e}): ownership checks need root")


def test_the_root_follows_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("MIND_CACHE_DIR", str(tmp_path / "explicit"))
    assert cache_dir() == str(tmp_path / "explicit")
    monkeypatch.delenv("MIND_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_dir() == str(tmp_path / "xdg" / "mind")
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/xdg")  # invalid per the XDG spec: ignored
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert cache_dir() == str(tmp_path / "home" / ".cache" / "mind")


def test_folders_are_created_0700_whatever_the_umask(tmp_path):
    old = os.umask(0)
    try:
        root = str(tmp_path / "a" / "b" / "cache")
        assert trusted_folder(root, "frontend", "ab", create=True) == os.path.join(root, "frontend", "ab")
    finally:
        os.umask(old)
    for p in (root, os.path.join(root, "frontend"), os.path.join(root, "frontend", "ab")):
        assert os.stat(p).st_mode & 0o777 == 0o700, p
    old = os.umask(0o277)  # a umask that removes the owner's own write bit: set again
    try:
        cache_store.forget_checks()
        trusted_folder(root, "cd", create=True)
    finally:
        os.umask(old)
    assert os.stat(os.path.join(root, "cd")).st_mode & 0o777 == 0o700


def test_missing_folders_are_not_created_on_read(tmp_path):
    assert trusted_folder(str(tmp_path / "none"), "ab", create=False) is None
    assert not (tmp_path / "none").exists()


@pytest.mark.parametrize("mode,who", [(0o777, "group and others"), (0o770, "group"), (0o702, "others"),
                                      (0o1777, "group and others")])
def test_a_writable_root_or_subfolder_is_refused(tmp_path, mode, who):
    root = tmp_path / "cache"
    root.mkdir(mode=0o700)
    os.chmod(root, mode)
    msg = _refusal(str(root))
    assert f"writable by {who}" in msg and str(root) in msg
    os.chmod(root, 0o700)
    cache_store.forget_checks()
    (root / "frontend").mkdir()
    os.chmod(root / "frontend", mode)
    assert f"writable by {who}" in _refusal(str(root), "frontend", "ab")


def test_a_symlinked_root_or_subfolder_is_refused(tmp_path):
    real = tmp_path / "real"
    real.mkdir(mode=0o700)
    os.symlink(real, tmp_path / "link")
    assert "symbolic link" in _refusal(str(tmp_path / "link"))
    os.symlink(real, tmp_path / "real" / "ab")
    assert "symbolic link" in _refusal(str(real), "ab")


def test_a_file_where_a_folder_belongs_is_refused(tmp_path):
    (tmp_path / "cache").write_text("")
    assert "not a folder" in _refusal(str(tmp_path / "cache"))


def test_a_foreign_root_or_subfolder_is_refused(tmp_path):
    root = tmp_path / "cache"
    root.mkdir(mode=0o700)
    _chown_or_skip(str(root))
    assert f"uid {OTHER_UID}" in _refusal(str(root))
    os.chown(root, os.geteuid(), -1)
    cache_store.forget_checks()
    (root / "ab").mkdir(mode=0o700)
    _chown_or_skip(str(root / "ab"))
    assert "not by you" in _refusal(str(root), "ab")


def test_a_planted_root_is_refused_by_the_frontend_cache(tmp_path, monkeypatch):
    root = tmp_path / "shared"
    root.mkdir()
    os.chmod(root, 0o777)  # what another local user would pre-create
    monkeypatch.setenv("MIND_CACHE_DIR", str(root))
    with pytest.raises(MindError) as info:
        fcache.compile_cached("fn f(x: f32) -> f32 { x }", "<t>")
    assert info.value.codes == ["E7010"]
    assert os.listdir(root) == []


def test_entries_must_be_regular_files_of_ours(tmp_path):
    good = tmp_path / "good"
    good.write_bytes(b"x" * 10)
    os.chmod(good, 0o644)
    fd, data = open_entry(str(good), 100)
    os.close(fd)
    assert data == b"x" * 10
    assert open_entry(str(tmp_path / "absent"), 100) is None
    os.symlink(good, tmp_path / "link")
    os.mkfifo(tmp_path / "fifo")  # must not block
    (tmp_path / "dir").mkdir()
    os.chmod(good, 0o646)
    for name, problem in (("link", "cannot be opened"), ("fifo", "not a regular file"), ("dir", "not a regular"),
                          ("good", "writable by group or others")):
        with pytest.raises(EntryProblem) as info:
            open_entry(str(tmp_path / name), 100)
        assert problem in str(info.value), name
    os.chmod(good, 0o644)
    with pytest.raises(EntryProblem):
        open_entry(str(good), 9)  # over the bound
    _chown_or_skip(str(good))
    with pytest.raises(EntryProblem) as info:
        open_entry(str(good), 100)
    assert "owned by" in str(info.value)


def test_keys_are_64_lowercase_hex_digits():
    assert is_key("0" * 64) and is_key("0123456789abcdef" * 4)
    for bad in ("0" * 63, "0" * 65, "A" * 64, "/" + "0" * 63, "../" + "0" * 61, "0" * 62 + "\n0", None, 7):
        assert not is_key(bad)
