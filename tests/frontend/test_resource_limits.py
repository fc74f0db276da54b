"""Resource bounds of the frontend (issue 22): long integers, constant folding and large literals
cost time and memory in proportion to the text, and what is too big is E1012 at the construct."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from mind.compiler.frontend.api import compile_source
from mind.compiler.frontend.lexer import tokenize
from mind.compiler.frontend.literals import DENSE_MIN_CHARS, MAX_LITERAL_ELEMENTS, MAX_TOKEN_LITERAL_ELEMENTS
from mind.compiler.frontend.parser import MAX_INT_DIGITS
from mind.diagnostics import MindError
from mind.ir.core import MAX_CONST_ELEMENTS
from mind.ir.parser import parse_module


def _codes(source: str) -> list[str]:
    try:
        compile_source(source, "t.mind")
    except MindError as exc:
        return exc.codes
    return []


def _error(source: str) -> MindError:
    with pytest.raises(MindError) as info:
        compile_source(source, "t.mind")
    return info.value


# -- integers -----------------------------------------------------------------------------------

@pytest.mark.parametrize("template", ["fn main() -> Tensor<i64, []> {{ {n} }}",
                                      "fn main(x: Tensor<f32, [{n}]>) -> Tensor<f32, []> {{ sum(x) }}",
                                      "fn main() -> Tensor<f64, []> {{ -{n} * 2.0 }}"])
def test_an_integer_of_more_than_4300_digits_is_e1012_at_the_literal(template):
    """Regression: Python's int-string limit made these E7009."""
    n = "9" * (MAX_INT_DIGITS + 1)
    source = template.format(n=n)
    err = _error(source)
    assert err.codes == ["E1012"] and f"{MAX_INT_DIGITS + 1} digits" in str(err)
    d = err.diagnostics[0]
    assert d.span.col == source.index(n) + 1
    assert _codes(template.format(n="1_" * (MAX_INT_DIGITS - 1) + "1")) != ["E1012"]  # 4300 digits: read


def test_an_empty_fill_numpy_cannot_represent_is_e1012():
    """Found by fuzzing: `zeros([0, 2310000000000000000])` was E7009 (NumPy refuses the shape)."""
    err = _error("fn main() { relu(zeros([0, 2310000000000000000])) }")
    assert err.codes == ["E1012"] and "cannot be represented" in str(err)


# -- folding --------------------------------------------------------------------------------------

def _peak_mib(fn) -> float:
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1] / 2**20
    finally:
        tracemalloc.stop()


def test_folding_keeps_an_op_whose_splat_would_exceed_the_constant_limit():
    """Regression: 82 bytes of source folded a 20000x20000 splat (3.1 GB, unparsable IR)."""
    source = "fn main() -> Tensor<f32, [20000, 20000]> { zeros([20000, 1]) + ones([1, 20000]) }"
    texts = []
    assert _peak_mib(lambda: texts.append(compile_source(source).text())) < 20
    assert "add(" in texts[0]
    parse_module(texts[0])  # the folded IR stays parsable


def test_a_large_folded_splat_costs_no_memory_per_element():
    n = int(MAX_CONST_ELEMENTS ** 0.5)
    source = f"fn main() -> Tensor<f32, [{n}, {n}]> {{ zeros([{n}, 1]) + ones([1, {n}]) }}"
    texts = []
    assert _peak_mib(lambda: texts.append(compile_source(source).text())) < 20
    assert f"const {{value = splat(1.0)}} : f32[{n}, {n}]" in texts[0]
    assert parse_module(texts[0]).text() == texts[0]


# -- literals -------------------------------------------------------------------------------------

def _matrix_source(values: np.ndarray, dtype: str = "f32", pad: int = 0, comment: bool = False) -> str:
    rows = ", ".join("[" + ", ".join(repr(float(x)) if values.dtype.kind == "f" else str(int(x)) for x in row) + "]"
                     for row in values)
    inner = ("/*" + " " * (pad - 4) + "*/") if comment else " " * pad
    r, c = values.shape
    return f"fn main() -> Tensor<{dtype}, [{r}, {c}]> {{\n    [{inner}{rows}]\n}}\n"


