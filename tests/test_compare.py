"""exercises/compare.py: python -m exercises.train --compare finds the first stage where a learner's
run leaves the reference's, and says when a correct draw only uses another random stream."""

import importlib.util
import sys
import types

import numpy as np
import torch
import pytest

import test_exercises_meta as meta
from exercises import EXERCISES, compare
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
    ("gather_tokens", "no per-sample offset",
     "first difference: dropping layers at step 0 (gathered rows", "ex10"),
])
def test_a_wrong_version_gives_its_stage(name, what, first, k, corpus, tmp_path, monkeypatch,
                                         capsys):
    mine = learner(**{name: listed("MISTAKES", name, what)})
    status, lines = compare_lines(mine, corpus, tmp_path, monkeypatch, capsys)
    assert status == 1, lines
    verdict = next(i for i, line in enumerate(lines) if line.startswith("first difference: "))
    assert lines[verdict].startswith(first) and "yours " in lines[verdict], lines[verdict]
    assert "(yours fails its tests: exercise " in "\n".join(lines[verdict + 1:])
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
    assert "(seeds 1338-1340; 99% of its runs fall in " in lines[-1], lines[-1]
    assert lines[-1].endswith("): yours is inside their range"), lines[-1]


def test_bad_input_is_one_line(corpus, tmp_path, monkeypatch, capsys):
    """A function of yours that raises names its exercise and step; a flag --compare cannot take is
    refused before any run (a file that does not import: test_exercises_train.py)."""
    def wrong(x, idx):
        raise IndexError("my bug")

    status, lines = compare_lines(learner(gather_tokens=wrong), corpus, tmp_path, monkeypatch,
                                  capsys)
    assert status == 1
    verdict = next(line for line in lines if line.startswith("first difference: "))
    assert verdict.startswith("first difference: your run stopped where the reference's went on, "
                              "every value equal until then ("), lines
    assert verdict.endswith("exercise 10 gather_tokens raised IndexError: my bug at step 0")
    assert lines[-1].startswith("  exercise 10 gather_tokens (yours fails its tests: "), lines
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


def test_a_stopped_run_is_blamed_on_the_first_output_that_differed(corpus, tmp_path, monkeypatch,
                                                                   capsys):
    """A gather of one row too many makes the reference's scatter raise: the compare names the
    gather (its rows differ first), not the scatter that raised."""
    from random_ltd import gather_tokens  # the reference's (the compare swaps the module's)

    def one_too_many(x, idx):
        return gather_tokens(x, torch.cat([idx, idx[:, -1:]], dim=1))

    status, lines = compare_lines(learner(gather_tokens=one_too_many), corpus, tmp_path,
                                  monkeypatch, capsys)
    text = "\n".join(lines)
    assert status == 1, text
    assert "your run then stopped: the run 'yours' stopped: IndexError" in text, text
    assert ("first difference: dropping layers at step 0 (gathered rows): yours of shape (4, 5)"
            in text), text
    assert "  exercise 10 gather_tokens (yours " in text, text


def test_a_float_difficulty_is_a_difference(corpus, tmp_path, monkeypatch, capsys):
    """2304.0 for 2304: the difficulty, a stage before the admitted count, differs in its dtype."""
    wrong = listed("MISTAKES", "root_schedule", "a float difficulty (2304.0 for 2304)")
    status, lines = compare_lines(learner(root_schedule=wrong), corpus, tmp_path, monkeypatch,
                                  capsys)
    text = "\n".join(lines)
    assert status == 1, text
    assert "first difference: difficulty at step 0 (vocab_rarity): yours [20.0] of dtype float64, "
    "reference of dtype int64" in text, text


