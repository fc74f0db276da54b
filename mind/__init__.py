"""MIND: a formally specified tensor language.

Importing ``mind`` is cheap: MLIR, sympy and z3 are imported only by the parts that need them.
"""

from __future__ import annotations

__version__ = "0.1.0"

__all__ = ["__version__"]
