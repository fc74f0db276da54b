"""Put a result that is built up by slices (a pad's border boxes and window) in its out-parameter
before bufferization, so that no slice of it is written into a temporary and copied.

Why MLIR's ``eliminate-empty-tensors`` does not do it alone: it visits the subset insertions in
program order and, for each, replaces only the uses of a ``tensor.empty`` that lie on the inserted
value's chain.  A pad (``Emitter.pad``) inserts its first box into the result's ``tensor.empty``
and ends in ``materialize_in_destination`` into the out-parameter.  The first insertion is visited
first: the box's own ``tensor.empty`` becomes an ``extract_slice`` of the result's.  The
materialization, visited last, then moves the chain's use of that ``tensor.empty`` to the
out-parameter, but not the new ``extract_slice``'s, so the box was filled into a temporary
the size of the whole result (allocated on every call) and copied out.  Putting the chain's root
in the out-parameter first makes the box's slice one of the out-parameter too.

The same holds for an elementwise op that the schedule flattened (``transforms._flat_section``):
its result is its forall's, on a ``collapse_shape`` of its ``tensor.empty``, expanded back;
``eliminate-empty-tensors`` does not look through the reshapes, so the op wrote a temporary, copied
into the out-parameter.  The chain walks through reshapes and forall results too.
"""

from __future__ import annotations

from typing import Any

from .payload import ops_named, static_shape

__all__ = ["place_result_roots"]


_RESHAPES = ("tensor.expand_shape", "tensor.collapse_shape")


def _tied_out(forall: Any, result: Any) -> Any | None:
    """The ``shared_outs`` operand of ``forall`` tied to its ``result`` (the operands end with them)."""
    outs = list(forall.operands)[len(forall.operands) - len(forall.results):]
    return outs[result.result_number] if len(outs) == len(forall.results) else None


def _chain_root(value: Any) -> Any | None:
    """The ``tensor.empty`` that ``value`` is built on through ``tensor.insert_slice`` destinations,
    reshapes (``tensor.expand_shape``/``collapse_shape``) and ``scf.forall`` results (their tied
    ``shared_outs``), if the chain holds its one use, and each insertion's destination is otherwise
    read only by ``tensor.extract_slice`` (the inits of the boxes inserted next); else None."""
    from mlir import ir
    while isinstance(value, ir.OpResult):
        owner = value.owner
        if owner.name == "tensor.empty":
            return owner if len(owner.operands) == 0 and len(list(value.uses)) == 1 else None
        if owner.name in _RESHAPES or owner.name == "scf.forall":
            value = owner.operands[0] if owner.name in _RESHAPES else _tied_out(owner, value)
            if value is None or len(list(value.uses)) != 1:
                return None
            continue
        if owner.name != "tensor.insert_slice":
            return None
        value = owner.operands[1]
        links = [u for u in value.uses if u.owner.name == "tensor.insert_slice" and u.operand_number == 1]
        others = [u for u in value.uses if u.owner.name != "tensor.extract_slice"]
        if len(links) != 1 or len(others) != 1:
            return None
    return None


def _same_shape(tensor_type: Any, memref_type: Any) -> bool:
    """Whether a root of ``tensor_type`` can be the out-parameter of ``memref_type``."""
    from mlir import ir
    shape = static_shape(tensor_type)
    return shape is not None and shape == static_shape(memref_type) and \
        ir.ShapedType(tensor_type).element_type == ir.ShapedType(memref_type).element_type


def place_result_roots(module: Any) -> int:
    """For each ``materialize_in_destination`` into a ``restrict writable`` out-parameter whose
    source is a chain of ``tensor.insert_slice`` on a ``tensor.empty`` (``_chain_root``), that
    ``tensor.empty`` becomes ``to_tensor`` of the out-parameter (what ``eliminate-empty-tensors``
    would make it, earlier).  Returns how many were placed."""
    from mlir import ir
    placed = 0
    for op in ops_named(module, "bufferization.materialize_in_destination"):
        if "restrict" not in op.attributes or "writable" not in op.attributes:
            continue
        source, dest = op.operands[0], op.operands[1]
        root = _chain_root(source)
        if root is None or not isinstance(dest.type, ir.MemRefType) or not _same_shape(root.results[0].type, dest.type):
            continue  # (a reshape on the chain may have changed the shape: that root is not the result's)
        with root.location:
            tensor = ir.Operation.create(
                "bufferization.to_tensor", results=[root.results[0].type], operands=[dest],
                attributes={"restrict": ir.UnitAttr.get(), "writable": ir.UnitAttr.get()},
                ip=ir.InsertionPoint(root))
        root.results[0].replace_all_uses_with(tensor.results[0])
        root.erase()
        placed += 1
    return placed
