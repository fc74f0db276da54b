"""Calling convention between numpy and compiled kernels (no MLIR import: the warm path uses it).

The descriptors themselves are ``mind.runtime.memref`` (shared with the runtime of ``mind build``
artifacts); this module adds what only the compiler needs: a kernel's signature read from its MLIR.
"""

from __future__ import annotations

import re

from mind.runtime.memref import (ELEMENT_TYPES, AbiError, ArgBinder, ArgSpec, Signature, check_array, data_pointer,
                                 descriptor_type)

__all__ = ["ArgSpec", "Signature", "ELEMENT_TYPES", "descriptor_type", "ArgBinder", "data_pointer", "AbiError",
           "mlir_signature", "check_array"]


_MLIR_ARG = r"\s*%[A-Za-z0-9_$.-]+\s*:\s*(tensor|memref)<((?:[0-9]+x)*)(f32|f64|i32|i64|i8)>\s*([,)])"


def mlir_signature(mlir_text: str, func_name: str) -> Signature | None:
    """The signature of ``func.func @func_name`` read from its header in ``mlir_text``, without MLIR:
    what a cache hit of a kernel compiled from MLIR text trusts (the text is what its key hashes).
    None for anything but the plain form a kernel has (static tensor inputs, then static identity
    memref outputs, no attributes, no results): such a kernel is compiled, not looked up."""
    m = re.search(r"\bfunc\.func\s+@" + re.escape(func_name) + r"\(", mlir_text)
    if m is None:
        return None
    pos = m.end()
    ins: list[ArgSpec] = []
    outs: list[ArgSpec] = []
    if mlir_text.startswith(")", pos):
        pos += 1
    else:
        while True:
            a = re.compile(_MLIR_ARG).match(mlir_text, pos)  # compiled on first use (re's cache)
            if a is None:
                return None
            kind, dims, elem, sep = a.groups()
            spec = ArgSpec(ELEMENT_TYPES[elem], tuple(int(d) for d in dims.split("x")[:-1]))
            if kind == "tensor":
                if outs:
                    return None
                ins.append(spec)
            else:
                outs.append(spec)
            pos = a.end()
            if sep == ")":
                break
    if re.match(r"\s*\{", mlir_text[pos:pos + 64]) is None:
        return None
    return Signature(func_name, tuple(ins), tuple(outs))
