"""Your run beside the reference's, stage by stage, and one verdict.

    python -m exercises.train --compare --max_iters=50 --cl_metric=vocab_rarity --random_ltd
    python -m exercises.train --compare --all    # the flag sets of exercises/flagsets.py in turn

train.py runs twice with the same flags and seed: once with the reference's functions, once with
yours (exercises/*.py; a stub stays the reference's). Each exercise's function is wrapped, as the
runner swaps it in, and what flows through the run is recorded and compared in the order the data
flows, each stage with the exercises that make it:

    before step 0   surprisals (1), scores (2), sorted index (3)   [when yours build the index]
    each step       difficulty (4), admitted count (5), drawn ids (8), rows (6, 7), kept
                    positions (9), dropping layers: gathered and scattered rows in the order the
                    layers run (10, 11, 12), layer tokens (13), loss (10, 11, 12), gradients
                    (at step 0 and at the first step that drops tokens: 10, 11, 12)

Values and dtypes are compared (a float 2304.0 is not the integer 2304). The last line is the
verdict: `identical to the reference through step N (K stages compared)` (exit 0), or
`first difference: <stage> at step N: yours ..., reference ...` (exit 1) and every exercise of
yours that makes the stage, those failing their tests first. A run of yours that stops is compared
up to its stop, and blamed on the first of its values that differed.

A draw of yours (8 or 9) that passes its tests but uses the random generator differently
(rng.permutation instead of rng.choice) cannot give the reference's ids. The compare checks it on
this run's own calls as the tests check the recorded ones (exercises/replay.py: each id or position
as likely, the generator honoured and advanced, nothing drawn twice in a pass; failing: a
difference), puts the reference's draw in its place to compare the rest, and sets your final val
loss beside the reference's at three other seeds: inside the range where 99 in 100 of its runs
fall, exit 0; outside, a difference naming your draw (exit 1).

--all: the compare under each flag set of exercises/flagsets.py, one verdict each, a last line.

But:
- the runs go to out-compare/ (replaced each time: train.py's logs are there), never to out/;
- on the CPU unless --device is given (GPU kernels need not repeat bit for bit); no checkpoint or
  sample unless asked;
- scores that differ from the reference's only in the last digits (a sum in another order) are
  noted, not called a difference: the sorted index says whether they changed anything.
"""

import contextlib
import importlib
import importlib.util
import os
import shutil
import sys
import time

import numpy as np
import torch

from exercises import EXERCISES
from exercises.flagsets import FLAG_SETS, argv_of
from exercises.replay import DRAWS, Tape, Wrong, replay
from exercises.swaps import (LearnerError, Patch, Watch, learner_swaps, project_root, ran,
                             reference, stubs_line)

