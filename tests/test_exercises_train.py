"""exercises/train.py: the learner's functions really replace the reference's, and train."""

import inspect
import os
import subprocess
import sys
import textwrap
import types

import pytest

import analyzer
import random_ltd
import sampler
import scheduler
import train
from exercises import EXERCISES
from exercises import swaps as swapping
from exercises import train as runner

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TINY = ["--block_size=16", "--batch_size=4", "--n_layer=4", "--n_head=2", "--n_embd=32",
        "--eval_samples=8", "--log_interval=1", "--sample_tokens=0", "--warmup_iters=2",
        "--device=cpu", "--max_iters=3"]
CURRICULA = ["--cl_metric=vocab_rarity", "--cl_min=20", "--cl_max=100", "--cl_total_step=6",
             "--cl_difficulty_step=10", "--seqlen=truncate", "--seqlen_min=8", "--seqlen_step=4",
             "--seqlen_total_step=6", "--random_ltd", "--ltd_min=4", "--ltd_seq_per_step=4",
             "--ltd_require_steps=6"]
CONCEPTS = {"analyzer": analyzer, "scheduler": scheduler, "sampler": sampler,
            "random_ltd": random_ltd}


def counted(name, fn, calls):
    """fn, counting its calls in calls[name]: a learner's version that is not a stub."""
    def mine(*args, **kwargs):
        calls[name] += 1
        return fn(*args, **kwargs)
    return mine


def counting_learner(calls):
    """{concept: module-like namespace} with every exercise a counting copy of the reference's."""
    mine = {concept: types.SimpleNamespace() for concept in CONCEPTS}
    for _, concept, name in EXERCISES:
        ref = CONCEPTS[concept]
        owner, _, method = name.partition(".")
        if not method:
            setattr(mine[concept], owner, counted(name, getattr(ref, owner), calls))
            continue
        base = getattr(ref, owner)
        fn = counted(name, getattr(base, method), calls)
        if isinstance(vars(base)[method], staticmethod):
            fn = staticmethod(fn)
        setattr(mine[concept], owner, type(owner, (base,), {method: fn}))
    return mine


def test_install_replaces_every_use_and_a_run_calls_yours(corpus, tmp_path, monkeypatch):
    calls = {name: 0 for _, _, name in EXERCISES}
    swaps = runner.learner_swaps(counting_learner(calls))
    assert [name for _, name, _, _ in swaps] == [name for _, _, name in EXERCISES]
    swapping.install(swaps, monkeypatch)  # monkeypatch: undone after the test
    assert analyzer.METRICS["vocab_rarity"] is analyzer.vocab_rarity  # the table, too
    for _, name, reference, yours in swaps:
        owner, _, method = name.partition(".")
        module = CONCEPTS[next(c for _, c, n in EXERCISES if n == name)]
        now = vars(getattr(module, owner))[method] if method else getattr(module, owner)
        assert now is yours and now is not reference, name
    train.main(TINY + CURRICULA + [f"--data_dir={corpus}", f"--out_dir={tmp_path}",
                                  f"--index_dir={tmp_path / 'index'}"])
    not_used = {"seqlen_reshape"}  # the run truncates
    assert all(calls[name] > 0 for name in calls if name not in not_used), calls


def reference_copy(concept):
    """A learner's file made of the reference's own source, function by function."""
    ref = CONCEPTS[concept]
    parts = [f"import {concept}", f"from {concept} import *  # noqa: F403  (np, torch, helpers)"]
    classes = {}
    for _, c, name in EXERCISES:
        if c != concept:
            continue
        owner, _, method = name.partition(".")
        if not method:
            parts.append(textwrap.dedent(inspect.getsource(getattr(ref, owner))))
            continue  # (getsource includes a method's @staticmethod line)
        src = textwrap.dedent(inspect.getsource(getattr(getattr(ref, owner), method)))
        classes.setdefault(owner, []).append(textwrap.indent(src, "    "))
    for owner, methods in classes.items():
        parts.append(f"class {owner}({concept}.{owner}):\n" + "\n".join(methods))
    return "\n\n".join(parts) + "\n"


@pytest.mark.slow  # a subprocess
def test_python_m_exercises_train_with_the_reference_as_yours(corpus, tmp_path):
    """The command of exercises/README.md, on a learner's package that copies the reference: in its
    own run directory, replaced (a checkpoint left there does not stop it), the calls of yours
    counted; a learner file that does not import is one line naming it and its line."""
    learner = tmp_path / "learner"
    pkg = learner / "exercises"
    pkg.mkdir(parents=True)
    for name in ("__init__.py", "train.py", "swaps.py", "compare.py", "replay.py", "flagsets.py"):
        (pkg / name).write_text(open(os.path.join(ROOT, "exercises", name)).read())
    for concept in CONCEPTS:
        (pkg / f"{concept}.py").write_text(reference_copy(concept))
    (learner / runner.RUN_DIR).mkdir()
    (learner / runner.RUN_DIR / "ckpt.pt").write_text("a run before this one")
    env = {**os.environ, "PYTHONPATH": ROOT, "OMP_NUM_THREADS": "1"}
    out = subprocess.run([sys.executable, "-m", "exercises.train", *TINY, *CURRICULA,
                          f"--data_dir={corpus}"], cwd=learner, env=env, capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    everything = ", ".join(f"{n} {name}" for n, _, name in EXERCISES)
    assert f"exercises.train: yours: {everything}\n" in out.stdout, out.stdout
    assert "exercises.train: the reference's (still stubs): none\n" in out.stdout
    assert "your analyzer builds the curriculum index in" in out.stdout
    assert "iter 2:" in out.stdout, out.stdout
    ran = out.stdout.strip().splitlines()[-1]  # every one of yours but the reshape ran
    assert ran.startswith("exercises.train: yours that ran: 1 unigram_neg_log_p (1 call), "), ran
    assert ran.endswith("13 layer_tokens (6 calls); yours that these flags never call: "
                        "7 seqlen_reshape"), ran
    assert not (learner / "out").exists()  # python train.py's own out_dir stays free
    assert os.path.getsize(learner / runner.RUN_DIR / "ckpt.pt") > 1000  # this run's checkpoint
    (pkg / "sampler.py").write_text(reference_copy("sampler") + "\ndef broken(:\n")
    out = subprocess.run([sys.executable, "-m", "exercises.train"], cwd=learner, env=env,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 1 and out.stderr.strip().splitlines() == [
        f"exercises.train: exercises/sampler.py does not import: SyntaxError: invalid "
        f"syntax (sampler.py, line {reference_copy('sampler').count(chr(10)) + 2})"], (
            out.stdout + out.stderr)


@pytest.mark.slow  # three short trainings
def test_the_recorded_calls_are_what_training_makes_today(tmp_path):
    """tests/fixtures/exercise_calls.npz is what its generator records from today's train.py (when
    training changes how it calls an exercise: python tests/fixtures/make_exercise_calls.py)."""
    import importlib.util

    from exercises import replay

    path = os.path.join(ROOT, "tests", "fixtures", "make_exercise_calls.py")
    spec = importlib.util.spec_from_file_location("make_exercise_calls", path)
    make = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(make)
    tape = make.record(str(tmp_path))
    calls, arrays = replay.load(make.OUT)
    assert len(tape.calls) == len(calls)
    for i, (now, then) in enumerate(zip(tape.calls, calls)):
        assert now == then, (i, now["name"], "rerun tests/fixtures/make_exercise_calls.py")
    assert set(tape.arrays) == set(arrays)
