"""The test session's own hygiene (``tests/conftest.py``): the private kernel cache a run makes is
removed when the run ends, so that runs do not pile folders up in the temporary directory."""

from __future__ import annotations

import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))

_PROBE = """
import os


def test_the_private_cache_is_in_use():
    folder = os.environ["MIND_CACHE_DIR"]
    assert os.path.basename(folder).startswith("mind-test-cache-")
    with open(os.path.join(folder, "probe"), "w") as f:
        f.write("a file the removal must take too")
"""


def test_a_run_removes_its_private_cache(tmp_path):
    temp = tmp_path / "tmp"
    temp.mkdir()
    (tmp_path / "test_probe.py").write_text(_PROBE)
    env = {k: v for k, v in os.environ.items() if k != "MIND_CACHE_DIR"}
    env.update(TMPDIR=str(temp), PYTHONPATH=HERE + os.pathsep + env.get("PYTHONPATH", ""))
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "conftest", "-p", "no:cacheprovider",
                        str(tmp_path / "test_probe.py")], cwd=tmp_path, env=env, capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "1 passed" in r.stdout
    assert not [p for p in os.listdir(temp) if p.startswith("mind-test-cache-")]
