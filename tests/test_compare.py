"""exercises/compare.py: python -m exercises.train --compare finds the first stage where a learner's
run leaves the reference's, and says when a correct draw only uses another random stream."""

import importlib.util
import sys
import types

import numpy as np
import pytest

import test_exercises_meta as meta
from exercises import EXERCISES, compare
from exercises import train as runner
from test_exercises_train import CONCEPTS, CURRICULA, TINY, reference_copy


def learner(**replace):
    """{concept: module-like namespace}: the reference's functions, some replaced (name: fn)."""
    mine = {concept: types.SimpleNamespace() for concept in CONCEPTS}
    for _, concept, name in EXERCISES:
        owner, _, method = name.partition(".")
        ref = getattr(CONCEPTS[concept], owner)
        if method:
            fn = replace.get(name, vars(ref)[method])
            setattr(mine[concept], owner, type(owner, (ref,), {method: fn}))
        else:
            setattr(mine[concept], owner, replace.get(name, ref))
    return mine


def listed(kind, name, what):
    """A wrong version (kind MISTAKES) or a correct other one (ALTERNATIVES) of the meta-tests."""
    return next(fn for n, w, fn in getattr(meta, kind) if (n, w) == (name, what))


def compare_lines(mine, corpus, tmp_path, monkeypatch, capsys, extra=()):
    monkeypatch.chdir(tmp_path)  # out-compare/ goes here
    status = compare.main(TINY + CURRICULA + [f"--data_dir={corpus}", *extra], mine)
    return status, capsys.readouterr().out.strip().splitlines()


def test_the_references_own_source_is_identical(corpus, tmp_path, monkeypatch, capsys):
    """The learner's files made of the reference's source: every stage equal, exit 0."""
    mine = {}
    for concept in CONCEPTS:
        path = tmp_path / f"learner_{concept}.py"
        path.write_text(reference_copy(concept))
        spec = importlib.util.spec_from_file_location(f"learner_{concept}", path)
        mine[concept] = importlib.util.module_from_spec(spec)
        monkeypatch.setitem(sys.modules, spec.name, mine[concept])  # as an import puts it there
        spec.loader.exec_module(mine[concept])
    status, lines = compare_lines(mine, corpus, tmp_path, monkeypatch, capsys)
    assert status == 0, lines
    assert lines[-1].startswith("identical to the reference through step 2 ("), lines
    assert lines[-1].endswith("stages compared): yours of exercises 1-6, 8-13"), lines[-1]
    assert "yours that ran: 1 unigram_neg_log_p (1 call)" in "\n".join(lines)
    assert "yours that these flags never call: 7 seqlen_reshape" in "\n".join(lines)
    assert not (tmp_path / "out").exists()  # nothing in the way of python train.py


@pytest.mark.parametrize("name,what,first,k", [
    ("Bag.draw", "the first n, not random", "first difference: drawn ids at step 0: ", "ex08"),
    ("sort_index", "descending",
     "first difference: sorted index before step 0 (index_to_sample of vocab_rarity): ", "ex03"),
    ("gather_tokens", "no per-sample offset", "first difference: loss at step 0: ", "ex10"),
])
def test_a_wrong_version_gives_its_stage(name, what, first, k, corpus, tmp_path, monkeypatch,
                                         capsys):
    mine = learner(**{name: listed("MISTAKES", name, what)})
    status, lines = compare_lines(mine, corpus, tmp_path, monkeypatch, capsys)
    assert status == 1, lines
    verdict = next(i for i, line in enumerate(lines) if line.startswith("first difference: "))
    assert lines[verdict].startswith(first) and "yours " in lines[verdict], lines[verdict]
    assert f"(yours fails its tests: exercise " in "\n".join(lines[verdict + 1:])
    assert f"-k {k}" in "\n".join(lines[verdict + 1:]), lines


def test_another_random_stream_gets_the_seed_spread(corpus, tmp_path, monkeypatch, capsys):
    """rng.permutation instead of rng.choice: correct, but never the reference's ids."""
    mine = learner(**{"Bag.draw": listed("ALTERNATIVES", "Bag.draw",
                                         "shuffle the bag, take the first n")})
    status, lines = compare_lines(mine, corpus, tmp_path, monkeypatch, capsys)
    assert status == 0, lines
    text = "\n".join(lines)
    assert ("your Bag.draw (exercise 8) passes its tests but uses the random generator differently"
            in text), text
    assert ("the rest of yours, with the reference's draw in its place: identical to the reference "
            "through step 2") in text
    assert lines[-1].startswith("another random stream, which no test finds wrong: val loss after "
                                "3 steps yours "), lines[-1]
    assert "(seeds 1338-1340): yours is " in lines[-1]


def test_bad_input_is_one_line(corpus, tmp_path, monkeypatch, capsys):
    """A function of yours that raises names its exercise and step; a flag --compare cannot take is
    refused before any run (a file that does not import: test_exercises_train.py)."""
    def wrong(x, idx):
        raise IndexError("my bug")

    status, lines = compare_lines(learner(gather_tokens=wrong), corpus, tmp_path, monkeypatch,
                                  capsys)
    assert status == 1
    assert lines[-1] == ("exercises.train --compare: exercise 10 gather_tokens raised IndexError: "
                         "my bug at step 0"), lines
    status, lines = compare_lines(learner(), corpus, tmp_path, monkeypatch, capsys,
                                  ["--out_dir=out"])
    assert status == 1 and lines == ["exercises.train --compare: --out_dir: --compare makes its "
                                     "own runs in out-compare/; drop it"]


def test_a_sum_in_another_order_is_a_note(corpus, tmp_path, monkeypatch, capsys):
    """Scores summed left to right differ from numpy's pairwise sum in the last digits: noted, and
    if that reorders near ties, the sorted index is where the runs part, with the reason."""
    def left_to_right(samples, neg_log_p):
        return np.array([sum(float(neg_log_p[u]) for u in row) for row in samples])

    status, lines = compare_lines(learner(vocab_rarity=left_to_right), corpus, tmp_path,
                                  monkeypatch, capsys)
    text = "\n".join(lines)
    assert ("note: your scores (vocab_rarity) differ from the reference's in the last digits only"
            in text), text
    if status == 1:
        assert "first difference: sorted index before step 0" in text, text
        assert "sum as neg_log_p[samples].sum(axis=1) does (exercise 2 vocab_rarity)" in text
    else:
        assert lines[-1].startswith("identical to the reference through step 2 (")
