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

A chain's reshapes may end in another shape than they began: an elementwise op with a per-row
operand (``x - m``, m of [R, 1]) runs over [R, 1, C], the frontend's view of x, and its result is
collapsed to [R, C].  Its root is then the out-parameter seen through the chain's reshapes undone
(``_undo``), a view of the same buffer: without it, each call allocated a temporary of the result's
size and copied it out, and such an op ran at half the speed of ``x - v`` with v of [C]
(``docs/backend-cpu.md``, Measurements: results through reshapes).
"""

from __future__ import annotations

from typing import Any

from .payload import ops_named, slice_written_back, static_shape, tied_out

__all__ = ["place_result_roots"]


_RESHAPES = ("tensor.expand_shape", "tensor.collapse_shape")
_WRITES_INTO = ("tensor.insert_slice", "vector.transfer_write")
"""Ops that write their first operand into a part of their second (the destination, a chain's link):
a box inserted, or a split loop's tail (``transforms._flat_section``) written as one vector."""


def _chain_root(value: Any) -> tuple[Any, list[Any]] | None:
    """The ``tensor.empty`` that ``value`` is built on through the destinations of
    ``tensor.insert_slice`` and ``vector.transfer_write`` (``_WRITES_INTO``), reshapes
    (``tensor.expand_shape``/``collapse_shape``) and ``scf.forall`` results (their tied
    ``shared_outs``), if the chain holds its one use (or the root's other use is a slice that a
    forall computes in and the chain inserts back, ``payload.slice_written_back``: a split loop's
    whole tiles), and each write's destination is otherwise read only by ``tensor.extract_slice``
    (the inits of the boxes inserted next), with the chain's reshapes from ``value``'s end to the
    root's; else None."""
    from mlir import ir
    reshapes: list[Any] = []
    while isinstance(value, ir.OpResult):
        owner = value.owner
        if owner.name == "tensor.empty":
            users = [u.owner for u in value.uses]
            alone = len(users) == 1 or slice_written_back(value, users)
            return (owner, reshapes) if len(owner.operands) == 0 and alone else None
        if owner.name in _RESHAPES or owner.name == "scf.forall":
            if owner.name in _RESHAPES:
                reshapes.append(owner)
            value = owner.operands[0] if owner.name in _RESHAPES else tied_out(owner, value)
            if value is None or len(list(value.uses)) != 1:
                return None
            continue
        if owner.name not in _WRITES_INTO:
            return None
        value = owner.operands[1]
        links = [u for u in value.uses if u.owner.name in _WRITES_INTO and u.operand_number == 1]
        others = [u for u in value.uses if u.owner.name != "tensor.extract_slice"]
        if len(links) != 1 or len(others) != 1:
            return None
    return None


def _same_shape(tensor_type: Any, memref_type: Any) -> bool:
    """Whether a value of ``tensor_type`` can be the out-parameter of ``memref_type``."""
    from mlir import ir
    shape = static_shape(tensor_type)
    return shape is not None and shape == static_shape(memref_type) and \
        ir.ShapedType(tensor_type).element_type == ir.ShapedType(memref_type).element_type


_UNDONE_BY = {"tensor.collapse_shape": "tensor.expand_shape", "tensor.expand_shape": "tensor.collapse_shape"}
"""The reshape that takes a reshape's result back to its operand's shape, with its reassociation."""


def _undo(value: Any, reshapes: list[Any], before: Any) -> Any:
    """``value`` (of the chain's end type) taken back through ``reshapes`` (from that end to the
    root, each of a static source shape) to the root's type, each undone by ``_UNDONE_BY`` right
    before the op ``before``."""
    from mlir import ir
    for reshape in reshapes:
        source = reshape.operands[0].type
        name = _UNDONE_BY[reshape.name]
        attributes = {"reassociation": reshape.attributes["reassociation"]}
        if name == "tensor.expand_shape":
            attributes["static_output_shape"] = ir.DenseI64ArrayAttr.get(static_shape(source))
        value = ir.Operation.create(name, results=[source], operands=[value], attributes=attributes,
                                    loc=reshape.location, ip=ir.InsertionPoint(before)).results[0]
    return value


def place_result_roots(module: Any) -> int:
    """For each ``materialize_in_destination`` into a ``restrict writable`` out-parameter whose
    source is a chain of ``tensor.insert_slice`` on a ``tensor.empty`` (``_chain_root``), that
    ``tensor.empty`` becomes ``to_tensor`` of the out-parameter (what ``eliminate-empty-tensors``
    would make it, earlier), seen through the chain's reshapes undone (``_undo``) where they change
    its shape.  Returns how many were placed."""
    from mlir import ir
    placed = 0
    for op in ops_named(module, "bufferization.materialize_in_destination"):
        if "restrict" not in op.attributes or "writable" not in op.attributes:
            continue
        source, dest = op.operands[0], op.operands[1]
        chain = _chain_root(source)
        if chain is None or not isinstance(dest.type, ir.MemRefType) or not _same_shape(source.type, dest.type):
            continue
        root, reshapes = chain
        if any(static_shape(r.operands[0].type) is None for r in reshapes):
            continue
        with root.location:
            tensor = ir.Operation.create(
                "bufferization.to_tensor", results=[source.type], operands=[dest],
                attributes={"restrict": ir.UnitAttr.get(), "writable": ir.UnitAttr.get()},
                ip=ir.InsertionPoint(root)).results[0]
            root.results[0].replace_all_uses_with(_undo(tensor, reshapes, root))
        root.erase()
        placed += 1
    return placed
