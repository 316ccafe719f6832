"""Your functions in place of the reference's: which exercises of exercises/*.py are yours (a stub,
still raising NotImplementedError, is not), swapping them into the concept modules and everywhere
a module imported them by name, counting their calls, and undoing it all. exercises/train.py (your
run) and exercises/compare.py (your run beside the reference's) stand on it.
"""

import ast
import functools
import importlib
import inspect
import os
import sys
import textwrap
import traceback
from collections import Counter

from exercises import EXERCISES

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # above the learner's files
MISSING = object()  # Patch: an attribute the object did not have itself


class LearnerError(Exception):
    """One line about the learner's code: a file that does not import, a function that raised."""


def project_root():
    """The concept files' folder (this one's parent, unless exercises/ is a copy elsewhere)."""
    return os.path.dirname(os.path.abspath(importlib.import_module("scheduler").__file__))


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


def where(e):
    """' (exercises/x.py:12)': the last line of a learner's file in e's traceback, or ''."""
    learner = os.path.join(ROOT, "exercises") + os.sep
    mine = [f for f in traceback.extract_tb(e.__traceback__)
            if os.path.abspath(f.filename).startswith(learner)
            and os.path.basename(f.filename) not in ("train.py", "swaps.py", "compare.py")]
    return f" (at {os.path.relpath(mine[-1].filename, ROOT)}:{mine[-1].lineno})" if mine else ""


def learner_module(concept):
    """exercises.<concept>, or a LearnerError naming the file and the line that broke its import."""
    try:
        return importlib.import_module("exercises." + concept)
    except Exception as e:  # noqa: BLE001  (whatever the learner's file raises)
        error = f"exercises/{concept}.py does not import: {type(e).__name__}: {e}{where(e)}"
    raise LearnerError(error)  # subtle: outside the except, so no chained traceback


def reference(concept, name):
    """The reference's object of exercise `name` in module `concept`: a function, or for
    "Class.method" the class's raw attribute (a staticmethod stays one)."""
    owner, _, method = name.partition(".")
    ref = getattr(importlib.import_module(concept), owner)
    return vars(ref)[method] if method else ref


def learner_swaps(mine=None):
    """[(number, name, the reference's object, yours)] for every exercise you implemented.
    mine: {concept: module} (default: exercises.<concept>); a method is its class's raw attribute
    (a staticmethod stays one)."""
    swaps = []
    for n, concept, name in EXERCISES:
        theirs = mine[concept] if mine else learner_module(concept)
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
    """setattr and setitem, as pytest's monkeypatch has them, and undo (a test passes that one)."""

    def __init__(self):
        self.done = []  # (target, key, old value or MISSING, is a dict) in the order made

    def setattr(self, obj, name, value):
        self.done.append((obj, name, vars(obj).get(name, MISSING), False))
        setattr(obj, name, value)

    def setitem(self, d, key, value):
        self.done.append((d, key, d.get(key, MISSING), True))
        d[key] = value

    def undo(self):
        for target, key, old, is_dict in reversed(self.done):
            if is_dict:
                target[key] = old
            elif old is MISSING:  # it was inherited: uncover it again
                delattr(target, key)
            else:
                setattr(target, key, old)
        self.done = []


