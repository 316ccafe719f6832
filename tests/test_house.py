"""The house: imports run one way. data.py at the bottom of the concept files, then analyzer.py,
scheduler.py and random_ltd.py, then sampler.py and model.py; support/ below them all (it imports
no concept file), services/ and autoscale/ above them, config.py, train.py, experiments/ and
exercises/ on top. Every import counts, a lazy one inside a function too.

Catches: a concept file importing a service (the demos' old circle: analyzer.py -> support/demos.py
-> support/index.py -> analyzer.py), a helper importing a concept file (support/checks.py ->
scheduler.PACING), a concept file importing one at its own level or above."""

import ast
import glob
import os

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LEVEL = {"data": 0, "analyzer": 1, "scheduler": 1, "random_ltd": 1, "sampler": 2, "model": 2}


def modules():
    """{module name: path} of the project's code (tests excluded)."""
    paths = glob.glob(os.path.join(ROOT, "*.py")) + glob.glob(os.path.join(ROOT, "*", "*.py"))
    names = {}
    for path in paths:
        rel = os.path.relpath(path, ROOT)
        if rel.startswith("tests") or rel.endswith("__init__.py"):
            continue
        names[rel[:-3].replace(os.sep, ".")] = path
    return names


def imports(path, known):
    """The project modules path imports anywhere in it (lazy ones included): 'from support import
    demos' -> support.demos; 'import analyzer' -> analyzer."""
    found = set()
    for node in ast.walk(ast.parse(open(path).read())):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found |= {f"{node.module}.{a.name}" for a in node.names} | {node.module}
    return {m for m in found if m in known}


def test_imports_run_one_way():
    known = modules()
    graph = {m: imports(p, known) for m, p in known.items()}
    bad = []
    for m, targets in graph.items():
        folder = m.split(".")[0] if "." in m else None
        for t in targets:
            t_folder = t.split(".")[0] if "." in t else None
            if m in LEVEL:  # a concept file: concept files below it, and helpers
                ok = (t in LEVEL and LEVEL[t] < LEVEL[m]) or t_folder == "support"
            elif folder == "support":  # a helper: other helpers only
                ok = t_folder == "support"
            elif folder in ("services", "autoscale"):  # above the concept files, below config
                ok = t in LEVEL or t_folder in ("support", "services", "autoscale")
            else:
                ok = True  # config.py, train.py, experiments/, exercises/, the entry points
            if not ok:
                bad.append(f"{m} -> {t}")
    assert bad == []
    assert "scheduler" in graph["sampler"] and "analyzer" in graph["sampler"]  # the demo's scores
    assert graph["support.demos"] == set()  # text layout only


@pytest.mark.parametrize("folder", ["support", "services"])
def test_each_folder_stands_on_one_side_of_the_concept_files(folder):
    """support/ imports no concept file at all; services/ imports at least one (or it belongs in
    support/)."""
    known = modules()
    for m, path in known.items():
        if m.startswith(folder + "."):
            concept = imports(path, known) & set(LEVEL)
            assert bool(concept) == (folder == "services"), (m, concept)
