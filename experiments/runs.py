"""
train.py runs for the experiments: in this process, or N at once, each in a process of its own.

    run_all(runs, jobs)    many, one after another in this process (jobs 1) or `jobs` at once as
                           `python -m experiments.runs LOG DEVICE FLAGS...`, the same results;
                           each finished run leaves summary.json beside its train.log
    finished_runs(runs)    those of runs whose summary.json has their flags and today's code

Ctrl-C or SIGTERM stops run_all with GridStopped: the finished runs are kept, the running ones are
stopped after their step (train.py's own SIGTERM handling), and the same command goes on from
there. Shared by experiments/reproduce.py and experiments/autoscale.py, with the one-pass refusal
and the parsing of their lists of numbers.
"""

import contextlib
import fractions
import glob
import hashlib
import importlib
import json
import os
import signal
import subprocess
import sys
import time
import traceback

import numpy as np
import torch

import train
from services import ds_config
from support import launch
from support.launch import parse
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
    seeds = ds_config.int_list("seeds", text)
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


def cli(run, cls, prog, doc, argv):
    """run(argv parsed into the dataclass cls; --help shows doc's command lines), bad input as
    one line ("error: ..."; a stop's own line), exit 1."""
    try:
        return run(parse(cls, sys.argv[1:] if argv is None else argv, prog, doc.split("\n\n")[1]))
    except (GridStopped, ValueError, OSError) as e:
        print(e if isinstance(e, GridStopped) else f"error: {e}", file=sys.stderr)
        sys.exit(1)


def flag(args, key):
    return next(a.split("=", 1)[1] for a in reversed(args) if a.startswith(f"--{key}="))


# --- a finished run's summary.json: reused while its flags and the training code are the same ---


def code_version():
    """What a finished run's numbers depend on: a sha256 of the code train.py runs (the top-level
    .py files, support/, services/ and autoscale/) and torch's version. A run is reused only under
    the same."""
    h = hashlib.sha256(torch.__version__.encode())
    paths = [path for folder in ("", "support", "services", "autoscale")
             for path in glob.glob(os.path.join(ROOT, folder, "*.py"))]  # "": the top level
    for path in sorted(paths):
        h.update(os.path.relpath(path, ROOT).encode())
        with open(path, "rb") as f:
            h.update(f.read())
    return h.hexdigest()


def finished_runs(runs):
    """runs [(key, args, log, title)] -> {key: summary} of those an earlier grid finished: a
    summary.json beside log with the same flags and code_version()."""
    done = {}
    for key, args, log, title in runs:
        try:
            with open(os.path.join(os.path.dirname(log), "summary.json")) as f:
                record = json.load(f)
        except (OSError, ValueError):  # none yet, or damaged: the run runs again
            continue
        if record.get("flags") == list(args) and record.get("code") == code_version():
            done[key] = record["summary"]
    return done


def execute(args, log, device=None):
    """One run in this process (on device, or train.py's choice), all it prints (and any
    traceback) in the file log -> whether it finished; its summary is saved as summary.json beside
    log: the numbers the tables need (seconds = wall-clock without the evaluations, which differ in
    number between budgets), its flags and the code's version. A signal that stopped it is raised
    (launch.Stopped)."""
    os.makedirs(os.path.dirname(log), exist_ok=True)
    path = os.path.join(os.path.dirname(log), "summary.json")
    with contextlib.suppress(FileNotFoundError):
        os.remove(path)  # an older run's
    with open(log, "w") as f, contextlib.redirect_stdout(f), contextlib.redirect_stderr(f):
        try:
            # without --device, train.py picks cuda:LOCAL_RANK on a GPU machine, else the CPU
            out = train.train(train.parse_args(args + ([f"--device={device}"] if device else [])))
        except launch.Stopped:
            raise
        except Exception:  # any failure: the grid stops, naming this run and its log
            traceback.print_exc()
            return False
    keys = ("val_loss", "iter_num", "raw_tokens", "effective_tokens", "time", "eval_time")
    out = {**{k: out[k] for k in keys}, "evals": [list(e) for e in out["evals"]],
           "seconds": out["time"] - out["eval_time"]}
    record = {"flags": list(args), "code": code_version(), "summary": out}
    atomic_write(path, lambda f: f.write(json.dumps(record, indent=1).encode()))
    return True