def install(swaps, patch=None):
    """Put yours where the reference's was: the concept module, every module of this project that
    imported it by name, and any module-level dict holding it (analyzer.METRICS)."""
    patch = patch or Patch()
    root = project_root()
    ours = [m for m in list(sys.modules.values())
            if (getattr(m, "__file__", None) or "").startswith(root + os.sep)
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
                elif type(value) is dict:  # subtle: not isinstance, which asks every value for
                    # its __class__, and torch.distributed.reduce_op warns when asked
                    for k in [k for k, v in value.items() if v is reference]:
                        patch.setitem(value, k, yours)
    return patch


# -----------------------------------------------------------------------------
# a run that counts the calls of each exercise and knows its step


class Watch:
    """Counts each exercise's calls in a run, knows the step the run is at, and turns an error that
    your function raises into one line naming the exercise and the step (exercises/compare.py
    records values on top of it, in seen and attach)."""

    def __init__(self):
        self.calls = Counter()  # exercise name -> calls in this run
        self.step = None  # the optimizer step being trained; None before the first

    def when(self):
        return "before step 0" if self.step is None else f"at step {self.step}"

    def wrap(self, n, name, fn, yours):
        """fn, counted; yours=True: its errors become LearnerError. A staticmethod stays one."""
        if isinstance(fn, staticmethod):
            return staticmethod(self.wrap(n, name, fn.__func__, yours))

        @functools.wraps(fn)  # subtle: and the index cache still hashes fn's own source
        def call(*args, **kwargs):
            self.calls[name] += 1
            try:
                out = fn(*args, **kwargs)
            except LearnerError:
                raise
            except Exception as e:
                if not yours:
                    raise
                error = (f"exercise {n} {name} raised {type(e).__name__}: {e} {self.when()}"
                         f"{where(e)}")
                raise LearnerError(error) from None
            self.seen(name, args, out)
            return out
        return call

    def seen(self, name, args, out):
        """What exercise `name` returned (compare.py records it)."""

    def attach(self, sampler, model, optimizer):
        """The run's sampler, raw model and optimizer, once train.py made them (compare.py
        watches them)."""

    def install(self, train, swaps, patch):
        """Each (n, name, reference, fn) counted in place of the reference; train.py's step, data
        and model watched; an index that your analyzer builds is built in this process (a forked
        worker's calls would not count)."""
        wrapped = [(n, name, ref, self.wrap(n, name, fn, fn is not ref))
                   for n, name, ref, fn in swaps]
        install(wrapped, patch)
        for (_, name, ref, fn), (_, _, _, counted) in zip(swaps, wrapped):
            owner, _, method = name.partition(".")
            raw = fn.__func__ if isinstance(fn, staticmethod) else fn
            cls = getattr(sys.modules.get(getattr(raw, "__module__", "")), owner, None)
            if method and isinstance(cls, type) and vars(cls).get(method) is fn and fn is not ref:
                patch.setattr(cls, method, counted)  # your class too (your gather_tokens uses it)
        train_step, get_data, get_model = train.train_step, train.get_data, train.get_model
        ensure_index, made = train.ensure_index, {}

        def step(*args, **kwargs):
            out = train_step(*args, **kwargs)
            self.seen("train_step", args, out)
            return out

        def watched_data(*args, **kwargs):  # the step of each batch: the step being trained
            out = get_data(*args, **kwargs)
            made["sampler"] = sampler = out[0]
            next_batch = sampler.next_batch

            def batch(t):
                self.step = t
                return next_batch(t)
            sampler.next_batch = batch
            return out

        def watched_model(*args, **kwargs):  # -> (model, raw_model, optimizer, scaler, gen)
            out = get_model(*args, **kwargs)
            self.attach(made["sampler"], out[1], out[2])
            return out

        patch.setattr(train, "train_step", step)
        patch.setattr(train, "get_data", watched_data)
        patch.setattr(train, "get_model", watched_model)
        analyzer = {name for _, concept, name in EXERCISES if concept == "analyzer"}
        if any(name in analyzer and fn is not ref for _, name, ref, fn in swaps):
            patch.setattr(train, "ensure_index", lambda *a, **k: ensure_index(*a, **{
                **k, "num_workers": 1}))


def ran(swaps, calls):
    """'yours that ran: ...' and, if any, 'yours that these flags never call: ...'."""
    done = ", ".join(f"{n} {name} ({calls[name]:,} call{'s' * (calls[name] > 1)})"
                     for n, name, _, _ in swaps if calls[name])
    line = f"yours that ran: {done or 'none'}"
    idle = [f"{n} {name}" for n, name, _, _ in swaps if not calls[name]]
    return line + (f"; yours that these flags never call: {', '.join(idle)}" if idle else "")


def stubs_line(swaps):
    yours = {name for _, name, _, _ in swaps}
    return ", ".join(f"{n} {name}" for n, _, name in EXERCISES if name not in yours) or "none"