RUN_DIR = "out-compare"  # the compare's own runs and logs, replaced on each compare
SPREAD_SEEDS = 3  # other seeds of the reference, for the spread of its val loss
T99 = {1: 63.657, 2: 9.925, 3: 5.841, 4: 4.604, 5: 4.032}  # Student's t, two-sided 99%, by d.f.
OWN_CALLS = 20  # the first calls of each draw of yours, checked as the tests check the recorded
NUMBER = {name: n for n, _, name in EXERCISES}
STAGES = {  # in the order the data flows: what it is, the exercises that make it (likeliest first)
    "surprisals": ("-ln p(u) of each token id, from the train split's counts",
                   ["unigram_neg_log_p"]),
    "scores": ("each window's sum of its tokens' surprisals",
               ["vocab_rarity", "unigram_neg_log_p"]),
    "sorted index": ("the sample ids by score, ties by id, and their scores", ["sort_index"]),
    "difficulty": ("this step's difficulty of each curriculum, from its schedule",
                   ["root_schedule"]),
    "admitted count": ("how many samples this step's difficulty admits", ["admitted_prefix"]),
    "drawn ids": ("the step's sample ids, drawn from the admitted ones", ["Bag.draw"]),
    "rows": ("the step's token rows, cut to the curriculum's length",
             ["seqlen_truncate", "seqlen_reshape", "root_schedule"]),
    "kept positions": ("the positions each dropping layer keeps", ["sample_kept_indices"]),
    "dropping layers": ("each dropping layer's kept rows gathered, then its output scattered back, "
                        "in the order the layers run (each row's dot product with fixed weights)",
                        ["gather_tokens", "scatter_tokens", "GatherRows.backward"]),
    "layer tokens": ("the step's token-layers on the effective-token clock", ["layer_tokens"]),
    "loss": ("the step's loss, through the gather and the scatter",
             ["gather_tokens", "scatter_tokens", "GatherRows.backward"]),
    "gradients": ("the gradients at step 0 and at the first step that drops tokens, through the "
                  "scatter's and the gather's backward",
                  ["GatherRows.backward", "scatter_tokens", "gather_tokens"]),
}
ORDER = list(STAGES)
RANDOM = {"drawn ids": "Bag.draw", "kept positions": "sample_kept_indices"}  # from a generator
CLOSE = ("surprisals", "scores")  # float sums: another order of summation moves the last digits


def as_numpy(v):
    """A copy of v as a numpy array (a tensor's memory may be reused after the step)."""
    return v.detach().cpu().numpy().copy() if isinstance(v, torch.Tensor) else np.array(v)


class Recorder(Watch):
    """A Watch that keeps what flows through each stage of a run:
    values[(step, stage)] = [(label, value), ...], step -1 before the first step."""

    def __init__(self):
        super().__init__()
        self.values = {}
        self.drop_step = None  # the first step whose dropping layers keep fewer than T tokens

    def add(self, stage, value, label=""):
        step = -1 if self.step is None else self.step
        self.values.setdefault((step, stage), []).append((label, as_numpy(value)))

    def seen(self, name, args, out):
        if name == "unigram_neg_log_p":
            self.add("surprisals", out)
        elif name == "layer_tokens" and self.step is not None:  # not the budget's, before step 0
            self.add("layer tokens", out)
        elif name in ("gather_tokens", "scatter_tokens") and self.step is not None:
            label = name.replace("_tokens", "ed rows")
            if not isinstance(out, torch.Tensor):
                self.add("dropping layers", out, label)
                return
            C = out.size(-1)  # each row's dot product with fixed weights: any element moves it
            w = torch.randn(C, generator=torch.Generator().manual_seed(C), dtype=torch.float64)
            self.add("dropping layers", out.detach().double() @ w.to(out.device), label)
            self.add("dropping layers", str(out.dtype), label + "' dtype")
        elif name == "train_step":  # -> the step's mean loss
            self.add("loss", out)

    def install(self, train, swaps, patch):
        super().install(train, swaps, patch)
        load_index = train.load_index

        def index(index_dir, block_size, names):  # the index the sampler will cut
            out = load_index(index_dir, block_size, names)
            for name, arrays in out.items():
                self.add("scores", arrays["sample_to_metric"], name)
                for key in ("index_to_sample", "index_to_metric"):
                    self.add("sorted index", arrays[key], f"{key} of {name}")
            return out
        patch.setattr(train, "load_index", index)

    def attach(self, sampler, model, optimizer):
        """The sampler's ids and rows, the model's kept positions, the first step's gradients."""
        global_ids, next_batch = sampler.global_ids, sampler.next_batch
        sample, layers = model.sample_ltd_indices, sorted(model.ltd_layers)

        def ids(t):
            for name, d in sampler.difficulties(t).items():  # the step's, as admit sees it
                self.add("difficulty", d, name)
            out = global_ids(t)
            self.add("admitted count", int(sampler.mask.sum()))
            self.add("drawn ids", out)
            return out

        def batch(t):
            out = next_batch(t)
            self.add("rows", out)
            return out

        def kept(*args, **kwargs):
            idx = sample(*args, **kwargs)  # (n_ltd, B, r) or None: dense
            if idx is not None and self.drop_step is None:
                self.drop_step = self.step  # its gradients are compared too
            for j, layer in enumerate(layers if idx is not None else []):
                self.add("kept positions", idx[j], f"layer {layer}")
            return idx

        def grads(optimizer, args, kwargs):  # after the backward, before the update
            if self.step == 0 or self.step == self.drop_step:
                for name, p in model.named_parameters():
                    self.add("gradients", p.grad if p.grad is not None else np.nan, name)
        sampler.global_ids, sampler.next_batch, model.sample_ltd_indices = ids, batch, kept
        optimizer.register_step_pre_hook(grads)


