"""Keep a reduction's masked tail in registers: forward its accumulator through the tensor it was
written to, as selects.

A reduction tiled with ``tile_reduction_using_for`` and peeled (``fusion_groups``, ``transforms``:
rows that no tile width divides) ends its row with a masked step on the first lanes of the
accumulator.  MLIR writes that step as tensor traffic: the loop's accumulator vector ``v`` is
written whole into a small tensor, the tail reads the slice of its live lanes with a mask, combines
them with the row's last elements, writes them back with the mask and inserts them into the tensor,
which the row's combination reads whole.  Bufferized, that tensor is a stack buffer: a full store,
a masked load, a masked store, a full load.  The last load cannot be forwarded from a masked
store, and stalled: a fifth of a 46x208x100 f64 row max's time on one load.  Both reads equal
selects of the vectors involved, exactly:

* a masked read of a zero-offset slice of ``transfer_write v`` (whole, unmasked) is
  ``select(mask, v, padding)``;
* a whole read of ``insert_slice(transfer_write u masked, into: that tensor)`` (the write into a
  zero-offset slice of it) is ``select(mask, u, v)``: the mask of an in-bounds write is false
  beyond the slice, and where it is false the slice keeps ``v``.

Once both are forwarded the tensor, its slices and the writes have no readers and are dropped, and
the tail stays in registers.  Run on the scheduled payload, before bufferization.  MLIR is imported
inside the function only.
"""

from __future__ import annotations

from typing import Any

from .payload import constant_index, defined_by, ops_named

__all__ = ["forward_masked_tails"]


def _parts(op: Any) -> tuple[Any, list[Any], Any, Any]:
    """A transfer's (tensor, indices, vector-or-padding, mask or None): a read's operands are
    (source, indices, padding[, mask]); a write's (vector, dest, indices[, mask])."""
    ops = list(op.operands)
    if op.name == "vector.transfer_read":
        rank = len(ops[0].type.shape)
        return ops[0], ops[1:1 + rank], ops[1 + rank], (ops[2 + rank] if len(ops) > 2 + rank else None)
    rank = len(ops[1].type.shape)
    return ops[1], ops[2:2 + rank], ops[0], (ops[2 + rank] if len(ops) > 2 + rank else None)


def _plain(op: Any) -> bool:
    """A transfer at zero indices, in bounds, with the identity permutation."""
    from mlir import ir
    tensor, indices, _, _ = _parts(op)
    perm = ir.AffineMapAttr(op.attributes["permutation_map"]).value
    in_bounds = [ir.BoolAttr(b).value for b in ir.ArrayAttr(op.attributes["in_bounds"])]
    return all(constant_index(i) == 0 for i in indices) and all(in_bounds) and \
        perm == ir.AffineMap.get_identity(len(tensor.type.shape))


def _zero_offset_slice(op: Any) -> bool:
    """An ``extract_slice``/``insert_slice`` at static zero offsets with unit strides."""
    from mlir import ir
    return all(o == 0 for o in ir.DenseI64ArrayAttr(op.attributes["static_offsets"])) and \
        all(s == 1 for s in ir.DenseI64ArrayAttr(op.attributes["static_strides"])) and \
        len(op.operands) == (1 if op.name == "tensor.extract_slice" else 2)


def _whole_write(v: Any, vector_type: Any) -> Any | None:
    """The vector ``v`` was written from, when ``v`` is a whole unmasked ``transfer_write`` of a
    vector of ``vector_type``."""
    w = defined_by(v, "vector.transfer_write")
    if w is None or not _plain(w):
        return None
    _, _, vector, mask = _parts(w)
    return vector if mask is None and vector.type == vector_type and tuple(vector.type.shape) == \
        tuple(v.type.shape) else None


def forward_masked_tails(module: Any) -> int:
    """Replace the reads described in the module docstring by selects; the number replaced."""
    from mlir import ir
    replaced = 0
    for read in ops_named(module, "vector.transfer_read"):
        if not _plain(read):
            continue
        source, _, padding, mask = _parts(read)
        vtype = read.results[0].type
        with read.location, ir.InsertionPoint(read):
            if mask is not None:
                cut = defined_by(source, "tensor.extract_slice")
                v = _whole_write(cut.operands[0], vtype) if cut is not None and _zero_offset_slice(cut) else None
                if v is None:
                    continue
                pad = ir.Operation.create("vector.broadcast", results=[vtype], operands=[padding]).results[0]
                new = ir.Operation.create("arith.select", results=[vtype], operands=[mask, v, pad]).results[0]
            else:
                insert = defined_by(source, "tensor.insert_slice")
                if insert is None or not _zero_offset_slice(insert):
                    continue
                tail = defined_by(insert.operands[0], "vector.transfer_write")
                v = _whole_write(insert.operands[1], vtype)
                if tail is None or v is None or not _plain(tail):
                    continue
                slot, _, u, tail_mask = _parts(tail)
                cut = defined_by(slot, "tensor.extract_slice")
                if tail_mask is None or u.type != vtype or cut is None or not _zero_offset_slice(cut) or \
                        cut.operands[0] != insert.operands[1] or \
                        cut.attributes["static_sizes"] != insert.attributes["static_sizes"]:
                    continue
                new = ir.Operation.create("arith.select", results=[vtype], operands=[tail_mask, u, v]).results[0]
        read.results[0].replace_all_uses_with(new)
        read.erase()
        replaced += 1
    return replaced
