"""Importing MIND from a plain copy of its repository, without an install (the GPU machine's case).

Why: ``mind.spec``, ``mind.compiler``, ``mind.reference``, ``mind.conformance`` and ``mind.verify`` live
in top-level folders of the repository (``spec/`` ...), which an install of the package maps into
``mind``; a copy that was never installed has only ``mind/`` on the path.  The scripts that run there
(``tools/gpu_check.py run``, ``benchmarks/cuda.py run``) call ``use_checkout`` first.
"""

from __future__ import annotations

import os
import sys

__all__ = ["use_checkout"]


def use_checkout(root: str) -> None:
    """Make the repository at ``root`` importable as the ``mind`` package, subpackages included,
    unless an install already maps them."""
    root = os.path.abspath(root)
    if root not in sys.path:
        sys.path.insert(0, root)
    package = sys.modules[__name__.rpartition(".")[0]]  # ``mind``, which imported this module
    try:
        import mind.spec  # noqa: F401 - an install (or an editable one) maps it already
    except ImportError:
        package.__path__.append(root)
