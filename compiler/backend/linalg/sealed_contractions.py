"""Named contractions sealed off from elementwise fusion: each is moved into a private function of
its own and called while ``prefusion`` runs, then moved back.

Why: ``linalg-fuse-elementwise-ops`` folds a reshape into the op on its other side by expanding
that op's loops, named ops included, which makes a named contraction a ``linalg.generic``.  A
matmul whose operand is a flattened batch (``matmul(reshape(x, [B * S, D]), w)``) or whose result
is unflattened or split into heads (``reshape(matmul(x, w), [B, S, H, D / H])``) then left the
target's GEMM for a generic contraction: 0.02-0.08x torch eager's speed
(``docs/backend-cpu.md``, Schedules, "Contractions sealed from fusion").  A named op is the emitter's
decision to keep a contraction whole (``lowerings._named_matmul``); no fusion into it is meant, and
a call is opaque to fusion, so the reshapes stay views around it.  Target-neutral: the CPU and
CUDA lowerings seal right before ``prefusion`` and unseal right after.  MLIR is imported inside
functions only.
"""

from __future__ import annotations

from typing import Any

from .payload import NAMED_CONTRACTIONS

__all__ = ["seal_contractions", "unseal_contractions"]

_PREFIX = "__mind_sealed_"


def seal_contractions(module: Any, func_name: str) -> int:
    """Move every named contraction of ``@func_name`` into a private ``func.func`` of its own (its
    operands the function's arguments, its result the return value), called where it was.  Returns
    how many were sealed; ``unseal_contractions`` undoes it."""
    from mlir import ir

    from .context import find_func
    entry = find_func(module, func_name)
    ops = [op for op in entry.regions[0].blocks[0].operations if op.operation.name in NAMED_CONTRACTIONS]
    for n, op in enumerate(ops):
        op = op.operation
        operands = list(op.operands)
        result = op.results[0]
        name = f"{_PREFIX}{n}"
        with ir.InsertionPoint(op):
            call = ir.Operation.create("func.call", results=[result.type], operands=operands,
                                       attributes={"callee": ir.FlatSymbolRefAttr.get(name)})
        result.replace_all_uses_with(call.results[0])
        signature = ir.FunctionType.get([v.type for v in operands], [result.type])
        with ir.InsertionPoint(module.body):
            func = ir.Operation.create("func.func", regions=1, attributes={
                "sym_name": ir.StringAttr.get(name), "function_type": ir.TypeAttr.get(signature),
                "sym_visibility": ir.StringAttr.get("private")})
        block = func.regions[0].blocks.append(*[v.type for v in operands])
        with ir.InsertionPoint(block):
            ret = ir.Operation.create("func.return", operands=[result])
        op.move_before(ret)
        for i, arg in enumerate(block.arguments):
            op.operands[i] = arg
    return len(ops)


def unseal_contractions(module: Any, func_name: str) -> int:
    """Move each sealed contraction back in place of its call (on the call's operands, which
    passes may have replaced by equal values) and erase the private functions.  Returns how many."""
    from mlir import ir

    from .context import find_func
    entry = find_func(module, func_name)
    sealed = {ir.StringAttr(op.attributes["sym_name"]).value: op for op in module.body.operations
              if op.operation.name == "func.func"
              and ir.StringAttr(op.attributes["sym_name"]).value.startswith(_PREFIX)}
    calls = [op.operation for op in entry.regions[0].blocks[0].operations if op.operation.name == "func.call"
             and ir.FlatSymbolRefAttr(op.attributes["callee"]).value in sealed]
    for call in calls:
        func = sealed.pop(ir.FlatSymbolRefAttr(call.attributes["callee"]).value)
        op = func.regions[0].blocks[0].operations[0].operation
        op.move_before(call)
        for i, value in enumerate(call.operands):
            op.operands[i] = value
        call.results[0].replace_all_uses_with(op.results[0])
        call.erase()
        func.operation.erase()
    for func in sealed.values():  # a call that a pass removed (its result unused)
        func.operation.erase()
    return len(calls)
