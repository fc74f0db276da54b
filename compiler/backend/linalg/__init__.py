"""The target-neutral middle of the compiled backends: Core IR -> MLIR ``linalg``/``tensor``/``arith``
text, and the parts of scheduling and lowering that do not depend on the target.

``emit`` writes a function as MLIR text through the lowering table of ``lowerings`` (one function per
op of the spec) and the named text helpers of ``mlir_text``, ``emitter`` and ``scalar``; ``mathlib``
writes vectorizable exp/log.  ``payload`` reads a parsed module (static loop ranges, indexing maps,
reductions the vectorizer gets right, the work of an op) and unshares the inits CSE merges;
``transform_script`` writes transform-dialect scripts and ``schedule`` tags the ops a target's planners
schedule; ``pipeline`` declares every pass that can reach MLIR, with validated options; ``context``
holds the shared MLIR context and runs parses and pass pipelines with MLIR's diagnostics captured,
through ``mlir_capi`` (MLIR's C API with the GIL released).  A target (``backend/cpu``, and a GPU's
next) brings its tile choices, its pass pipelines after bufferization, code generation and loading.
Nothing here imports MLIR at import time.
"""