# -----------------------------------------------------------------------------
# the runs


def everything(swaps):
    """(n, name, the reference's, the one to run) for all 13: yours where swaps has it."""
    mine = {name: fn for _, name, _, fn in swaps}
    out = []
    for n, concept, name in EXERCISES:
        ref = reference(concept, name)
        out.append((n, name, ref, mine.get(name, ref)))
    return out


def flags(argv):
    """-> (the checked config, the flags of every run): --device=cpu, no sample and no checkpoint
    unless given; what a compare cannot do is a ValueError."""
    import train

    given = train.given(argv)
    for flag in ("out_dir", "resume"):
        if flag in given:
            raise ValueError(f"--{flag}: --compare makes its own runs in {RUN_DIR}/; drop it")
    if "RANK" in os.environ:
        raise ValueError("--compare runs in one process: python -m exercises.train --compare, "
                         "not under torchrun")
    defaults = {"device": "cpu", "sample_tokens": "0", "save_checkpoint": "false"}
    run_argv = [f"--{k}={v}" for k, v in defaults.items() if k not in given] + list(argv)
    return train.parse_args(run_argv), run_argv


def run_once(label, argv, swaps, tape=None):
    """train.py with argv, every exercise recorded (swaps: all 13), its output in
    RUN_DIR/<label>.log -> (Recorder, train's result or None, seconds, None or why it stopped).
    tape: records the calls of your draws (exercises/replay.py). The reference's run must not
    stop (the flags are at fault: a LearnerError); yours may, and is compared up to the stop."""
    import train

    if tape is not None:
        swaps = [(n, name, ref, tape.wrap(name, fn) if name in DRAWS and fn is not ref else fn)
                 for n, name, ref, fn in swaps]
    rec, patch, t0 = Recorder(), Patch(), time.time()
    rec.install(train, swaps, patch)
    argv = argv + [f"--out_dir={os.path.join(RUN_DIR, label)}"]
    log_path = os.path.join(RUN_DIR, label + ".log")
    out, stopped = None, None
    try:
        with open(log_path, "w") as log:
            with contextlib.redirect_stdout(log), contextlib.redirect_stderr(log):
                out = train.train(train.parse_args(argv), train.given(argv))
    except LearnerError as e:  # a function of yours raised
        stopped = str(e)
    except (ValueError, OSError) as e:  # e.g. an empty pool, from what a function of yours gave
        stopped = f"the run '{label}' stopped: {getattr(e, 'line', None) or e} (log: {log_path})"
    except Exception as e:  # noqa: BLE001  (a reference function, fed what one of yours gave)
        if label.startswith("reference"):
            raise
        stopped = f"the run '{label}' stopped: {type(e).__name__}: {e} (log: {log_path})"
    finally:
        patch.undo()
    if stopped and label.startswith("reference"):
        raise LearnerError(stopped)
    seconds = time.time() - t0
    if out:
        print(f"{label}: {out['iter_num']} steps, val loss {out['val_loss']:.4f} in {seconds:.0f} "
              f"s (log: {log_path})", flush=True)
    else:
        print(f"{label}: stopped {rec.when()} after {seconds:.0f} s (log: {log_path})", flush=True)
    return rec, out, seconds, stopped


