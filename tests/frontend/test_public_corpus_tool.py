"""``tools/public_corpus.py``: the tally of a corpus, tried on our own corpus (whose outcomes the
corpus test fixes) and on IR dumps that verify or not."""

from __future__ import annotations

import importlib.util
import os
import shutil

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _tool():
    spec = importlib.util.spec_from_file_location("public_corpus", os.path.join(ROOT, "tools", "public_corpus.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_tally_counts_distinct_programs_and_dumps_by_outcome(tmp_path, capsys):
    corpus = os.path.join(ROOT, "tests", "frontend", "corpus")
    shutil.copytree(corpus, tmp_path / "corpus")
    first = sorted(os.listdir(tmp_path / "corpus" / "accepted"))[0]
    shutil.copy(tmp_path / "corpus" / "accepted" / first, tmp_path / "copy.mind")  # counted once
    (tmp_path / "good.ir").write_text("%0 = Input() {name: \"x\"} : Tensor<f32, [2, 3]>\n"
                                      "%1 = Reshape(%0, [3, 2]) : Tensor<f32, [3, 2]>\noutputs: %1\n")
    (tmp_path / "bad.ir").write_text("%0 = Input() {name: \"x\"} : Tensor<f32, [2, 3]>\n"
                                     "%1 = Reshape(%0, [2, 4]) : Tensor<f32, [2, 4]>\noutputs: %1\n")
    assert _tool().main([str(tmp_path), "--list"]) == 0
    out = capsys.readouterr().out.splitlines()
    accepted = len(os.listdir(os.path.join(corpus, "accepted")))
    refused = len(os.listdir(os.path.join(corpus, "refused")))
    programs = next(line for line in out if "distinct programs" in line)
    assert programs.startswith(f"{accepted + refused} distinct programs: {accepted} compile; refused: ")
    assert sum(int(part.split()[1]) for part in programs.split("refused: ")[1].split(", ")) == refused
    assert "2 distinct IR dumps: 1 verify; refused: E3007 1" in out
    assert sum(line.startswith("ok ") for line in out) == accepted + 1
