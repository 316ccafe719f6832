"""
train.py runs for the experiments: one here, or N at once in their own processes; their flags.

    train_run(args, log)   one run from its --key=value flags -> (config, train.train's results)
    run_all(runs, jobs)    many, one after another (jobs 1) or `jobs` at once, the same results;
                           each finished run leaves summary.json beside its train.log
    finished_runs(runs)    those of runs whose summary.json has their flags and today's code

Ctrl-C or SIGTERM stops run_all with GridStopped: the finished runs are kept, the running ones are
stopped after their step, and the same command goes on from there. Shared by
experiments/reproduce.py and experiments/autoscale.py, with the one-pass refusal and the parsing of
their lists of numbers.
"""

import contextlib
import fractions
import glob
import hashlib
import json
import multiprocessing
import os
import queue
import signal
import sys
import traceback

import numpy as np
import torch

import config
import train
from support import launch
from support.cli import parse
from support.files import atomic_write

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # the repository


class GridStopped(Exception):
    """Ctrl-C or SIGTERM stopped a grid; the message says what was kept and how to go on."""


def numbers(name, text):
    """'1/3,3' -> [0.333.., 3.0]: comma-separated numbers or fractions."""
    try:
        return [float(fractions.Fraction(s)) for s in text.split(",") if s.strip()]
    except (ValueError, ZeroDivisionError):
        raise ValueError(f"--{name}={text!r} must be comma-separated numbers or fractions, "
                         "e.g. 1/3,3") from None


def seed_list(text):
    seeds = config.int_list("seeds", text)
    if not seeds or len(set(seeds)) != len(seeds):
        raise ValueError(f"--seeds={text!r} must list one or more distinct seeds, e.g. --seeds=1,2")
    return seeds


def check_passes(amounts, have, names, what, fix):
    """Refuse a plan that would draw any of names' training tokens (have) more than once:
    data never repeats."""
    passes = np.asarray(amounts, dtype=np.float64) / np.asarray(have, dtype=np.float64)
    k = int(np.argmax(passes))
    if passes[k] > 1:
        raise ValueError(f"{what} would draw {amounts[k]:,.0f} tokens of {names[k]}, "
                         f"{passes[k]:.2f} passes over its {have[k]:,.0f} training tokens "
                         f"(data would repeat); {fix}")


def train_run(args, log=None):
    """One train.py run from its --key=value flags, printing to stdout or to the file log
    -> (config, results). Without --device, train.py picks cuda:LOCAL_RANK on a GPU machine,
    else the CPU."""
    cfg = config.parse_args(args)
    log_file = open(log, "w") if log else contextlib.nullcontext(sys.stdout)
    with log_file as f, contextlib.redirect_stdout(f):
        return cfg, train.train(cfg)


