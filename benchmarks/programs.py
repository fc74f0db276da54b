"""MIND programs that more than one benchmark runs (``suite.py``, ``cuda.py``), as format templates
of their parameter types (``{x}`` ... ``{b2}``, and ``{eps}``)."""

__all__ = ["MLP_TRAIN"]

MLP_TRAIN = """fn loss(x: {x}, y: {y}, w1: {w1}, b1: {b1}, w2: {w2}, b2: {b2}) -> f32 {{
  let hp = matmul(x, w1) + b1;
  let m = mean(hp, axes=[1], keepdims=true);
  let d = hp - m;
  let h = relu(d / sqrt(mean(d * d, axes=[1], keepdims=true) + {eps}));
  let logits = matmul(h, w2) + b2;
  mean(-sum(y * log_softmax(logits, axis=-1), axes=[1], keepdims=false), axes=[0], keepdims=false)
}}
fn train_step(x: {x}, y: {y}, w1: {w1}, b1: {b1}, w2: {w2}, b2: {b2}) -> (f32, {w1}, {b1}, {w2}, {b2}) {{
  let l = loss(x, y, w1, b1, w2, b2);
  let (g1, gb1, g2, gb2) = grad(l, wrt=[w1, b1, w2, b2]);
  (l, w1 - 0.01 * g1, b1 - 0.01 * gb1, w2 - 0.01 * g2, b2 - 0.01 * gb2)
}}"""
"""A train step of an MLP with a layer norm and a softmax cross-entropy: the loss, and each parameter
moved against its gradient (``grad``, reverse mode at compile time)."""
