"""``mind audit``: evidence an auditor can read, check and re-run.

``build_audit(options)`` (``report.py``) reads a program and runs every check: its proof
obligations as SMT-LIB queries answered by Z3 and by cvc5 (``proofs.py``, ``solvers.py``) beside
the IR verifier's own verdicts, the VJP rules its gradients use and the rewrite rules its
canonicalization used, re-checked now (``evidence.py``), its numerics (``numerics.py``), its compiled
code (``compiled.py``), and the conformance cases that cover its spec labels (``traceability.py``).
``write_bundle`` (``bundle.py``) writes the result as one deterministic folder of files described by
a manifest of SHA-256s; ``check_bundle`` re-verifies such a folder independently.

This package reads the compiler, the verifier and the conformance suite, so it is a layer above
them (``docs/architecture.md``); only the CLI imports it.  Nothing here is imported by ``import mind``.
"""
