"""Shared fixtures: tiny prepared corpora, one without domains and one with two."""

import numpy as np
import pytest

import data


def template_corpus(d, docs, lines, things, **prepare):
    """docs files of deterministic template sentences (lines each, a fifth of them code), prepared
    with data.py into d/prepared."""
    rng = np.random.default_rng(0)
    animals = ["cat", "dog", "owl", "fox", "yak"]
    for k in range(docs):
        text = [f"the {rng.choice(animals)} sat on the {rng.choice(things)}." if rng.random() < 0.8
                else f"def f{rng.integers(10)}(x): return x + {rng.integers(100)}"
                for _ in range(lines)]
        (d / f"doc{k}.txt").write_text("\n".join(text))
    data.prepare([str(d)], str(d / "prepared"), verbose=False, **prepare)
    return str(d / "prepared")


@pytest.fixture(scope="session")
def corpus(tmp_path_factory):
    """~40 KB of deterministic template sentences in a few documents, prepared with data.py."""
    return template_corpus(tmp_path_factory.mktemp("corpus"), 4, 300,
                           ["mat", "log", "hat", "box", "quiz", "jazz"], block_size=16)


@pytest.fixture(scope="session")
def domain_corpus(tmp_path_factory):
    """Two domains of template text (prose sentences, code lines), five files each, prepared with
    data.py."""
    d = tmp_path_factory.mktemp("domains")
    rng = np.random.default_rng(0)
    animals, seats = ["cat", "owl", "fox"], ["mat", "log"]
    for name in ("prose", "code"):
        (d / name).mkdir()
        for k in range(5):
            lines = [f"the {rng.choice(animals)} sat on the {rng.choice(seats)}." if name == "prose"
                     else f"def f{rng.integers(10)}(x): return x + {rng.integers(100)}"
                     for _ in range(120)]
            (d / name / f"{k}.txt").write_text("\n".join(lines))
    data.prepare(out_dir=str(d / "prepared"), block_size=16, verbose=False,
                 domains={"prose": [str(d / "prose")], "code": [str(d / "code")]})
    return str(d / "prepared")


def pytest_addoption(parser):
    parser.addoption("--mine", action="store_true", default=False,
                     help="run tests/test_exercises.py on your exercises/*.py, not the reference")


@pytest.hookimpl(tryfirst=True)
def pytest_sessionstart(session):
    """A run of the exercise tests without --mine says first that it tests the reference."""
    config = session.config
    exercise_tests = any(a.split("::")[0].endswith("test_exercises.py") for a in config.args)
    if exercise_tests and not config.getoption("--mine"):
        config.pluginmanager.get_plugin("terminalreporter").write_line(
            "tests/test_exercises.py tests the reference (the concept files); to test yours "
            "(exercises/*.py), add --mine")