def up_to(ref, mine):
    """The reference's values where your run has them: a run of yours that stopped is compared
    up to its stop (at the step it stopped in, as many values of a stage as it made)."""
    last = max((step for step, _ in mine), default=None)
    out = {}
    for key, values in ref.items():
        if key[0] == last and key in mine:
            out[key] = values[: len(mine[key])]
        elif last is None or key[0] < last or key in mine:
            out[key] = values
    return out


def tests_fail(name, fn):
    """The first line of the first failing test of exercise `name` on fn, or None: all pass."""
    import pytest

    tx = sys.modules.get("test_exercises")
    if tx is None:
        spec = importlib.util.spec_from_file_location(
            "test_exercises", os.path.join(project_root(), "tests", "test_exercises.py"))
        tx = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(tx)
    fn = fn.__func__ if isinstance(fn, staticmethod) else fn
    for test in tx.TESTS[name]:
        try:
            test(tx.Impl(replace={name: fn}))
        except pytest.fail.Exception as e:
            return str(e).splitlines()[0]
    return None


# -----------------------------------------------------------------------------
# the comparison


def first_difference(mine, ref):
    """-> (stages compared, notes, None or (step, stage, label, yours, reference)), in the order the
    data flows: by step (-1: before step 0), then by stage."""
    keys = sorted(set(mine) | set(ref), key=lambda k: (k[0], ORDER.index(k[1])))
    compared, notes = 0, []
    for step, stage in keys:
        compared += 1
        a, b = mine.get((step, stage), []), ref.get((step, stage), [])
        for i in range(max(len(a), len(b))):
            if i >= len(a) or i >= len(b):
                label = (a or b)[i][0]
                return compared, notes, (step, stage, label, a[i][1] if a[i:] else None,
                                         b[i][1] if b[i:] else None)
            (label, x), (_, y) = a[i], b[i]
            if x.shape == y.shape and x.dtype == y.dtype and np.array_equal(
                    x, y, equal_nan=x.dtype.kind == "f"):
                continue  # subtle: a float 2304.0 is not the integer 2304
            if stage in CLOSE and x.shape == y.shape and np.allclose(x, y, rtol=1e-12, atol=0):
                worst = float(np.max(np.abs(x - y) / np.maximum(np.abs(y), 1e-300)))
                notes.append(f"note: your {stage} ({label or 'all'}) differ from the reference's "
                             f"in the last digits only (at most {worst:.1e} relative, as a sum in "
                             "another order gives): compared as equal")
                continue
            return compared, notes, (step, stage, label, x, y)
    return compared, notes, None


def fmt(v):
    """One element in full: an int as is, a float to its last digit."""
    return repr(float(v)) if np.asarray(v).dtype.kind == "f" else str(v)


def excerpt(v, start, k=6):
    """Up to k elements of the vector v from start: [..., 5, 9, 13, ...]."""
    items = ", ".join(fmt(e) for e in v[start : start + k])
    return f"[{'..., ' if start else ''}{items}{', ...' if start + k < len(v) else ''}]"


def describe(step, stage, label, x, y):
    """'drawn ids at step 0: yours [12, 873, ...], reference [81, 7, ...] (first at [0]: 12 vs
    81)': the row and the elements around the first difference, every float in full."""
    parts = [label] if label else []
    if x is None or y is None:
        yours, ref = ("none" if x is None else "some"), ("none" if y is None else "some")
        ref += " (a run stopped early, or called it less often)"
    elif x.shape != y.shape:
        yours, ref = f"of shape {x.shape}", f"{y.shape}"
    elif x.dtype != y.dtype and np.array_equal(x, y):
        yours, ref = f"{excerpt(x.ravel(), 0)} of dtype {x.dtype}", f"of dtype {y.dtype}"
    elif x.ndim == 0:
        yours, ref = fmt(x), fmt(y)
    else:
        at = tuple(int(i) for i in np.argwhere(~((x == y) | (x != x) & (y != y)))[0])  # NaN = NaN
        row, start = at[:-1], max(0, at[-1] - 2)
        parts += [f"row {', '.join(map(str, row))}"] if row else []
        yours = excerpt(x[row], start)
        ref = f"{excerpt(y[row], start)} (first at {list(at)}: {fmt(x[at])} vs {fmt(y[at])})"
    when = "before step 0" if step < 0 else f"at step {step}"
    where = f"{stage} {when}" + (f" ({', '.join(parts)})" if parts else "")
    return f"{where}: yours {yours}, reference {ref}"