def test_a_large_literal_is_read_in_bulk_with_modest_memory():
    values = np.random.default_rng(0).standard_normal((800, 800)).round(4)
    source = _matrix_source(values)
    assert "DENSE" in tokenize(source).kinds
    modules = []
    assert _peak_mib(lambda: modules.append(compile_source(source))) < 120  # token by token: ~450 MB
    got = modules[0].functions[0].ops[0].attrs["value"]
    assert got.dtype == np.float32 and np.array_equal(got, values.astype(np.float32))


def test_a_literal_past_the_bulk_limit_is_e1012():
    """Regression: 4M elements took 25-47 s and ~2 GB."""
    n = 4_000_000  # (8 MB of source: just under the size limit)
    source = f"fn main() -> Tensor<i32, [{n}]> {{ [" + "0," * (n - 1) + "0] }"
    assert n > MAX_LITERAL_ELEMENTS
    err = _error(source)
    assert err.codes == ["E1012"] and "input array" in err.diagnostics[0].help
    assert err.diagnostics[0].span.col == source.index("[0,") + 1


def test_a_literal_read_token_by_token_has_a_lower_limit():
    n = MAX_TOKEN_LITERAL_ELEMENTS + 1
    source = f"fn main() -> Tensor<i32, [{n}]> {{ [ /* data */ " + "0," * (n - 1) + "0] }"
    err = _error(source)
    assert err.codes == ["E1012"] and "plain form" in str(err)


NUMBER_TEXTS = st.one_of(
    st.integers(-(10**20), 10**20).map(str),
    st.floats(allow_nan=False, allow_infinity=False, width=64).map(repr),
    st.sampled_from(["0", "-0", "007", "2.", ".5", "-.5", "1e5", "1E+05", "1e-3", "-0.0", "16777217", "3e38", "1e39",
                     "1e400", "1_000", "1.e5", "2147483648", "-2147483649", "9223372036854775808"]),
)


def _literal(rows: list[list[str]], blanks: str) -> str:
    return "[" + ("," + blanks).join("[" + ("," + blanks).join(r) + "]" for r in rows) + "]"


@given(st.integers(1, 3), st.integers(1, 4), st.data(), st.sampled_from(["f32", "f64", "i32", "i64", "bool"]),
       st.sampled_from([" ", "\n ", ""]))
@example(1, 2, None, "f32", " ").via("-0 in a float literal reads as 0, as on the token path")
def test_bulk_and_token_paths_agree(rows, cols, data, dtype, blanks):
    """The same literal, padded to the bulk path's size with blanks or with a comment of the same
    length (the token path): the same constant, or the same diagnostics at the same places."""
    if data is None:
        cells = [["-0", "1.5"]]
    else:
        cells = [[data.draw(NUMBER_TEXTS) for _ in range(cols)] for _ in range(rows)]
    lit = _literal(cells, blanks)
    pad = DENSE_MIN_CHARS
    shape = f"[{len(cells)}, {len(cells[0])}]"
    plain = f"fn main() -> Tensor<{dtype}, {shape}> {{ [{' ' * pad}{lit[1:]} }}"
    commented = f"fn main() -> Tensor<{dtype}, {shape}> {{ [/*{' ' * (pad - 4)}*/{lit[1:]} }}"
    outcomes = []
    for source in (plain, commented):
        try:
            outcomes.append(compile_source(source, "t.mind").text())
        except MindError as exc:
            outcomes.append([(d.code, d.message, d.span) for d in exc.diagnostics])
    assert outcomes[0] == outcomes[1]


def test_a_region_in_a_comment_or_a_string_is_not_a_literal():
    long = "[" + ", ".join(["1.5"] * 1000) + "]"
    source = (f"// {long}\nfn main() -> Tensor<f32, [2]> {{\n  let s = \"{long}\"\n  [1.0, 2.0]\n}}\n")
    toks = tokenize(source)
    assert "DENSE" not in toks.kinds and any(t.startswith('"[1.5') for t in toks.texts)


def test_a_bulk_literal_where_a_list_of_ints_is_expected_reads_as_before():
    axes = ", ".join(["0"] * 1100)
    plain = f"fn main(x: Tensor<f32, [2]>) -> Tensor<f32, []> {{ sum(x, axes=[{axes}]) }}"
    commented = plain.replace("axes=[", "axes=[/**/")
    assert "DENSE" in tokenize(plain).kinds
    assert _codes(plain) == _codes(commented) == ["E3005"]
