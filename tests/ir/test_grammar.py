"""spec/ir.ebnf and mind/ir/parser.py stay in step."""

from __future__ import annotations

import glob
import os
import re

import pytest

from mind.ir import parser as irparser
from mind.ir.core import RELATIONS
from mind.ir.parser import parse_module
from mind.ir.verify import check_module
from mind.spec.dtypes import ALL_DTYPES
from mind.spec.ops import OPS

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EBNF = open(os.path.join(ROOT, "spec", "ir.ebnf"), encoding="utf-8").read()


def _rules() -> dict[str, str]:
    body = re.sub(r"\(\*.*?\*\)", " ", EBNF, flags=re.S)
    rules = {}
    for m in re.finditer(r"^([A-Za-z_]+)\s*=(.*?);\s*$", body, re.S | re.M):
        rules[m.group(1)] = m.group(2)
    return rules


RULES = _rules()


def _alternatives(rule: str) -> set[str]:
    return set(re.findall(r'"([^"]*)"', RULES[rule]))


def _tokens(text: str) -> list[tuple[str, str]]:
    p = irparser.IRParser.__new__(irparser.IRParser)
    p.text, p.filename, p.limits = text, "<t>", irparser.DEFAULT_LIMITS
    return [(t.kind, t.text) for t in p._tokenize() if t.kind != "eof"]


SYNTACTIC = [r for r in RULES if not r.isupper()]


def test_every_rule_is_defined_and_used():
    body = re.sub(r"\(\*.*?\*\)", " ", EBNF, flags=re.S)
    referenced = set(re.findall(r"(?<![\"\w])([A-Za-z_][A-Za-z_]*)(?![\"\w])", " ".join(RULES.values())))
    referenced -= {t for r in RULES.values() for t in re.findall(r'"([^"]*)"', r)}
    undefined = {r for r in referenced if r not in RULES and not r.islower()}
    assert not undefined, undefined
    unused = set(RULES) - referenced - {"Module", "COMMENT", "WHITESPACE"}
    assert not unused, unused


def test_every_terminal_of_the_syntactic_rules_is_one_token():
    for rule in SYNTACTIC:
        for term in re.findall(r'"([^"]*)"', RULES[rule]):
            toks = _tokens(term)
            assert len(toks) == 1 and toks[0][1] == term, (rule, term, toks)
            assert toks[0][0] in ("punct", "ident"), (rule, term, toks)


def test_every_punctuation_of_the_lexer_is_in_the_grammar():
    punct = re.search(r"\(\?P<punct>(.*?)\)\n", irparser._TOKEN_PATTERN).group(1)
    multi = re.findall(r"->|>=|<=|==", punct)
    singles = re.search(r"\[(.*)\]", punct).group(1).replace("\\", "")
    terminals = {t for r in SYNTACTIC for t in re.findall(r'"([^"]*)"', RULES[r])}
    for p in multi + list(singles):
        assert p in terminals, p


def test_tables_match_the_spec():
    assert _alternatives("OpName") == set(OPS)
    assert _alternatives("DType") == {d.value for d in ALL_DTYPES}
    assert _alternatives("Relation") == set(RELATIONS)
    assert _alternatives("Direction") == set(OPS["compare"].attrs[0].choices)
    assert _alternatives("AttrName") == {a.name for op in OPS.values() for a in op.attrs}
    kinds = {a.kind for op in OPS.values() for a in op.attrs}
    assert {k.capitalize() + "Attr" for k in kinds} == {r for r in RULES if r.endswith("Attr") and r != "AttrName"} \
        - {"Attr"}
    assert _alternatives("DimFunc") == {"floordiv", "max", "min"}


@pytest.mark.parametrize("text,kinds", [
    ("%x.1 @f.g 1.5e-3 .5 7 ident_9 -> >= <= == ( ) [ ] { } , : = + - * < > // c\n",
     ["value", "func", "number", "number", "number", "ident"] + ["punct"] * 18),
])
def test_lexical_classes(text, kinds):
    assert [k for k, _ in _tokens(text)] == kinds


def _doc_blocks():
    out = []
    for path in sorted(glob.glob(os.path.join(ROOT, "docs", "**", "*.md"), recursive=True)):
        if os.path.basename(path).startswith("frontend"):
            continue
        text = open(path, encoding="utf-8").read()
        for k, block in enumerate(re.findall(r"```mir\n(.*?)```", text, re.S)):
            out.append(pytest.param(block, id=f"{os.path.relpath(path, ROOT)}#{k}"))
    for path in sorted(glob.glob(os.path.join(ROOT, "examples", "*.mir"))):
        out.append(pytest.param(open(path, encoding="utf-8").read(), id=os.path.relpath(path, ROOT)))
    return out


DOC_BLOCKS = _doc_blocks()


def test_docs_have_ir_examples():
    assert len(DOC_BLOCKS) >= 20


@pytest.mark.parametrize("text", DOC_BLOCKS)
def test_every_ir_example_in_docs_parses_and_verifies(text):
    module = parse_module(text)
    assert check_module(module) == []
    again = parse_module(module.text())
    assert again.text() == module.text()
