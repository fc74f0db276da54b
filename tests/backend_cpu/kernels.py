"""Hand-written MLIR kernels used by the CPU engine tests and the measurement script, and the MIND
programs several tests share."""

from __future__ import annotations

from mind.compiler.backend.linalg.mathlib import exp_text, log_text


def matmul(m: int, k: int, n: int, dtype: str = "f32", name: str = "mm") -> str:
    """C = A @ B written into an out-parameter."""
    zero = "0.0" if dtype.startswith("f") else "0"
    a, b, c = f"tensor<{m}x{k}x{dtype}>", f"tensor<{k}x{n}x{dtype}>", f"tensor<{m}x{n}x{dtype}>"
    return f"""
func.func @{name}(%a: {a}, %b: {b}, %out: memref<{m}x{n}x{dtype}>) {{
  %z = arith.constant {zero} : {dtype}
  %e = tensor.empty() : {c}
  %f = linalg.fill ins(%z : {dtype}) outs(%e : {c}) -> {c}
  %r = linalg.matmul ins(%a, %b : {a}, {b}) outs(%f : {c}) -> {c}
  bufferization.materialize_in_destination %r in restrict writable %out : ({c}, memref<{m}x{n}x{dtype}>) -> ()
  return
}}
"""


def batch_matmul(bsz: int, m: int, k: int, n: int, name: str = "bmm") -> str:
    a, b, c = f"tensor<{bsz}x{m}x{k}xf32>", f"tensor<{bsz}x{k}x{n}xf32>", f"tensor<{bsz}x{m}x{n}xf32>"
    return f"""
func.func @{name}(%a: {a}, %b: {b}, %out: memref<{bsz}x{m}x{n}xf32>) {{
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : {c}
  %f = linalg.fill ins(%z : f32) outs(%e : {c}) -> {c}
  %r = linalg.batch_matmul ins(%a, %b : {a}, {b}) outs(%f : {c}) -> {c}
  bufferization.materialize_in_destination %r in restrict writable %out : ({c}, memref<{bsz}x{m}x{n}xf32>) -> ()
  return
}}
"""


def _ids(rank: int) -> str:
    dims = ", ".join(f"d{i}" for i in range(rank))
    return f"affine_map<({dims}) -> ({dims})>"


def unary(shape: tuple[int, ...], body: list[str], result: str, dtype: str = "f32", out_dtype: str | None = None,
          name: str = "ew") -> str:
    """One elementwise linalg.generic: ``%in`` is the element, ``body`` computes ``result``."""
    out_dtype = out_dtype or dtype
    dims = "x".join(str(s) for s in shape)
    t = f"tensor<{dims}x{dtype}>" if shape else f"tensor<{dtype}>"
    to = f"tensor<{dims}x{out_dtype}>" if shape else f"tensor<{out_dtype}>"
    mo = f"memref<{dims}x{out_dtype}>" if shape else f"memref<{out_dtype}>"
    rank = len(shape)
    its = ", ".join(['"parallel"'] * rank)
    lines = "\n".join("      " + ln for ln in body)
    return f"""
func.func @{name}(%x: {t}, %out: {mo}) {{
  %e = tensor.empty() : {to}
  %r = linalg.generic {{indexing_maps = [{_ids(rank)}, {_ids(rank)}], iterator_types = [{its}]}}
      ins(%x : {t}) outs(%e : {to}) {{
    ^bb0(%in: {dtype}, %o: {out_dtype}):
{lines}
      linalg.yield {result} : {out_dtype}
  }} -> {to}
  bufferization.materialize_in_destination %r in restrict writable %out : ({to}, {mo}) -> ()
  return
}}
"""


def exp_kernel(n: int, dtype: str = "f32") -> str:
    lines, res = exp_text("%in", dtype, "e")
    return unary((n,), lines, res, dtype, name="kexp")


def log_kernel(n: int, dtype: str = "f32") -> str:
    lines, res = log_text("%in", dtype, "l")
    return unary((n,), lines, res, dtype, name="klog")


def sigmoid_chain(shape: tuple[int, ...]) -> str:
    """sigmoid(relu(x)*2+1) as four separate generics (fusion must merge them)."""
    dims = "x".join(str(s) for s in shape)
    t = f"tensor<{dims}xf32>"
    rank = len(shape)
    its = ", ".join(['"parallel"'] * rank)
    m = _ids(rank)
    neg_lines, neg = exp_text("%nz", "f32", "s")
    exp_body = "\n".join("      " + ln for ln in neg_lines)

    def gen(src: str, dst: str, body: str, res: str) -> str:
        return f"""  %{dst}e = tensor.empty() : {t}
  %{dst} = linalg.generic {{indexing_maps = [{m}, {m}], iterator_types = [{its}]}}
      ins(%{src} : {t}) outs(%{dst}e : {t}) {{
    ^bb0(%in: f32, %o: f32):
{body}
      linalg.yield {res} : f32
  }} -> {t}
"""
    relu = gen("x", "r1", "      %c0 = arith.constant 0.0 : f32\n      %v = arith.maximumf %in, %c0 : f32", "%v")
    mul = gen("r1", "r2", "      %c2 = arith.constant 2.0 : f32\n      %v = arith.mulf %in, %c2 : f32", "%v")
    add = gen("r2", "r3", "      %c1 = arith.constant 1.0 : f32\n      %v = arith.addf %in, %c1 : f32", "%v")
    sig_body = ("      %one = arith.constant 1.0 : f32\n      %nz = arith.negf %in : f32\n" + exp_body
                + f"\n      %den = arith.addf %one, {neg} : f32\n      %v = arith.divf %one, %den : f32")
    sig = gen("r3", "r4", sig_body, "%v")
    return f"""
func.func @chain(%x: {t}, %out: memref<{dims}xf32>) {{
{relu}{mul}{add}{sig}  bufferization.materialize_in_destination %r4 in restrict writable %out : ({t}, memref<{dims}xf32>) -> ()
  return
}}
"""


TRAIN_STEP = """fn loss(x: Tensor<f32, [64, 96]>, y: Tensor<f32, [64, 10]>, w1: Tensor<f32, [96, 80]>, w2: Tensor<f32, [80, 10]>) -> f32 {
  mean(-sum(y * log_softmax(matmul(relu(matmul(x, w1)), w2), axis=-1), axes=[1], keepdims=false), axes=[0], keepdims=false)
}
fn step(x: Tensor<f32, [64, 96]>, y: Tensor<f32, [64, 10]>, w1: Tensor<f32, [96, 80]>, w2: Tensor<f32, [80, 10]>)
    -> (f32, Tensor<f32, [96, 80]>, Tensor<f32, [80, 10]>) {
  let l = loss(x, y, w1, w2);
  let (g1, g2) = grad(l, wrt=[w1, w2]);
  (l, g1, g2)
}"""
"""A small MLP train step (``step``): its two-thread kernel is large enough to compile in two parts
(``llvm_split``)."""
