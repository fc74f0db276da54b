"""``mind.checkout.use_checkout``: the repository imported without an install, as on the GPU machine."""

from __future__ import annotations

import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

_CHILD = """
import sys
sys.path.insert(0, sys.argv[1])
try:
    import mind.spec
except ImportError:
    print("not importable without it")
from mind.checkout import use_checkout
use_checkout(sys.argv[1])
import mind.runtime, mind.spec.errors
print(mind.spec.errors.__file__)
"""


def test_a_plain_copy_imports_the_subpackages_from_their_folders():
    # -S: no site-packages, so no install's mapping of mind.spec to spec/ (numpy is not needed here)
    r = subprocess.run([sys.executable, "-S", "-c", _CHILD, ROOT], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.split()
    assert lines[:4] == ["not", "importable", "without", "it"]
    assert lines[-1] == os.path.join(ROOT, "spec", "errors.py")
