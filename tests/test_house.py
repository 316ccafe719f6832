"""The house: the concept files stand alone, imports run one way, few floors.

The concept files (data, analyzer, scheduler, random_ltd, sampler, model) import only the standard
library, numpy, torch, tqdm and each other, at the top and inside functions (their demos too), so
each can be copied into another project with the concept files it imports. support/ (plumbing that
imports no concept file), services/ and autoscale/ (built on the concept files), train.py,
experiments/, exercises/ and the entry points stand above them. Every import counts, a lazy one too.

Catches: a concept file importing a helper (analyzer.py -> support/pool.py), a helper importing a
concept file (support/checks.py -> scheduler.PACING), a circle, a folder that adds a floor, a
train.py that imports its way through the house."""

import ast
import glob
import os
import shutil
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CONCEPTS = ("data", "analyzer", "scheduler", "random_ltd", "sampler", "model")
ALLOWED = set(sys.stdlib_module_names) | {"numpy", "torch", "tqdm"}


def modules():
    """{module name: path} of the project's code (tests excluded)."""
    paths = glob.glob(os.path.join(ROOT, "*.py")) + glob.glob(os.path.join(ROOT, "*", "*.py"))
    names = {}
    for path in paths:
        rel = os.path.relpath(path, ROOT)
        if not rel.startswith("tests"):
            names[rel[:-3].replace(os.sep, ".").removesuffix(".__init__")] = path
    return names


def imports(path):
    """Every module path imports anywhere in it (lazy ones included): 'from support import
    launch' -> support, support.launch."""
    found = set()
    for node in ast.walk(ast.parse(open(path).read())):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found |= {f"{node.module}.{a.name}" for a in node.names} | {node.module}
    return found


def node(module):
    """A top-level file or folder: support.launch -> support."""
    return module.split(".")[0]


def test_concept_files_import_only_the_standard_library_numpy_torch_tqdm_and_each_other():
    known = modules()
    bad = [f"{c} -> {m}" for c in CONCEPTS for m in imports(known[c])
           if node(m) not in ALLOWED and node(m) not in CONCEPTS]
    assert bad == []


def test_the_import_graph_has_at_most_six_floors_no_circle_and_support_below_the_concepts():
    known = modules()
    graph = {}
    for m, path in known.items():
        targets = {node(t) for t in imports(path) if t in known or node(t) in known}
        graph.setdefault(node(m), set()).update(targets - {node(m)})
    for m in glob.glob(os.path.join(ROOT, "support", "*.py")):  # plumbing: no concept file
        assert not {node(t) for t in imports(m)} & set(CONCEPTS), m
    floor, visiting = {}, []

    def height(n):
        assert n not in visiting, f"a circle: {' -> '.join(visiting + [n])}"
        if n not in floor:
            visiting.append(n)
            floor[n] = 1 + max((height(t) for t in graph[n]), default=0)
            visiting.pop()
        return floor[n]

    assert max(height(n) for n in graph) <= 6, sorted(floor.items(), key=lambda kv: -kv[1])
    assert floor["train"] <= 4  # the entry points and experiments/ stand on it


def test_train_py_imports_at_most_eight_project_modules():
    known = modules()
    mine = {t for t in imports(known["train"]) if t in known and t not in ("support", "services")}
    assert len(mine) <= 8, sorted(mine)


def test_each_concept_file_copied_with_what_it_imports_runs_alone(tmp_path):
    """Copied into an empty directory with the concept files it imports: it imports, and the
    scheduler's and random-LTD's demos run there as commands, with nothing on stderr."""
    known = modules()
    for c in CONCEPTS:
        here = tmp_path / c
        here.mkdir()
        todo, copied = [c], set()
        while todo:
            m = todo.pop()
            copied.add(m)
            shutil.copy(known[m], here / f"{m}.py")
            todo += [t for t in imports(known[m]) if t in CONCEPTS and t not in copied]
        r = subprocess.run([sys.executable, "-c", f"import {c}"], cwd=here, capture_output=True,
                           text=True, timeout=120)
        assert r.returncode == 0, (c, r.stderr[-500:])
    for c, shows in (("scheduler", "fixed_root"), ("random_ltd", "token-layers")):
        r = subprocess.run([sys.executable, f"{c}.py"], cwd=tmp_path / c, capture_output=True,
                           text=True, timeout=120)
        assert r.returncode == 0 and r.stderr == "" and shows in r.stdout, (c, r.stderr[-500:])
