"""Train with your functions: every exercise you implemented in exercises/*.py replaces the
reference's, then train.py runs with the flags you give.

    python -m exercises.train --max_iters=50 --cl_metric=vocab_rarity --seqlen=truncate --random_ltd

A function still raising NotImplementedError (a stub) is skipped: the reference's runs there. Yours
replaces the reference's in its module and everywhere it was imported by name (train.py's
layer_tokens, the analyzer's METRICS table); a method replaces the reference class's. When any of
your analyzer functions runs, the curriculum index is built afresh by them, in a temporary folder,
unless --index_dir is given (give it under torchrun: each rank would make its own folder).
"""

import ast
import importlib
import inspect
import os
import shutil
import sys
import tempfile
import textwrap

from exercises import EXERCISES

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def is_stub(fn):
    """True when fn's body (after its docstring) is one `raise NotImplementedError(...)`."""
    fn = fn.__func__ if isinstance(fn, staticmethod) else fn
    try:
        node = ast.parse(textwrap.dedent(inspect.getsource(fn))).body[0]
    except (OSError, TypeError, SyntaxError):  # no source to read (made at run time): not a stub
        return False
    body = node.body[1:] if ast.get_docstring(node) is not None else node.body
    return (len(body) == 1 and isinstance(body[0], ast.Raise)
            and "NotImplementedError" in ast.unparse(body[0]))


def learner_swaps(mine=None):
    """[(number, name, the reference's object, yours)] for every exercise you implemented.
    mine: {concept: module} (default: exercises.<concept>); a method is its class's raw attribute
    (a staticmethod stays one)."""
    swaps = []
    for n, concept, name in EXERCISES:
        theirs = mine[concept] if mine else importlib.import_module("exercises." + concept)
        ref = importlib.import_module(concept)
        owner, _, method = name.partition(".")
        reference = getattr(ref, owner)
        yours = getattr(theirs, owner, None)
        if method:  # Class.method: the attribute of the class itself
            reference = vars(reference)[method]
            yours = vars(yours).get(method) if isinstance(yours, type) else None
        if yours is not None and not is_stub(yours):
            swaps.append((n, name, reference, yours))
    return swaps


class Patch:
    """setattr and setitem, as pytest's monkeypatch has them (a test passes that one, to undo)."""

    def setattr(self, obj, name, value):
        setattr(obj, name, value)

    def setitem(self, d, key, value):
        d[key] = value


def install(swaps, patch=None):
    """Put yours where the reference's was: the concept module, every module of this project that
    imported it by name, and any module-level dict holding it (analyzer.METRICS)."""
    patch = patch or Patch()
    ours = [m for m in list(sys.modules.values())
            if (getattr(m, "__file__", None) or "").startswith(ROOT + os.sep)
            and not m.__name__.startswith(("exercises", "test_"))]
    for n, name, reference, yours in swaps:
        owner, _, method = name.partition(".")
        if method:
            for m in ours:  # the reference class (its subclasses inherit the method)
                cls = vars(m).get(owner)
                if isinstance(cls, type) and vars(cls).get(method) is reference:
                    patch.setattr(cls, method, yours)
            continue
        for m in ours:
            for key, value in list(vars(m).items()):
                if value is reference:
                    patch.setattr(m, key, yours)
                elif isinstance(value, dict):
                    for k in [k for k, v in value.items() if v is reference]:
                        patch.setitem(value, k, yours)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    import train  # every concept module, imported as train.py imports them

    swaps = learner_swaps()
    install(swaps)
    yours = {name for _, name, _, _ in swaps}
    print("exercises.train: yours:", ", ".join(f"{n} {name}" for n, name, _, _ in swaps) or "none")
    print("exercises.train: the reference's (still stubs):",
          ", ".join(f"{n} {name}" for n, _, name in EXERCISES if name not in yours) or "none")
    index_dir = None
    analyzer_names = {name for _, concept, name in EXERCISES if concept == "analyzer"}
    if yours & analyzer_names and not any(a.startswith("--index_dir") for a in argv):
        index_dir = tempfile.mkdtemp(prefix="index_mine_")
        argv.append(f"--index_dir={index_dir}")
        print(f"exercises.train: your analyzer builds the curriculum index in {index_dir}")
    try:
        train.main(argv)
    finally:
        if index_dir:
            shutil.rmtree(index_dir, ignore_errors=True)


if __name__ == "__main__":
    main()
