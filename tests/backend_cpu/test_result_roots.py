"""``result_roots.place_result_roots`` and ``payload.untie_shared_inits`` on a split loop
(``transforms._flat_section``): the whole tiles computed in a slice of the result's init and
inserted back where they were taken, the tail written after them.  Hand-written tensor IR, so that
each rule is checked on its own pattern and on the near misses it must leave alone."""

from __future__ import annotations

import pytest

from mind.compiler.backend.linalg.context import Diagnostics, new_context, parse
from mind.compiler.backend.linalg.payload import untie_shared_inits
from mind.compiler.backend.linalg.result_roots import place_result_roots

# {back}: the offset the whole tiles are inserted back at (0 = where they were taken)
_SPLIT = """
func.func @f(%x: tensor<100xf32>, %out: memref<100xf32>) {{
  %c96 = arith.constant 96 : index
  %f0 = arith.constant 0.0 : f32
  %v = arith.constant dense<1.0> : vector<4xf32>
  %e = tensor.empty() : tensor<100xf32>
  %s = tensor.extract_slice %e[0] [96] [1] : tensor<100xf32> to tensor<96xf32>
  %w = scf.forall (%i) in (6) shared_outs(%o = %s) -> (tensor<96xf32>) {{
    %j = affine.apply affine_map<(d0) -> (d0 * 16)>(%i)
    %t = tensor.extract_slice %o[%j] [16] [1] : tensor<96xf32> to tensor<16xf32>
    %r = linalg.fill ins(%f0 : f32) outs(%t : tensor<16xf32>) -> tensor<16xf32>
    scf.forall.in_parallel {{
      tensor.parallel_insert_slice %r into %o[%j] [16] [1] : tensor<16xf32> into tensor<96xf32>
    }}
  }}
  %b = tensor.insert_slice %w into %e[{back}] [96] [1] : tensor<96xf32> into tensor<100xf32>
  %z = vector.transfer_write %v, %b[%c96] {{in_bounds = [true]}} : vector<4xf32>, tensor<100xf32>
  bufferization.materialize_in_destination %z in restrict writable %out : (tensor<100xf32>, memref<100xf32>) -> ()
  return
}}
"""


def _run(back: int, rule) -> tuple[int, str]:
    ctx = new_context()
    diags = Diagnostics(ctx)
    try:
        with ctx:
            module = parse(ctx, _SPLIT.format(back=back), "parse", diags)
            done = rule(module)
            assert module.operation.verify()
            return done, str(module)
    finally:
        diags.detach()


@pytest.mark.parametrize("back,placed", [(0, 1), (4, 0)])
def test_a_split_loops_result_is_rooted_in_its_out_parameter(back, placed):
    """The chain from the result through the tail's ``vector.transfer_write`` and the insertion of
    the whole tiles ends on the ``tensor.empty`` whose other use is the slice the tiles computed in:
    it becomes the out-parameter (no temporary, no copy).  Inserted back elsewhere (offset 4), the
    slice is not the tiles' place in the result, and the root is left alone."""
    done, text = _run(back, place_result_roots)
    assert done == placed
    assert ("tensor.empty" in text) == (not placed)


@pytest.mark.parametrize("back,clones", [(0, 0), (4, 1)])
def test_a_split_loops_init_stays_one_tensor(back, clones):
    """``untie_shared_inits`` gives each user of a shared init its own copy, except a slice that a
    forall computes in and that is inserted back where it was taken (``slice_written_back``): one
    tensor, written once per element.  Inserted elsewhere, the two users are untied."""
    done, text = _run(back, untie_shared_inits)
    assert done == clones
    assert text.count("tensor.empty") == 1 + clones