def advice(stage, swaps, calls, notes):
    """Lines on what the stage is and which of your exercises make it, with their tests'
    verdict on yours."""
    what, names = STAGES[stage]
    yours = {name: fn for _, name, _, fn in swaps}
    mine = [name for name in names if name in yours and calls[name]]
    lines = [f"  {stage}: {what}"]
    if stage == "sorted index" and any("scores" in note for note in notes):
        lines.append("  your scores differ in their last digits (the note above), which "
                     "reorders samples whose scores tie or nearly tie: sum as "
                     "neg_log_p[samples].sum(axis=1) does (exercise 2 vocab_rarity) to compare "
                     "the rest")
    if not mine:
        return lines + ["  none of your functions makes it: an earlier difference fed it, or a "
                        "function of yours called inside a reference one"]
    said = {name: tests_fail(name, yours[name]) for name in mine}
    for name in sorted(mine, key=lambda name: said[name] is None):  # failing ones first
        k = f"python -m pytest tests/test_exercises.py --mine -k ex{NUMBER[name]:02d}"
        verdict = f"fails its tests: {said[name]}" if said[name] else "passes its tests"
        lines.append(f"  exercise {NUMBER[name]} {name} (yours {verdict}): {k}")
    return lines


# -----------------------------------------------------------------------------
# compare: the runs, the other random streams, the verdict


def compare_streams(run_argv, swaps, ref):
    """Your run against the reference's recorder ref; a draw of yours that passes its tests, and
    its checks on this run's own calls, but uses the generator differently is said, replaced by
    the reference's, and the run made again.
    -> (your first run's result, its calls, [lines on other streams], first_difference's answer,
    the swaps of the last run, None or why your run stopped)."""
    label, tape = "yours", Tape({name: OWN_CALLS for name in DRAWS})
    rec, out, _, stopped = run_once(label, run_argv + index_flags(swaps, label),
                                    everything(swaps), tape)
    first_out, calls, streams = out, rec.calls, []
    while True:
        values = up_to(ref.values, rec.values) if stopped else ref.values
        compared, notes, diff = first_difference(rec.values, values)
        name = diff and RANDOM.get(diff[1])
        fn = next((f for _, n, _, f in swaps if n == name), None)
        if fn is None or not rec.calls[name] or tests_fail(name, fn):
            return first_out, calls, streams, (compared, notes, diff), swaps, stopped
        broken = own_calls(name, fn, tape)
        if broken:
            return first_out, calls, streams, (compared, notes + [broken], diff), swaps, stopped
        streams.append(f"your {name} (exercise {NUMBER[name]}) passes its tests but uses the "
                       f"random generator differently from the reference's, so no later stage "
                       f"can match: {describe(*diff)}; the reference's {name} stands in for it")
        swaps = [s for s in swaps if s[1] != name]
        label = "yours-with-the-reference's-" + name.replace(".", "-")
        rec, _, _, stopped = run_once(label, run_argv + index_flags(swaps, label),
                                      everything(swaps))