def cli(run, cls, prog, doc, argv):
    """run(argv parsed into the dataclass cls; --help shows doc's command lines), bad input as
    one line, exit 1."""
    try:
        return run(parse(cls, sys.argv[1:] if argv is None else argv, prog, doc.split("\n\n")[1]))
    except GridStopped as e:
        print(e, file=sys.stderr)
        sys.exit(1)
    except (ValueError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(1)


def flag(args, key):
    return next(a.split("=", 1)[1] for a in reversed(args) if a.startswith(f"--{key}="))



# --- --jobs: runs at once, each in its own process ---------------------------------------------


def summary(out):
    """The numbers the tables need from train.train's dict (its model and data stay behind);
    seconds = wall-clock without the evaluations, which differ in number between budgets; evals
    as lists, as summary.json gives them back."""
    keys = ("val_loss", "iter_num", "raw_tokens", "effective_tokens", "time", "eval_time")
    return {**{k: out[k] for k in keys}, "evals": [list(e) for e in out["evals"]],
            "seconds": out["time"] - out["eval_time"]}


def code_version():
    """What a finished run's numbers depend on: a sha256 of the code train.py runs (the top-level
    .py files, support/, services/ and autoscale/) and torch's version. A run is reused only under
    the same."""
    h = hashlib.sha256(torch.__version__.encode())
    folders = ("support", "services", "autoscale")
    paths = glob.glob(os.path.join(ROOT, "*.py"))
    for folder in folders:
        paths += glob.glob(os.path.join(ROOT, folder, "*.py"))
    for path in sorted(paths):
        h.update(os.path.relpath(path, ROOT).encode())
        with open(path, "rb") as f:
            h.update(f.read())
    return h.hexdigest()


def save_finished(args, log, out):
    """summary.json beside log: the run's flags, the code's version and its summary."""
    record = {"flags": list(args), "code": code_version(), "summary": out}
    atomic_write(os.path.join(os.path.dirname(log), "summary.json"),
                 lambda f: f.write(json.dumps(record, indent=1).encode()))


def finished_runs(runs):
    """runs [(key, args, log, title)] -> {key: summary} of those an earlier grid finished: a
    summary.json beside log with the same flags and code_version()."""
    done = {}
    for key, args, log, title in runs:
        path = os.path.join(os.path.dirname(log), "summary.json")
        try:
            with open(path) as f:
                record = json.load(f)
        except (OSError, ValueError):  # none yet, or damaged: the run runs again
            continue
        if record.get("flags") == list(args) and record.get("code") == code_version():
            done[key] = record["summary"]
    return done


def execute(args, log):
    """One run, all it prints (and any traceback) in the file log -> (summary, error), one None;
    a signal that stopped it is raised (launch.Stopped)."""
    os.makedirs(os.path.dirname(log), exist_ok=True)
    with contextlib.suppress(FileNotFoundError):
        os.remove(os.path.join(os.path.dirname(log), "summary.json"))  # an older run's
    with open(log, "w") as f, contextlib.redirect_stdout(f), contextlib.redirect_stderr(f):
        try:
            return summary(train_run(args)[1]), None
        except launch.Stopped:
            raise
        except Exception as e:  # any failure: the grid stops, naming this run and its log
            traceback.print_exc()
            return None, f"{type(e).__name__}: {e}"


def preload():
    """subtle: torch's first optimizer imports torch._dynamo (seconds): imported here, before the
    first run, so that no run's wall-clock pays for it."""
    import torch._dynamo  # noqa: F401


def worker(k, device, tasks, results):
    """Process k of --jobs: runs (args, log) from its queue tasks on device until None, or until
    the grid's process is gone (subtle: a killed grid sends no None: an orphan would wait on).
    Ctrl-C is the grid's to handle: its SIGTERM stops a run here after its step."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    preload()
    parent = os.getppid()
    while os.getppid() == parent:
        try:
            task = tasks.get(timeout=1)
        except queue.Empty:
            continue
        if task is None:
            return
        args, log = task
        try:
            results.put((k, *execute(args + [f"--device={device}"], log)))
        except launch.Stopped:  # the grid stopped: it waits for no result
            return


def finished(args, title, log, out, error):
    """A run's summary, printed in one line and saved beside its log; a failed run stops the grid,
    naming it and its log."""
    if error:
        raise ValueError(f"{title} failed ({error.strip().splitlines()[0]}); its log: {log}")
    save_finished(args, log, out)
    print(f"{title}: val loss {out['val_loss']:.4f}, {out['iter_num']} steps, "
          f"{out['seconds']:.1f} s", flush=True)
    return out


def next_result(results, procs, busy):
    """The next (worker, summary, error) from results; a ValueError when a busy worker died."""
    while True:
        try:
            return results.get(timeout=1)
        except queue.Empty:
            for k, (*_, log, title) in busy.items():
                if procs[k].exitcode is not None:  # killed (out of memory, a signal) mid-run
                    raise ValueError(f"{title} failed (its process ended with exit code "
                                     f"{procs[k].exitcode}); its log: {log}") from None


def interrupt(signum, frame):
    raise KeyboardInterrupt  # SIGTERM stops a grid as Ctrl-C does


def run_all(runs, jobs):
    """runs [(key, args, log, title)] -> {key: summary}: one after another here (jobs 1), or in
    `jobs` processes, the longest runs first (the last to end are short); the same results.
    Ctrl-C or SIGTERM -> GridStopped, the runs finished so far saved."""
    runs = sorted(runs, key=lambda run: -int(flag(run[1], "max_tokens")))
    done = {}
    old = signal.signal(signal.SIGTERM, interrupt)
    try:
        if jobs == 1:  # the plain version: in this process
            preload()
            for key, args, log, title in runs:
                done[key] = finished(args, title, log, *execute(args, log))
        else:
            run_in_processes(runs, jobs, done)
    except (KeyboardInterrupt, launch.Stopped):
        raise GridStopped(f"stopped: {len(done)} of the {len(runs)} runs to do finished, each "
                          "saved beside its train.log; the same command goes on from there "
                          "(--fresh starts afresh)") from None
    finally:
        signal.signal(signal.SIGTERM, old)
    return done


def run_in_processes(runs, jobs, done):
    """run_all's runs in `jobs` worker processes; done gets each run's summary as it ends."""
    ctx = multiprocessing.get_context("spawn")  # subtle: a forked child inherits torch's threads
    gpus = torch.cuda.device_count()
    results = ctx.Queue()
    tasks = []
    procs = []
    for k in range(jobs):
        device = f"cuda:{k % gpus}" if gpus else "cpu"  # a GPU each (shared past the GPU count)
        tasks.append(ctx.Queue())
        procs.append(ctx.Process(target=worker, args=(k, device, tasks[k], results)))
        procs[k].start()
    todo = list(runs)
    busy = {}  # busy: worker k -> (key, args, log, title) of its run
    try:
        while todo or busy:
            for k in range(jobs):
                if k not in busy and todo:
                    busy[k] = todo.pop(0)
                    tasks[k].put(busy[k][1:3])  # (args, log)
            k, out, error = next_result(results, procs, busy)
            key, args, log, title = busy.pop(k)
            done[key] = finished(args, title, log, out, error)
    finally:
        for k in range(jobs):
            tasks[k].put(None)  # an idle worker ends at once
            if k in busy:  # still running when the grid stops: SIGTERM stops it after its step
                procs[k].terminate()
        for p in procs:
            p.join(timeout=60)
            if p.is_alive():
                p.kill()