def finished(run, rc):
    """A run's summary, printed in one line; a failed run (rc, its exit status, not 0) stops the
    grid in one line naming it, the last line of its log (the error) or the signal that killed it
    (out of memory), and the log."""
    key, args, log, title = run
    if rc:
        with open(log) as f:
            lines = [line.strip() for line in f if line.strip()] or ["no output"]
        why = lines[-1] if rc > 0 else f"its process was killed by signal {-rc}"
        raise ValueError(f"{title} failed ({why}); its log: {log}")
    out = finished_runs([run])[key]
    print(f"{title}: val loss {out['val_loss']:.4f}, {out['iter_num']} steps, "
          f"{out['seconds']:.1f} s", flush=True)
    return out


def interrupt(signum, frame):
    raise KeyboardInterrupt  # SIGTERM stops a grid as Ctrl-C does


def run_all(runs, jobs):
    """runs [(key, args, log, title)] -> {key: summary}: one after another here (jobs 1), or
    `jobs` at once, each in a fresh process (a GPU each on a GPU machine: cuda:k for slot k), the
    longest runs first (the last to end are short); the same results. Ctrl-C or SIGTERM ->
    GridStopped, the runs finished so far saved."""
    runs = sorted(runs, key=lambda run: -int(flag(run[1], "max_tokens")))
    done, busy = {}, {}  # busy: slot k -> (its process, its run)
    old = signal.signal(signal.SIGTERM, interrupt)
    gpus = torch.cuda.device_count()
    try:
        # subtle: the first optimizer imports torch._dynamo (seconds): here, before the first
        # run, so that no run's wall-clock pays for it
        importlib.import_module("torch._dynamo")
        if jobs == 1:  # the plain version: in this process
            for run in runs:
                done[run[0]] = finished(run, 0 if execute(run[1], run[2]) else 1)
        todo = list(runs) if jobs > 1 else []
        while todo or busy:
            for k in range(jobs):
                if k not in busy and todo:
                    run = todo.pop(0)
                    device = f"cuda:{k % gpus}" if gpus else "cpu"
                    cmd = [sys.executable, "-m", "experiments.runs", run[2], device, *run[1]]
                    busy[k] = (subprocess.Popen(cmd, cwd=ROOT), run)
            time.sleep(0.2)
            for k, (p, run) in list(busy.items()):
                if p.poll() is not None:
                    del busy[k]
                    done[run[0]] = finished(run, p.returncode)
    except (KeyboardInterrupt, launch.Stopped):
        stop(busy)  # subtle: a run may have saved its summary as the signal came: count them all
        raise GridStopped(f"stopped: {len(finished_runs(runs))} of the {len(runs)} runs to do "
                          "finished, each saved beside its train.log; the same command goes on "
                          "from there (--fresh starts afresh)") from None
    finally:
        signal.signal(signal.SIGTERM, old)
        stop(busy)
    return done


def stop(busy):
    """SIGTERM to each running run's process (train.py stops after its step), then wait for it."""
    for p, _ in busy.values():
        p.terminate()
    for p, _ in busy.values():
        p.wait()
    busy.clear()


if __name__ == "__main__":  # a run of --jobs: python -m experiments.runs LOG DEVICE FLAGS...
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the grid's: it sends SIGTERM
    importlib.import_module("torch._dynamo")  # (see run_all)

    try:
        sys.exit(0 if execute(sys.argv[3:], sys.argv[1], sys.argv[2]) else 1)
    except launch.Stopped:
        sys.exit(1)