def own_calls(name, fn, tape):
    """None, or a line on how your draw `name` fails what a draw owes on this run's own calls
    (exercises/replay.py: uniform over the bag or the positions, the generator honoured and
    advanced, nothing drawn twice in a pass)."""
    import sampler

    mine = type("Bag", (sampler.Bag,), {"draw": fn}) if name == "Bag.draw" else fn
    try:
        replay(name, mine, tape.calls, tape.arrays)
    except Wrong as e:
        return (f"your {name} (exercise {NUMBER[name]}) passes its tests but not on this run's "
                f"own calls: {e.what}, at {e.call}")
    return None


def spread(cfg, run_argv, ref_out):
    """'the reference's 2.7860 (seed 1337), 2.7795, 2.7881, 2.7912 (seeds 1338-1340)' and the
    range where a run at another seed falls 99 times in 100: mean +- t * sd * sqrt(1 + 1/n) over
    the n = SPREAD_SEEDS + 1 runs (a prediction interval, t of Student's law at n - 1 degrees).

    subtle: not (lowest, highest) of the n runs: a correct draw's run, a run at one more seed,
    falls outside the range of 4 others 2 times in 5."""
    seeds = range(cfg.seed + 1, cfg.seed + 1 + SPREAD_SEEDS)
    losses = [ref_out["val_loss"]]
    for seed in seeds:
        _, out, _, _ = run_once(f"reference-seed{seed}", run_argv + [f"--seed={seed}"],
                                everything([]))
        losses.append(out["val_loss"])
    others = ", ".join(f"{v:.4f}" for v in losses[1:])
    half = T99[len(losses) - 1] * float(np.std(losses, ddof=1)) * (1 + 1 / len(losses)) ** 0.5
    lo, hi = float(np.mean(losses)) - half, float(np.mean(losses)) + half
    line = (f"the reference's {losses[0]:.4f} (seed {cfg.seed}), {others} "
            f"(seeds {seeds[0]}-{seeds[-1]}; 99% of its runs fall in {lo:.4f}-{hi:.4f})")
    return line, (lo, hi)


def index_flags(swaps, label):
    """Your analyzer builds its own index, and so the reference's (to record its stages too)."""
    analyzer = {name for _, concept, name in EXERCISES if concept == "analyzer"}
    if not analyzer & {name for _, name, _, _ in swaps}:
        return []
    return [f"--index_dir={os.path.join(RUN_DIR, 'index-' + label)}"]


def compared_yours(swaps, calls):
    """'yours of exercises 1-6, 8-13': the exercises of yours that ran in your run."""
    ns = [n for n, name, _, _ in swaps if calls[name]]
    runs = []  # [first, last] of each run of consecutive numbers
    for n in ns:
        if runs and n == runs[-1][1] + 1:
            runs[-1][1] = n
        else:
            runs.append([n, n])
    spans = ", ".join(f"{a}-{b}" if b > a else f"{a}" for a, b in runs)
    return f"yours of exercise{'s' * (len(ns) > 1)} {spans}" if ns else "none of yours ran"


def verdict(cfg, run_argv, ref, ref_out, mine_out, streams, result, yours, stopped):
    """Print what the comparison found, the verdict line last -> exit status. yours: which of
    yours were compared; stopped: None, or why your run stopped."""
    compared, notes, diff = result
    for line in streams + notes:
        print(line)
    if stopped and diff:
        print(f"your run then stopped: {stopped}")
    if diff:
        print(f"first difference: {describe(*diff)}")
        return 1
    if stopped:
        print(f"first difference: your run stopped where the reference's went on, every value "
              f"equal until then ({compared} stages compared): {stopped}")
        return 1
    last = max((step for step, _ in ref.values), default=-1)
    same = f"identical to the reference through step {last} ({compared} stages compared)"
    if not streams:
        print(f"{same}: {yours}")
        return 0
    print(f"the rest of yours, with the reference's draw in its place: {same}")
    line, (lo, hi) = spread(cfg, run_argv, ref_out)
    inside = lo <= mine_out["val_loss"] <= hi
    print(f"another random stream, which no test finds wrong: val loss after "
          f"{mine_out['iter_num']} steps yours {mine_out['val_loss']:.4f}, {line}: yours is "
          f"{'inside' if inside else 'outside'} their range")
    if inside:
        return 0
    draws = ", ".join(s.split(" (exercise")[0].removeprefix("your ") for s in streams)
    print(f"first difference: val loss after {mine_out['iter_num']} steps: yours "
          f"{mine_out['val_loss']:.4f}, outside {lo:.4f}-{hi:.4f}, where the reference's runs fall "
          f"99 times in 100: your {draws} draws otherwise than a uniform draw should")
    return 1