def test_gradients_at_the_first_step_that_drops(corpus, tmp_path, monkeypatch, capsys):
    """With the length curriculum shorter than the kept length at first, nothing drops at step 0:
    the gradients are compared at the first step that drops, and the backward of yours named
    (exercise 12 among those that make the stage)."""
    wrong = listed("MISTAKES", "GatherRows.backward", "the rows not gathered get the mean gradient")
    later = ["--seqlen_min=8", "--seqlen_total_step=2", "--ltd_min=12"]  # s 8, 12, 16; r 12
    status, lines = compare_lines(learner(**{"GatherRows.backward": staticmethod(wrong)}), corpus,
                                  tmp_path, monkeypatch, capsys, later)
    text = "\n".join(lines)
    assert status == 1, text
    first = next(line for line in lines if line.startswith("first difference: "))
    assert first.startswith("first difference: gradients at step ") and " step 0 " not in first
    assert "  exercise 12 GatherRows.backward (yours fails its tests: exercise 12" in text, text


def test_a_draw_outside_the_seed_spread_is_a_difference(corpus, tmp_path, monkeypatch, capsys):
    """Another random stream whose val loss leaves the reference's seed spread: exit 1, naming it;
    and a draw that ignores rng unless the bag is full fails on the run's own calls."""
    mine = learner(**{"Bag.draw": listed("ALTERNATIVES", "Bag.draw",
                                         "shuffle the bag, take the first n")})
    monkeypatch.setattr(compare, "spread", lambda cfg, argv, out: ("the reference's (narrow)",
                                                                   (-2.0, -1.0)))
    status, lines = compare_lines(mine, corpus, tmp_path, monkeypatch, capsys)
    assert status == 1, lines
    assert lines[-1].startswith("first difference: val loss after 3 steps: yours "), lines[-1]
    assert lines[-1].endswith("where the reference's runs fall 99 times in 100: your Bag.draw "
                              "draws otherwise than a uniform draw should"), lines
    full = listed("MISTAKES", "Bag.draw", "named in issue 46: a shuffle per pass, a new pass found "
                  "by the bag being full")
    status, lines = compare_lines(learner(**{"Bag.draw": full}), corpus, tmp_path, monkeypatch,
                                  capsys)
    text = "\n".join(lines)
    assert status == 1 and "first difference: drawn ids at step 0" in text, text
    assert "exercise 8 Bag.draw (yours fails its tests: exercise 8 Bag.draw: the generator" in text


def test_compare_all_runs_every_flag_set(corpus, tmp_path, monkeypatch, capsys):
    """--all: one verdict per flag set of exercises/flagsets.py and a last line for all; the
    capped dropping layers (n_ltd <= L - 2) differ only under the set that drops in every layer."""
    from exercises.flagsets import FLAG_SETS

    wrong = listed("MISTAKES", "layer_tokens", "named in issue 46: dropping layers capped at L - 2")
    monkeypatch.chdir(tmp_path)
    status = compare.main(["--all", f"--data_dir={corpus}", "--max_iters=3"],
                          learner(layer_tokens=wrong))
    lines = capsys.readouterr().out.strip().splitlines()
    assert status == 1, lines
    assert [line for line in lines if line.startswith("== ")] == [
        f"== --compare --all: flag set {label}" for label in FLAG_SETS]
    assert lines[-1] == "--compare --all: 1 of 3 flag sets differ: two_metrics", lines
    assert any(line.startswith("first difference: layer tokens ") for line in lines), lines


def test_a_draw_that_passes_its_tests_is_checked_on_the_runs_own_calls(corpus, tmp_path,
                                                                       monkeypatch, capsys):
    """A draw that takes the bag's last n once it holds 400 ids or more passes every test (their
    bags are smaller) but not on this run's own calls: a difference naming it, not a stream."""
    right = listed("ALTERNATIVES", "Bag.draw", "shuffle the bag, take the first n")

    def tail_when_large(self, rng, n):
        if self.n < 400:
            return right(self, rng, n)
        self.n -= n
        return self.ids[self.n : self.n + n].copy()

    status, lines = compare_lines(learner(**{"Bag.draw": tail_when_large}), corpus, tmp_path,
                                  monkeypatch, capsys)
    text = "\n".join(lines)
    assert status == 1, text
    assert ("your Bag.draw (exercise 8) passes its tests but not on this run's own calls: the "
            "generator rng passed in was not advanced") in text, text
    assert "first difference: drawn ids at step 0" in text and "another random" not in text, text
