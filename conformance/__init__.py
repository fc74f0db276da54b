"""The Core IR conformance suite and its runner: any implementation plugs in and gets a verdict.

``suite/`` holds the versioned cases (``mind.conformance.suite``: manifest, SHA-256s, labels,
profiles); ``generate/`` builds them offline (``tools/gen_conformance.py``); ``run`` asks an
implementation through the subprocess protocol (``protocol``, ``workers``, ``host``), ``verdict`` judges
every answer with the spec's accuracy classes, ``report`` writes results.json, JUnit XML and status
tables, ``submission`` re-checks a submitted result set.  ``adapters/`` plugs in other systems (IREE,
ONNX Runtime, JAX, PyTorch).  ``public_cases`` reads the public MIND spec's YAML cases and judges
what an implementation did with them (``mind conformance run-public``).  The contract is
``docs/conformance.md``; the CLI is ``mind conformance``.
"""
