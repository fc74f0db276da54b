"""The EBNF in spec/grammar/mind.ebnf and the lexer/parser cannot drift apart silently."""

from __future__ import annotations

import re

from mind.compiler.frontend import ast as A
from mind.compiler.frontend import lexer

from .helpers import ROOT

EBNF = (ROOT / "spec" / "grammar" / "mind.ebnf").read_text()
SYNTAX, LEXICAL = EBNF.split("(* ---- Lexical grammar", 1)


def _strip_comments(text: str) -> str:
    return re.sub(r"\(\*.*?\*\)", " ", text, flags=re.S)


def _rules(text: str) -> dict[str, str]:
    body = _strip_comments(text)
    return {m.group(1): m.group(2) for m in re.finditer(r"^(\w+)\s*=\s*(.*?);\s*$", body, re.M | re.S)}


def test_every_terminal_is_known_to_the_lexer():
    body = _strip_comments(SYNTAX)
    double = set(re.findall(r'"([^"]+)"', body))
    single = set(re.findall(r"'([^']+)'", body))
    assert double, "no terminals found: did the EBNF format change?"
    unknown = double - lexer.PUNCTUATION - lexer.KEYWORDS
    assert not unknown, f"terminals in the EBNF that the lexer does not produce: {unknown}"
    assert single <= lexer.CONTEXTUAL, single - lexer.CONTEXTUAL


def test_every_lexer_token_is_in_the_grammar():
    body = _strip_comments(SYNTAX)
    double = set(re.findall(r'"([^"]+)"', body))
    assert lexer.PUNCTUATION <= double, lexer.PUNCTUATION - double
    assert lexer.KEYWORDS <= double, lexer.KEYWORDS - double


def test_keyword_rule_matches_lexer():
    kw = _rules(LEXICAL)["Keyword"]
    assert set(re.findall(r'"([^"]+)"', kw)) == lexer.KEYWORDS


def test_dtypes_and_operators_match_the_ast_tables():
    rules = _rules(SYNTAX)
    assert set(re.findall(r"'([^']+)'", rules["DType"])) == A.SCALAR_TYPES
    ops = set()
    for name in ("OrExpr", "AndExpr", "CmpOp", "AddExpr", "MulExpr"):
        ops |= set(re.findall(r'"([^"]+)"', rules[name]))
    assert ops == set(A.BINARY_OPS)
    assert set(re.findall(r'"([^"]+)"', rules["Unary"])) == A.UNARY_OPS


def test_every_nonterminal_is_defined():
    rules = _rules(EBNF)
    bodies = re.sub(r"'[^']*'|\"[^\"]*\"", " ", " ".join(_rules(SYNTAX).values()))
    used = set(re.findall(r"\b([A-Z][A-Za-z0-9]*)\b", bodies))
    tokens = {"IDENT", "INT", "FLOAT", "STRING", "NEWLINE", "EOF"}
    assert used - set(rules) - tokens == set()
