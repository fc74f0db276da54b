"""The hand-written tiers of the suite, migrated unchanged in meaning (same ids) to the exact encoding.

* ``examples/``: every worked example of every op in ``mind.spec.ops`` (expected values as written
  in the spec);
* ``edge/``: the total-semantics edge cases, with expected values written by hand -- independently of
  the reference -- so that generating them tests the reference;
* ``reference/``: seeded random inputs per op, expected values computed by the reference;
* ``negative/``: one IR text per spec constraint label that violates exactly that label;
* ``errors/``: malformed IR text and bad arguments, with their diagnostic codes.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from mind.conformance.generate.build import error_case as _error_case
from mind.conformance.generate.build import success_case as _success_case
from mind.spec.dtypes import parse_dtype
from mind.spec.ops import OPS

INF, NAN = "inf", "nan"
I32_MIN, I32_MAX = -2**31, 2**31 - 1
I64_MIN, I64_MAX = -2**63, 2**63 - 1


def func(params: str, results: str, body: Sequence[str], ret: str, name: str = "main") -> str:
    lines = [f"func @{name}({params}) -> ({results}) {{"]
    lines += ["  " + b for b in body]
    lines += [f"  return {ret}", "}"]
    return "\n".join(lines) + "\n"


def one_op(op: str, operand_types: Sequence[str], out: str, attrs: str = "") -> str:
    """A function applying ``op`` once to parameters %a, %b, %c of the given types."""
    names = ["a", "b", "c"][: len(operand_types)]
    params = ", ".join(f"%{n}: {t}" for n, t in zip(names, operand_types))
    args = ", ".join(f"%{n}" for n in names)
    attr_text = f" {{{attrs}}}" if attrs else ""
    return func(params, out, [f"%0 = {op}({args}){attr_text} : {out}"], "%0")



def success_case(category: str, name: str, description: str, ir: str, inputs: dict[str, Any],
                 expected: Sequence[Any] | None, *, source: str) -> dict[str, Any]:
    return _success_case(f"{category}/{name}", description, ir, inputs, expected, source=source)


def error_case(category: str, name: str, description: str, ir: str, code: str, label: str | None,
               stage: str, inputs: dict[str, Any] | None = None) -> dict[str, Any]:
    return _error_case(f"{category}/{name}", description, ir, code, label, stage, inputs)


# ---------------------------------------------------------------------------------------------
# 1. spec examples
# ---------------------------------------------------------------------------------------------

def example_cases() -> list[dict[str, Any]]:
    out = []
    for op in OPS.values():
        for k, ex in enumerate(op.examples):
            out.append(success_case("examples", f"{op.name}_{k}", f"spec example of `{op.name}`: {ex.title}",
                                    ex.ir, dict(ex.inputs), list(ex.expected), source="spec-example"))
    return out


# ---------------------------------------------------------------------------------------------
# 2. edge cases, expected values written by hand
# ---------------------------------------------------------------------------------------------

def edge_cases() -> list[dict[str, Any]]:
    E: list[dict[str, Any]] = []

    def add(name: str, desc: str, ir: str, inputs: dict[str, Any], expected: Sequence[Any]) -> None:
        E.append(success_case("edge", name, desc, ir, inputs, expected, source="hand"))

    # --- IEEE specials and signed zeros -------------------------------------------------------
    add("add_f32_specials", "inf + -inf = NaN, (-0) + (-0) = -0, (+0) + (-0) = +0, NaN propagates, overflow to inf",
        one_op("add", ["f32[5]", "f32[5]"], "f32[5]"),
        {"a": [INF, -0.0, 0.0, NAN, 3e38], "b": ["-inf", -0.0, -0.0, 1.0, 3e38]},
        [[NAN, -0.0, 0.0, NAN, INF]])
    add("add_f64_specials", "as add_f32_specials in f64",
        one_op("add", ["f64[5]", "f64[5]"], "f64[5]"),
        {"a": [INF, -0.0, 0.0, NAN, 1e308], "b": ["-inf", -0.0, -0.0, 1.0, 1e308]},
        [[NAN, -0.0, 0.0, NAN, INF]])
    add("sub_f32_specials", "inf - inf = NaN, 0 - 0 = +0, (-0) - 0 = -0, inf - (-inf) = inf",
        one_op("sub", ["f32[4]", "f32[4]"], "f32[4]"),
        {"a": [INF, 0.0, -0.0, INF], "b": [INF, 0.0, 0.0, "-inf"]}, [[NAN, 0.0, -0.0, INF]])
    add("mul_f32_specials", "0 * inf = NaN, the sign of a zero product is the XOR of the signs",
        one_op("mul", ["f32[6]", "f32[6]"], "f32[6]"),
        {"a": [0.0, -0.0, -1.0, INF, NAN, -2.0], "b": [INF, 1.0, 0.0, -2.0, 0.0, -0.0]},
        [[NAN, -0.0, -0.0, "-inf", NAN, 0.0]])
    add("div_f64_specials", "x / ±0 = ±inf with the XOR sign, 0 / 0 = NaN, inf / inf = NaN",
        one_op("div", ["f64[8]", "f64[8]"], "f64[8]"),
        {"a": [1.0, -1.0, 0.0, -0.0, INF, INF, NAN, 1.0], "b": [0.0, 0.0, 0.0, 1.0, INF, -2.0, 1.0, "-inf"]},
        [[INF, "-inf", NAN, -0.0, NAN, "-inf", NAN, -0.0]])
    add("select_ignores_unselected_nan", "select never looks at the unselected value, NaN or not",
        one_op("select", ["bool[4]", "f32[4]", "f32[4]"], "f32[4]"),
        {"a": [True, False, True, False], "b": [NAN, NAN, -0.0, 1.0], "c": [2.0, 3.0, 0.0, INF]},
        [[NAN, 3.0, -0.0, INF]])
    add("select_broadcast_scalar_pred", "a scalar predicate broadcasts",
        one_op("select", ["bool[]", "i32[3]", "i32[]"], "i32[3]"),
        {"a": False, "b": [1, 2, 3], "c": 7}, [[7, 7, 7]])
    ir = func("%a: f64[5], %b: f64[5]", "bool[5], bool[5], bool[5], bool[5], bool[5], bool[5]",
              [f"%{d} = compare(%a, %b) {{direction = {d}}} : bool[5]" for d in ("eq", "ne", "lt", "le", "gt", "ge")],
              "%eq, %ne, %lt, %le, %gt, %ge")
    add("compare_nan_and_signed_zero", "NaN is unordered (only ne is true); -0 == +0",
        ir, {"a": [NAN, NAN, -0.0, INF, 1.0], "b": [NAN, 1.0, 0.0, INF, 2.0]},
        [[False, False, True, True, False], [True, True, False, False, True],
         [False, False, False, False, True], [False, False, True, True, True],
         [False, False, False, False, False], [False, False, True, True, False]])
    add("compare_bool_order", "bools order false < true",
        one_op("compare", ["bool[4]", "bool[4]"], "bool[4]", "direction = lt"),
        {"a": [False, True, False, True], "b": [True, True, False, False]}, [[True, False, False, False]])
    add("compare_int_extremes", "integer comparison at the range ends",
        one_op("compare", ["i64[3]", "i64[3]"], "bool[3]", "direction = gt"),
        {"a": [I64_MAX, I64_MIN, 0], "b": [I64_MIN, I64_MAX, -1]}, [[True, False, True]])

    # --- integer division -----------------------------------------------------------------------
    add("div_i32_total", "truncation toward zero for all sign combinations; x / 0 = 0; INT_MIN / -1 = INT_MIN",
        one_op("div", ["i32[9]", "i32[9]"], "i32[9]"),
        {"a": [7, -7, 7, -7, 5, I32_MIN, I32_MIN, 0, 1], "b": [2, 2, -2, -2, 0, -1, 1, 0, 3]},
        [[3, -3, -3, 3, 0, I32_MIN, I32_MIN, 0, 0]])
    add("div_i64_total", "i64: INT_MIN / -1 = INT_MIN, x / 0 = 0, truncation",
        one_op("div", ["i64[5]", "i64[5]"], "i64[5]"),
        {"a": [I64_MIN, 9, -9, 10, I64_MAX], "b": [-1, 0, 4, -3, -1]}, [[I64_MIN, 0, -2, -3, -I64_MAX]])
    add("div_i32_by_zero_broadcast", "division by a scalar zero gives zeros",
        one_op("div", ["i32[3]", "i32[]"], "i32[3]"), {"a": [I32_MIN, 0, I32_MAX], "b": 0}, [[0, 0, 0]])

    # --- wrapping integer overflow ------------------------------------------------------------
    add("add_i64_wraps", "i64 addition wraps modulo 2^64",
        one_op("add", ["i64[2]", "i64[2]"], "i64[2]"), {"a": [I64_MAX, I64_MIN], "b": [1, -1]},
        [[I64_MIN, I64_MAX]])
    add("sub_i32_wraps", "i32 subtraction wraps modulo 2^32",
        one_op("sub", ["i32[2]", "i32[2]"], "i32[2]"), {"a": [I32_MIN, I32_MAX], "b": [1, -1]},
        [[I32_MAX, I32_MIN]])
    add("mul_i32_wraps", "i32 multiplication wraps: 2^16·2^16 = 0, 46341² = 2147488281 - 2^32",
        one_op("mul", ["i32[4]", "i32[4]"], "i32[4]"),
        {"a": [65536, I32_MAX, I32_MIN, 46341], "b": [65536, 2, -1, 46341]},
        [[0, -2, I32_MIN, -2147479015]])
    add("mul_i64_wraps", "i64 multiplication wraps: 2^32·2^32 = 0, 3·(2^63 - 1) = 2^63 - 3",
        one_op("mul", ["i64[2]", "i64[2]"], "i64[2]"), {"a": [2**32, I64_MAX], "b": [2**32, 3]},
        [[0, 2**63 - 3]])
    add("matmul_i32_wraps", "integer matmul accumulates with wrapping: 2^32 + 1 → 1, "
        "(2^31 - 1)(2^16 + 1) → 2^31 - 2^16 - 1",
        one_op("matmul", ["i32[2, 2]", "i32[2, 1]"], "i32[2, 1]"),
        {"a": [[65536, 1], [I32_MAX, I32_MAX]], "b": [[65536], [1]]}, [[[1], [2147418111]]])
    add("matmul_i64_wraps", "i64 matmul wraps: 2^32·2^32 + 7 → 7",
        one_op("matmul", ["i64[1, 2]", "i64[2, 1]"], "i64[1, 1]"),
        {"a": [[2**32, 1]], "b": [[2**32], [7]]}, [[[7]]])
    add("reduce_sum_i32_wraps", "integer sums wrap: (2^31 - 1) + 1 + 1 → -2^31 + 1",
        one_op("reduce_sum", ["i32[3]"], "i32[]", "axes = [0], keepdims = false"),
        {"a": [I32_MAX, 1, 1]}, [-2147483647])
    add("conv2d_i32_wraps", "integer convolution wraps: 2^16·2^16 + 2^16 → 2^16",
        one_op("conv2d", ["i32[1, 1, 2, 1]", "i32[1, 2, 1, 1]"], "i32[1, 1, 1, 1]",
               "strides = [1, 1], padding = [[0, 0], [0, 0]], lhs_dilation = [1, 1], rhs_dilation = [1, 1]"),
        {"a": [[[[65536], [65536]]]], "b": [[[[65536]], [[1]]]]}, [[[[[65536]]]]])

    # --- exp / log domains ---------------------------------------------------------------------
    add("exp_f32_domain", "exp: ±0 → 1, -inf → +0, +inf → inf, NaN, overflow to inf, underflow to +0 "
        "and into the subnormal range (exp(-100) ≈ 3.72e-44)",
        one_op("exp", ["f32[9]"], "f32[9]"),
        {"a": [0.0, -0.0, "-inf", INF, NAN, 89.0, -200.0, 88.0, -100.0]},
        [[1.0, 1.0, 0.0, INF, NAN, INF, 0.0, 1.6516362549940018e38, 3.720075976020836e-44]])
    add("exp_f64_domain", "exp in f64: overflow above ~709.78, underflow, e and 1/e",
        one_op("exp", ["f64[6]"], "f64[6]"),
        {"a": [709.0, 710.0, -1000.0, 1.0, -1.0, 0.0]},
        [[8.218407461554972e307, INF, 0.0, 2.718281828459045, 0.36787944117144233, 1.0]])
    add("log_f32_domain", "log: ±0 → -inf, x < 0 → NaN, -inf → NaN, inf → inf, NaN, 1 → +0, "
        "the smallest subnormal 2^-149 → -149·ln 2 (not flushed)",
        one_op("log", ["f32[9]"], "f32[9]"),
        {"a": [1.0, 0.0, -0.0, -1.0, "-inf", INF, NAN, 1.401298464324817e-45, 2.718281828459045]},
        [[0.0, "-inf", "-inf", NAN, NAN, INF, NAN, -103.27892990343185, 1.0]])
    add("log_f64_domain", "log in f64 over the whole range, subnormal 2^-1074 → -1074·ln 2",
        one_op("log", ["f64[4]"], "f64[4]"),
        {"a": [0.5, 5e-324, 1e308, 1.0]},
        [[-0.6931471805599453, -744.4400719213812, 709.1962086421661, 0.0]])

    # --- reductions ----------------------------------------------------------------------------
    ir = func("%a: f32[2, 0], %b: i32[2, 0], %c: i64[0], %d: bool[3, 0]", "f32[2], i32[2], i64[], bool[3]",
              ["%0 = reduce_max(%a) {axes = [1], keepdims = false} : f32[2]",
               "%1 = reduce_max(%b) {axes = [1], keepdims = false} : i32[2]",
               "%2 = reduce_max(%c) {axes = [0], keepdims = false} : i64[]",
               "%3 = reduce_max(%d) {axes = [1], keepdims = false} : bool[3]"], "%0, %1, %2, %3")
    add("reduce_max_empty_axis", "the maximum of no elements is the identity: -inf, INT_MIN, false",
        ir, {"a": [[], []], "b": [[], []], "c": [], "d": [[], [], []]},
        [["-inf", "-inf"], [I32_MIN, I32_MIN], I64_MIN, [False, False, False]])
    add("reduce_max_nan_and_signed_zero", "NaN anywhere gives NaN; +0 is greater than -0",
        one_op("reduce_max", ["f64[5, 2]"], "f64[5]", "axes = [1], keepdims = false"),
        {"a": [[-0.0, -0.0], [-0.0, 0.0], [0.0, -0.0], [NAN, INF], ["-inf", "-inf"]]},
        [[-0.0, 0.0, 0.0, NAN, "-inf"]])
    add("reduce_max_bool", "bool maximum is logical or",
        one_op("reduce_max", ["bool[2, 2]"], "bool[2, 1]", "axes = [1], keepdims = true"),
        {"a": [[False, True], [False, False]]}, [[[True], [False]]])
    add("reduce_sum_f64_nonfinite", "inf + -inf = NaN, NaN propagates, inf stays inf, empty sum is +0",
        one_op("reduce_sum", ["f64[4, 2]"], "f64[4]", "axes = [1], keepdims = false"),
        {"a": [[INF, "-inf"], [NAN, 1.0], [INF, 1.0], [1.5, 2.25]]}, [[NAN, NAN, INF, 3.75]])
    add("reduce_sum_empty_float", "a sum of no elements is +0",
        one_op("reduce_sum", ["f32[3, 0]"], "f32[3]", "axes = [1], keepdims = false"),
        {"a": [[], [], []]}, [[0.0, 0.0, 0.0]])
    add("reduce_sum_no_axes", "axes = [] reduces nothing",
        one_op("reduce_sum", ["i32[2]"], "i32[2]", "axes = [], keepdims = false"), {"a": [4, -5]}, [[4, -5]])

    # --- convert ---------------------------------------------------------------------------------
    add("convert_f32_to_i32_saturates", "float→int truncates toward zero, saturates, NaN → 0",
        one_op("convert", ["f32[10]"], "i32[10]", "dtype = i32"),
        {"a": [2.9, -2.9, 1e10, -1e10, INF, "-inf", NAN, -0.0, 2147483520.0, 2147483648.0]},
        [[2, -2, I32_MAX, I32_MIN, I32_MAX, I32_MIN, 0, 0, 2147483520, I32_MAX]])
    add("convert_f64_to_i64_saturates", "f64→i64 saturates at ±2^63; the largest f64 below 2^63 converts exactly",
        one_op("convert", ["f64[5]"], "i64[5]", "dtype = i64"),
        {"a": [9.3e18, -9.3e18, 9223372036854774784.0, NAN, -1.5]},
        [[I64_MAX, I64_MIN, 9223372036854774784, 0, -1]])
    add("convert_f64_to_i32_bounds", "truncation happens before the range check",
        one_op("convert", ["f64[4]"], "i32[4]", "dtype = i32"),
        {"a": [3e9, -2147483648.5, -2147483649.0, 2147483647.9]}, [[I32_MAX, I32_MIN, I32_MIN, I32_MAX]])
    add("convert_i64_to_i32_wraps", "int→int narrowing wraps (two's complement)",
        one_op("convert", ["i64[3]"], "i32[3]", "dtype = i32"), {"a": [2**32 + 5, 2**31, -1]},
        [[5, I32_MIN, -1]])
    add("convert_i32_to_f32_rounds", "int→float rounds to nearest even",
        one_op("convert", ["i32[3]"], "f32[3]", "dtype = f32"), {"a": [16777217, I32_MAX, -16777219]},
        [[16777216.0, 2147483648.0, -16777220.0]])
    add("convert_f64_to_f32", "f64→f32 rounds; overflow to ±inf, underflow to ±0",
        one_op("convert", ["f64[6]"], "f32[6]", "dtype = f32"),
        {"a": [1e40, -1e40, 1e-50, -1e-50, NAN, 0.1]}, [[INF, "-inf", 0.0, -0.0, NAN, 0.1]])
    add("convert_to_bool", "x → bool is x != 0: NaN → true, -0 → false",
        one_op("convert", ["f32[5]"], "bool[5]", "dtype = bool"), {"a": [NAN, -0.0, 0.0, 0.5, "-inf"]},
        [[True, False, False, True, True]])
    add("convert_bool_to_i64", "bool → x is 0 or 1",
        one_op("convert", ["bool[2]"], "i64[2]", "dtype = i64"), {"a": [True, False]}, [[1, 0]])

    # --- gather ----------------------------------------------------------------------------------
    add("gather_clamps_indices", "out-of-range indices are clamped into [0, n - 1]; negatives read element 0",
        one_op("gather", ["i32[4]", "i32[6]"], "i32[6]", "axis = 0"),
        {"a": [10, 20, 30, 40], "b": [0, 3, 4, -1, I32_MAX, I32_MIN]}, [[10, 40, 40, 10, 40, 10]])
    add("gather_axis1_2d_indices", "gather along axis 1 with a 2-D index tensor (clamped)",
        one_op("gather", ["f32[2, 3]", "i64[2, 2]"], "f32[2, 2, 2]", "axis = 1"),
        {"a": [[1, 2, 3], [4, 5, 6]], "b": [[2, 0], [5, -5]]},
        [[[[3, 1], [3, 1]], [[6, 4], [6, 4]]]])
    add("gather_i64_indices_beyond_i32", "i64 indices far outside the i32 range clamp too",
        one_op("gather", ["f64[3]", "i64[2]"], "f64[2]", "axis = 0"),
        {"a": [1.5, 2.5, 3.5], "b": [2**32, -2**32]}, [[3.5, 1.5]])
    add("gather_from_empty_axis", "gathering from an axis of extent 0 gives zeros (false for bool)",
        func("%a: f32[0, 2], %b: bool[0], %i: i32[3]", "f32[3, 2], bool[3]",
             ["%0 = gather(%a, %i) {axis = 0} : f32[3, 2]", "%1 = gather(%b, %i) {axis = 0} : bool[3]"], "%0, %1"),
        {"a": [], "b": [], "i": [0, 5, -1]}, [[[0.0, 0.0], [0.0, 0.0], [0.0, 0.0]], [False, False, False]])

    # --- pad / slice -------------------------------------------------------------------------------
    add("pad_interior_only", "interior padding between neighbours",
        one_op("pad", ["i32[3]", "i32[]"], "i32[7]", "lo = [0], hi = [0], interior = [2]"),
        {"a": [1, 2, 3], "b": 9}, [[1, 9, 9, 2, 9, 9, 3]])
    add("pad_2d_signed_zero_value", "2-D padding with a -0.0 value: lo/hi/interior per axis",
        one_op("pad", ["f32[2, 2]", "f32[]"], "f32[3, 4]", "lo = [1, 0], hi = [0, 1], interior = [0, 1]"),
        {"a": [[1, 2], [3, 4]], "b": -0.0},
        [[[-0.0, -0.0, -0.0, -0.0], [1.0, -0.0, 2.0, -0.0], [3.0, -0.0, 4.0, -0.0]]])
    add("pad_empty_operand", "an empty axis gets lo + hi elements; interior adds nothing",
        one_op("pad", ["i32[0]", "i32[]"], "i32[2]", "lo = [1], hi = [1], interior = [3]"),
        {"a": [], "b": 5}, [[5, 5]])
    add("pad_rank0", "padding a scalar is the identity",
        one_op("pad", ["f64[]", "f64[]"], "f64[]", "lo = [], hi = [], interior = []"),
        {"a": 2.5, "b": NAN}, [2.5])
    add("slice_negative_steps", "negative steps walk backwards; stop = -1 means before index 0",
        func("%x: i32[5]", "i32[5], i32[2], i32[0], i32[1]",
             ["%0 = slice(%x) {start = [4], stop = [-1], step = [-1]} : i32[5]",
              "%1 = slice(%x) {start = [3], stop = [0], step = [-2]} : i32[2]",
              "%2 = slice(%x) {start = [2], stop = [2], step = [1]} : i32[0]",
              "%3 = slice(%x) {start = [0], stop = [5], step = [7]} : i32[1]"], "%0, %1, %2, %3"),
        {"x": [0, 1, 2, 3, 4]}, [[4, 3, 2, 1, 0], [3, 1], [], [0]])
    add("slice_2d_negative_steps", "negative steps on both axes",
        one_op("slice", ["i32[3, 4]"], "i32[2, 2]", "start = [2, 3], stop = [-1, -1], step = [-2, -3]"),
        {"a": [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 11]]}, [[[11, 8], [3, 0]]])
    add("reshape_empty_and_scalar", "reshape keeps row-major order, including empty and rank-0 shapes",
        func("%x: f32[0, 3], %y: i32[1, 1]", "f32[3, 0], i32[]",
             ["%0 = reshape(%x) {shape = [3, 0]} : f32[3, 0]", "%1 = reshape(%y) {shape = []} : i32[]"],
             "%0, %1"), {"x": [], "y": [[42]]}, [[[], [], []], 42])
    add("transpose_3d", "result axis i is operand axis permutation[i]",
        one_op("transpose", ["i32[2, 1, 3]"], "i32[3, 2, 1]", "permutation = [2, 0, 1]"),
        {"a": [[[1, 2, 3]], [[4, 5, 6]]]}, [[[[1], [4]], [[2], [5]], [[3], [6]]]])

    # --- matmul / conv2d ---------------------------------------------------------------------------
    add("matmul_k0", "a contraction of length 0 gives +0",
        one_op("matmul", ["f32[2, 0]", "f32[0, 3]"], "f32[2, 3]"), {"a": [[], []], "b": []},
        [[[0.0, 0.0, 0.0], [0.0, 0.0, 0.0]]])
    add("matmul_nan_inf", "NaN·0 = NaN and inf + -inf = NaN inside a contraction",
        one_op("matmul", ["f64[2, 2]", "f64[2, 1]"], "f64[2, 1]"),
        {"a": [[NAN, 1.0], [INF, 1.0]], "b": [[0.0], ["-inf"]]}, [[[NAN], [NAN]]])
    add("matmul_batch_broadcast", "batch dims broadcast: [1] against [3]",
        one_op("matmul", ["f32[1, 2, 2]", "f32[3, 2, 1]"], "f32[3, 2, 1]"),
        {"a": [[[1, 2], [3, 4]]], "b": [[[1], [0]], [[0], [1]], [[1], [1]]]},
        [[[[1], [3]], [[2], [4]], [[3], [7]]]])
    conv = "strides = [{s}], padding = [{p}], lhs_dilation = [{l}], rhs_dilation = [{r}]"
    add("conv2d_strides_padding", "stride 2 with one row/column of zero padding on each side",
        one_op("conv2d", ["f32[1, 3, 3, 1]", "f32[2, 2, 1, 1]"], "f32[1, 2, 2, 1]",
               conv.format(s="2, 2", p="[1, 1], [1, 1]", l="1, 1", r="1, 1")),
        {"a": [[[[1], [2], [3]], [[4], [5], [6]], [[7], [8], [9]]]], "b": [[[[1]], [[1]]], [[[1]], [[1]]]]},
        [[[[[1], [5]], [[11], [28]]]]])
    add("conv2d_rhs_dilation", "a 2x2 filter dilated by 2 reads the four corners of a 3x3 input",
        one_op("conv2d", ["f32[1, 3, 3, 1]", "f32[2, 2, 1, 1]"], "f32[1, 1, 1, 1]",
               conv.format(s="1, 1", p="[0, 0], [0, 0]", l="1, 1", r="2, 2")),
        {"a": [[[[1], [2], [3]], [[4], [5], [6]], [[7], [8], [9]]]], "b": [[[[1]], [[1]]], [[[1]], [[1]]]]},
        [[[[[20]]]]])
    add("conv2d_lhs_dilation", "input dilation 2 puts zeros between input elements",
        one_op("conv2d", ["f32[1, 2, 2, 1]", "f32[2, 2, 1, 1]"], "f32[1, 2, 2, 1]",
               conv.format(s="1, 1", p="[0, 0], [0, 0]", l="2, 2", r="1, 1")),
        {"a": [[[[1], [2]], [[3], [4]]]], "b": [[[[1]], [[2]]], [[[3]], [[4]]]]},
        [[[[[1], [4]], [[9], [16]]]]])
    add("conv2d_asymmetric_padding", "padding [[0, 0], [2, 1]] pads two columns left and one right",
        one_op("conv2d", ["f64[1, 1, 3, 1]", "f64[1, 2, 1, 1]"], "f64[1, 1, 5, 1]",
               conv.format(s="1, 1", p="[0, 0], [2, 1]", l="1, 1", r="1, 1")),
        {"a": [[[[1], [2], [3]]]], "b": [[[[1]], [[10]]]]}, [[[[[0], [10], [21], [32], [3]]]]])
    add("conv2d_channels_and_batch", "channel contraction and batch/output-channel independence",
        func("%x: f32[1, 1, 1, 2], %w: f32[1, 1, 2, 3], %y: f32[2, 1, 1, 1], %v: f32[1, 1, 1, 2]",
             "f32[1, 1, 1, 3], f32[2, 1, 1, 2]",
             ["%0 = conv2d(%x, %w) {" + conv.format(s="1, 1", p="[0, 0], [0, 0]", l="1, 1", r="1, 1") + "} : f32[1, 1, 1, 3]",
              "%1 = conv2d(%y, %v) {" + conv.format(s="1, 1", p="[0, 0], [0, 0]", l="1, 1", r="1, 1") + "} : f32[2, 1, 1, 2]"],
             "%0, %1"),
        {"x": [[[[1, 2]]]], "w": [[[[1, 2, 3], [4, 5, 6]]]], "y": [[[[2]]], [[[3]]]], "v": [[[[1, -1]]]]},
        [[[[[9, 12, 15]]]], [[[[2, -2]]], [[[3, -3]]]]])
    add("conv2d_empty_output", "a window larger than the padded input gives an empty result",
        one_op("conv2d", ["f32[1, 2, 2, 1]", "f32[3, 3, 1, 1]"], "f32[1, 0, 0, 1]",
               conv.format(s="1, 1", p="[0, 0], [0, 0]", l="1, 1", r="1, 1")),
        {"a": [[[[1], [2]], [[3], [4]]]], "b": [[[[1]]] * 3] * 3}, [[[]]])
    add("conv2d_nan", "NaN·0 = NaN propagates through a convolution",
        one_op("conv2d", ["f64[1, 1, 2, 1]", "f64[1, 1, 1, 1]"], "f64[1, 1, 2, 1]",
               conv.format(s="1, 1", p="[0, 0], [0, 0]", l="1, 1", r="1, 1")),
        {"a": [[[[NAN], [1.0]]]], "b": [[[[0.0]]]]}, [[[[[NAN], [0.0]]]]])

    # --- symbolic dims ---------------------------------------------------------------------------
    add("symbolic_batch", "a symbolic batch dimension B bound from the argument (B = 2)",
        func("%x: f32[B, 2], %b: f32[2]", "f32[B, 2]", ["%0 = add(%x, %b) : f32[B, 2]"], "%0")
        .replace(") {", ") where B >= 1 {", 1),
        {"x": [[1, 2], [3, 4]], "b": [10, 20]}, [[[11, 22], [13, 24]]])
    return E


# ---------------------------------------------------------------------------------------------
# 3. reference-computed cases on seeded random inputs
# ---------------------------------------------------------------------------------------------



def reference_cases() -> list[dict[str, Any]]:
    rng = np.random.default_rng(20240602)
    R: list[dict[str, Any]] = []

    def f(shape, dtype="f32", lo=-4.0, hi=4.0):
        return rng.uniform(lo, hi, size=shape).astype(parse_dtype(dtype).numpy)

    def i(shape, dtype="i32", lo=-100, hi=100):
        return rng.integers(lo, hi, size=shape).astype(parse_dtype(dtype).numpy)

    def add(name, desc, ir, inputs):
        R.append(success_case("reference", name, desc, ir, inputs, None, source="reference"))

    conv = "strides = [{s}], padding = [{p}], lhs_dilation = [{l}], rhs_dilation = [{r}]"
    for dt in ("f32", "f64"):
        add(f"exp_{dt}", f"exp on random {dt} values in [-20, 20]", one_op("exp", [f"{dt}[16]"], f"{dt}[16]"),
            {"a": f((16,), dt, -20, 20)})
        add(f"log_{dt}", f"log on random positive {dt} values", one_op("log", [f"{dt}[16]"], f"{dt}[16]"),
            {"a": f((16,), dt, 1e-6, 1e6)})
        add(f"reduce_sum_{dt}", f"row sums of random {dt} values (sum accuracy, n = 50)",
            one_op("reduce_sum", [f"{dt}[4, 50]"], f"{dt}[4]", "axes = [1], keepdims = false"),
            {"a": f((4, 50), dt)})
        add(f"matmul_{dt}", f"random {dt} matmul (dot accuracy, n = 40)",
            one_op("matmul", [f"{dt}[2, 3, 40]", f"{dt}[40, 5]"], f"{dt}[2, 3, 5]"),
            {"a": f((2, 3, 40), dt), "b": f((40, 5), dt)})
        add(f"conv2d_{dt}", f"random {dt} conv2d with stride, padding and both dilations",
            one_op("conv2d", [f"{dt}[2, 5, 5, 3]", f"{dt}[3, 2, 3, 4]"], f"{dt}[2, 5, 4, 4]",
                   conv.format(s="2, 1", p="[1, 2], [0, 1]", l="2, 1", r="1, 2")),
            {"a": f((2, 5, 5, 3), dt), "b": f((3, 2, 3, 4), dt)})
    add("elementwise_f32", "add, sub, mul, div of random f32 values with broadcasting",
        func("%a: f32[3, 4], %b: f32[4]", "f32[3, 4], f32[3, 4], f32[3, 4], f32[3, 4]",
             [f"%{o} = {o}(%a, %b) : f32[3, 4]" for o in ("add", "sub", "mul", "div")], "%add, %sub, %mul, %div"),
        {"a": f((3, 4)), "b": f((4,))})
    add("elementwise_i64", "add, sub, mul, div of random i64 values",
        func("%a: i64[6], %b: i64[6]", "i64[6], i64[6], i64[6], i64[6]",
             [f"%{o} = {o}(%a, %b) : i64[6]" for o in ("add", "sub", "mul", "div")], "%add, %sub, %mul, %div"),
        {"a": i((6,), "i64", -10**12, 10**12), "b": i((6,), "i64", -50, 50)})
    add("movement_i32", "transpose, slice, pad, gather and reshape of a random i32 tensor",
        func("%x: i32[3, 4], %v: i32[], %i: i32[5]", "i32[4, 3], i32[2, 2], i32[4, 9], i32[3, 5], i32[12]",
             ["%0 = transpose(%x) {permutation = [1, 0]} : i32[4, 3]",
              "%1 = slice(%x) {start = [2, 0], stop = [-1, 4], step = [-2, 2]} : i32[2, 2]",
              "%2 = pad(%x, %v) {lo = [1, 0], hi = [0, 2], interior = [0, 1]} : i32[4, 9]",
              "%3 = gather(%x, %i) {axis = 1} : i32[3, 5]",
              "%4 = reshape(%x) {shape = [12]} : i32[12]"], "%0, %1, %2, %3, %4"),
        {"x": i((3, 4)), "v": np.int32(-1), "i": i((5,), "i32", -2, 6)})
    add("reduce_max_compare_select_f64", "reduce_max, compare and select on random f64 values",
        func("%x: f64[3, 5], %y: f64[5]", "f64[3], bool[3, 5], f64[3, 5]",
             ["%0 = reduce_max(%x) {axes = [1], keepdims = false} : f64[3]",
              "%1 = compare(%x, %y) {direction = ge} : bool[3, 5]",
              "%2 = select(%1, %x, %y) : f64[3, 5]"], "%0, %1, %2"),
        {"x": f((3, 5), "f64"), "y": f((5,), "f64")})
    add("convert_f32_to_i32", "convert of random f32 values to i32",
        one_op("convert", ["f32[8]"], "i32[8]", "dtype = i32"), {"a": f((8,), "f32", -1e3, 1e3)})
    return R


# ---------------------------------------------------------------------------------------------
# 4. negative cases: one per constraint label
# ---------------------------------------------------------------------------------------------

def _conv_attrs(s="1, 1", p="[0, 0], [0, 0]", l="1, 1", r="1, 1") -> str:
    return f"strides = [{s}], padding = [{p}], lhs_dilation = [{l}], rhs_dilation = [{r}]"


def negative_irs() -> dict[str, str]:
    """Constraint label -> IR text violating exactly that label (all earlier ones hold)."""
    N: dict[str, str] = {}
    for op in ("add", "sub", "mul", "div"):
        N[f"{op}.C1"] = one_op(op, ["f32[2]", "f64[2]"], "f32[2]")
        N[f"{op}.C2"] = one_op(op, ["bool[2]", "bool[2]"], "bool[2]")
        N[f"{op}.C3"] = one_op(op, ["f32[2]", "f32[3]"], "f32[3]")
    for op in ("exp", "log"):
        N[f"{op}.C1"] = one_op(op, ["i32[2]"], "i32[2]")
    N["const.C1"] = func("", "i32[2]", ["%0 = const {value = [1, 2, 3]} : i32[2]"], "%0")
    N["compare.C1"] = one_op("compare", ["f32[2]", "i32[2]"], "bool[2]", "direction = eq")
    N["compare.C2"] = one_op("compare", ["f32[2]", "f32[3]"], "bool[3]", "direction = eq")
    N["select.C1"] = one_op("select", ["i32[2]", "f32[2]", "f32[2]"], "f32[2]")
    N["select.C2"] = one_op("select", ["bool[2]", "f32[2]", "f64[2]"], "f32[2]")
    N["select.C3"] = one_op("select", ["bool[2]", "f32[3]", "f32[3]"], "f32[3]")
    for op in ("reduce_sum", "reduce_max"):
        N[f"{op}.C1"] = one_op(op, ["f32[2, 3]"], "f32[2]", "axes = [2], keepdims = false")
        N[f"{op}.C2"] = one_op(op, ["f32[2, 3]"], "f32[]", "axes = [1, 0], keepdims = false")
    N["reduce_sum.C3"] = one_op("reduce_sum", ["bool[2]"], "bool[]", "axes = [0], keepdims = false")
    N["reshape.C1"] = one_op("reshape", ["f32[4]"], "f32[4]", "shape = [-1, -4]")
    N["reshape.C2"] = one_op("reshape", ["f32[4]"], "f32[3]", "shape = [3]")
    N["transpose.C1"] = one_op("transpose", ["f32[2, 3]"], "f32[2]", "permutation = [0]")
    N["transpose.C2"] = one_op("transpose", ["f32[2, 3]"], "f32[2, 2]", "permutation = [0, 0]")
    N["slice.C1"] = one_op("slice", ["f32[4]"], "f32[4]", "start = [0, 0], stop = [4], step = [1]")
    N["slice.C2"] = one_op("slice", ["f32[4]"], "f32[4]", "start = [0], stop = [4], step = [0]")
    N["slice.C3"] = one_op("slice", ["f32[4]"], "f32[1]", "start = [5], stop = [6], step = [1]")
    N["pad.C1"] = one_op("pad", ["f32[2]", "f32[1]"], "f32[2]", "lo = [0], hi = [0], interior = [0]")
    N["pad.C2"] = one_op("pad", ["f32[2]", "f64[]"], "f32[2]", "lo = [0], hi = [0], interior = [0]")
    N["pad.C3"] = one_op("pad", ["f32[2]", "f32[]"], "f32[2]", "lo = [0, 0], hi = [0], interior = [0]")
    N["pad.C4"] = one_op("pad", ["f32[2]", "f32[]"], "f32[1]", "lo = [-1], hi = [0], interior = [0]")
    N["gather.C1"] = one_op("gather", ["f32[3]", "f32[2]"], "f32[2]", "axis = 0")
    N["gather.C2"] = one_op("gather", ["f32[3]", "i32[2]"], "f32[2]", "axis = 1")
    N["matmul.C1"] = one_op("matmul", ["f32[2, 2]", "f64[2, 2]"], "f32[2, 2]")
    N["matmul.C2"] = one_op("matmul", ["bool[2, 2]", "bool[2, 2]"], "bool[2, 2]")
    N["matmul.C3"] = one_op("matmul", ["f32[2]", "f32[2, 2]"], "f32[2]")
    N["matmul.C4"] = one_op("matmul", ["f32[2, 3]", "f32[2, 4]"], "f32[2, 4]")
    N["matmul.C5"] = one_op("matmul", ["f32[2, 1, 1]", "f32[3, 1, 1]"], "f32[3, 1, 1]")
    ok = _conv_attrs()
    N["conv2d.C1"] = one_op("conv2d", ["f32[1, 2, 2, 1]", "f64[1, 1, 1, 1]"], "f32[1, 2, 2, 1]", ok)
    N["conv2d.C2"] = one_op("conv2d", ["bool[1, 2, 2, 1]", "bool[1, 1, 1, 1]"], "bool[1, 2, 2, 1]", ok)
    N["conv2d.C3"] = one_op("conv2d", ["f32[2, 2, 1]", "f32[1, 1, 1, 1]"], "f32[2, 2, 1]", ok)
    N["conv2d.C4"] = one_op("conv2d", ["f32[1, 2, 2, 2]", "f32[1, 1, 3, 1]"], "f32[1, 2, 2, 1]", ok)
    N["conv2d.C5"] = one_op("conv2d", ["f32[1, 2, 2, 1]", "f32[1, 1, 1, 1]"], "f32[1, 2, 2, 1]",
                            _conv_attrs(s="1"))
    N["conv2d.C6"] = one_op("conv2d", ["f32[1, 2, 2, 1]", "f32[1, 1, 1, 1]"], "f32[1, 2, 2, 1]",
                            _conv_attrs(s="0, 1"))
    N["conv2d.C7"] = one_op("conv2d", ["f32[1, 2, 2, 1]", "f32[0, 1, 1, 1]"], "f32[1, 2, 2, 1]", ok)
    return N


def negative_cases() -> list[dict[str, Any]]:
    out = []
    for label, ir in negative_irs().items():
        opname, c = label.split(".")
        cdef = OPS[opname].constraint(c)
        stage = "parse" if opname == "const" else "verify"
        out.append(error_case("negative", f"{opname}_{c.lower()}", f"violates {label}: {cdef.text}", ir,
                              cdef.code, label, stage))
    return out


def error_cases() -> list[dict[str, Any]]:
    good = one_op("add", ["f32[2]", "f32[2]"], "f32[2]")
    out = [
        error_case("errors", "unknown_op", "an op outside the 19", one_op("tanh", ["f32[2]"], "f32[2]"),
                   "E4006", None, "parse"),
        error_case("errors", "missing_return", "a function body without `return`",
                   "func @main(%a: f32[2]) -> (f32[2]) {\n}\n", "E1010", None, "parse"),
        error_case("errors", "invalid_character", "a character outside the IR alphabet",
                   good.replace("%0 = add", "%0 = add$"), "E1002", None, "parse"),
        error_case("errors", "unknown_dtype", "a dtype that does not exist",
                   one_op("exp", ["f16[2]"], "f16[2]"), "E2005", None, "parse"),
        error_case("errors", "use_before_def", "an operand that is never defined",
                   func("%a: f32[2]", "f32[2]", ["%0 = add(%a, %zz) : f32[2]"], "%0"), "E4001", None, "parse"),
        error_case("errors", "redefinition", "an SSA value assigned twice",
                   func("%a: f32[2]", "f32[2]", ["%0 = exp(%a) : f32[2]", "%0 = log(%a) : f32[2]"], "%0"),
                   "E4002", None, "parse"),
        error_case("errors", "wrong_result_type", "a declared result type that differs from the inferred one",
                   one_op("add", ["f32[2]", "f32[2]"], "f32[3]"), "E4010", None, "verify"),
        error_case("errors", "undecided_broadcast", "B against 3 cannot be decided from the assumptions",
                   one_op("add", ["f32[B]", "f32[3]"], "f32[3]"), "E3011", "add.C3", "verify"),
        error_case("errors", "argument_dtype", "an argument whose dtype differs from the parameter's",
                   good, "E6009", None, "run", inputs={"a": ("i32", [1, 2]), "b": ("f32", [1, 2])}),
        error_case("errors", "argument_shape", "an argument whose shape differs from the parameter's",
                   good, "E6009", None, "run", inputs={"a": ("f32", [1, 2, 3]), "b": ("f32", [1, 2])}),
        error_case("errors", "missing_argument", "a parameter without an argument",
                   good, "E6010", None, "run", inputs={"a": ("f32", [1, 2])}),
        error_case("errors", "assumption_violated", "arguments that violate a `where` assumption",
                   func("%a: f32[B]", "f32[B]", ["%0 = exp(%a) : f32[B]"], "%0").replace(") {", ") where B >= 3 {", 1),
                   "E6009", None, "run", inputs={"a": ("f32", [1, 2])}),
    ]
    return out