def compare_all(argv, mine=None):
    """--compare --all: the flag sets of exercises/flagsets.py in turn (the replay tier's), your
    flags after theirs, one verdict each and a last line for all -> exit status."""
    global RUN_DIR  # subtle: each set's runs in a folder of their own, set back after
    root, differ = RUN_DIR, []
    shutil.rmtree(root, ignore_errors=True)
    try:
        for label in FLAG_SETS:
            print(f"== --compare --all: flag set {label}", flush=True)
            RUN_DIR = os.path.join(root, label)
            run_argv = argv_of(label, None, os.path.join(root, "configs")) + list(argv)
            if main(run_argv, mine):
                differ.append(label)
    finally:
        RUN_DIR = root
    n = len(FLAG_SETS)
    if differ:
        print(f"--compare --all: {len(differ)} of {n} flag sets differ: {', '.join(differ)}")
        return 1
    print(f"--compare --all: all {n} flag sets agree with the reference (identical, or another "
          "random stream inside its seed spread)")
    return 0


def main(argv, mine=None):
    """python -m exercises.train --compare [train.py flags] -> exit status (0: identical, or
    another random stream; 1: a difference, or bad input). mine: {concept: module} (tests)."""
    if "--all" in argv:
        return compare_all([a for a in argv if a != "--all"], mine)
    try:
        swaps = learner_swaps(mine)
        cfg, run_argv = flags(argv)
    except (LearnerError, ValueError) as e:
        print(f"exercises.train --compare: {e}")
        return 1
    if not swaps:
        print("exercises.train --compare: every exercise is still a stub: nothing of yours to "
              "compare (fill one in exercises/*.py)")
        return 1
    shutil.rmtree(RUN_DIR, ignore_errors=True)
    os.makedirs(RUN_DIR)
    print("exercises.train --compare: yours:", ", ".join(f"{n} {name}" for n, name, _, _ in swaps))
    print("exercises.train --compare: the reference's (still stubs):", stubs_line(swaps))
    try:
        ref, ref_out, _, _ = run_once("reference", run_argv + index_flags(swaps, "reference"),
                                      everything([]))
        mine_out, calls, streams, result, last, stopped = compare_streams(run_argv, swaps, ref)
        print(ran(swaps, calls))
        status = verdict(cfg, run_argv, ref, ref_out, mine_out, streams, result,
                         compared_yours(swaps, calls), stopped)
    except LearnerError as e:
        print(f"exercises.train --compare: {e}")
        return 1
    if result[2]:
        print("\n".join(advice(result[2][1], last, calls, result[1])))
    elif stopped:  # nothing of yours differed before the stop: those failing their tests
        print("\n".join(failing(last, calls)))
    return status


def failing(swaps, calls):
    """Lines naming each exercise of yours that ran and fails its tests (after a run that stopped
    with every recorded value equal: an input changed in place, say)."""
    lines = []
    for n, name, _, fn in swaps:
        said = calls[name] and tests_fail(name, fn)
        if said:
            lines.append(f"  exercise {n} {name} (yours fails its tests: {said}): python -m pytest "
                         f"tests/test_exercises.py --mine -k ex{n:02d}")
    return lines or ["  every exercise of yours that ran passes its tests: read the error above"]
