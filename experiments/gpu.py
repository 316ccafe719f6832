"""
Issue 48's check on one GPU, in one command that writes everything it prints to a log folder:

    python -m experiments.gpu LOG_DIR              # one GPU: at most 9 minutes
    python -m experiments.gpu LOG_DIR --size=tiny  # the same steps on a CPU, about a minute

    0. data.py --installed, when data/installed is missing (gpu size only);
    1. python -m pytest -q tests/test_cuda.py tests/test_model.py tests/test_random_ltd.py
       (tiny: -m "not slow");
    2. python bench.py ltd compiled at GPT-2 small (12 x 768, T 1024, batch 16, vocab 50304, bf16):
       random-LTD's efficiency at keep 0.75 / 0.5 / 0.25 and tokens/s, the dense model's in the
       keep-1 row; python bench.py dense at the same shape: a whole training step (AdamW), eager;
    3. python reproduce.py --size=gpu (6 x 512, T 256, about 20M parameters) on data/installed:
       the baseline and the composition (CL_seqtru_voc + random-LTD, the project's defaults), one
       seed, at 50, 70 and 100% of 33M effective tokens, each its own run, LR 1e-3: the speedup to
       the baseline's 100% val loss in effective tokens and in wall-clock.

LOG_DIR gets gpu.log (all of it: the machine, each step's command, output, seconds and exit
status, then the lines that answer the issue), a log per step and reproduce/ (each run's train.log
and summary.json). A step that fails or runs out of its time (CAPS, and 9 minutes for all) is
reported and the next one runs; the exit status is 1 if any failed.

But:
- the reproduce step trains without torch.compile (a compile per run would cost more than it
  saves in runs this short) and with the LR of nanoGPT-sized models, not reproduce.py's LRS (CPU);
- tiny runs each step at a toy size on --data_dir (default: the standard library's corpus).
"""

import argparse
import os
import platform
import re
import shlex
import subprocess
import sys
import time

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # the repository
TESTS = ["tests/test_cuda.py", "tests/test_model.py", "tests/test_random_ltd.py"]
COMPOSED = "CL_seqtru_voc + random-LTD"
GPT2_SMALL = ["--n_layer=12", "--n_head=12", "--n_embd=768", "--block_size=1024",
              "--batch_size=16", "--vocab_size=50304"]
TOY = ["--n_layer=4", "--n_head=2", "--n_embd=32", "--block_size=64", "--batch_size=4"]
SIZES = {  # each step's flags, and the seconds all steps may take
    "gpu": {"pytest": [], "ltd": GPT2_SMALL + ["--modes=compiled"],
            "dense": GPT2_SMALL + ["--iters=20"], "reproduce": ["--size=gpu", "--lr=1e-3"],
            "data_dir": "data/installed", "budget": 540},
    "tiny": {"pytest": ["-m", "not slow"], "ltd": TOY + ["--modes=eager", "--iters=2"],
             "dense": TOY + ["--iters=3"], "reproduce": ["--size=tiny", "--lr=4e-3"],
             "data_dir": "", "budget": 300},
}
CAPS = {"0_data": 90, "1_pytest": 120, "2_bench_ltd": 150, "2_bench_dense": 40}  # seconds at most:
# what is left of the budget goes to reproduce.py


def run_step(name, cmd, log_dir, log, deadline):
    """cmd from the repository root, its output in log_dir/name.log, then copied to log and
    stdout with its seconds and exit status; killed at the deadline or after CAPS[name] seconds
    -> whether it succeeded."""
    path = os.path.join(log_dir, f"{name}.log")
    t0 = time.time()
    with open(path, "w") as f:
        try:
            rc = subprocess.run(cmd, cwd=ROOT, stdout=f, stderr=subprocess.STDOUT, timeout=max(
                1.0, min(deadline - t0, CAPS.get(name, float("inf"))))).returncode
        except subprocess.TimeoutExpired:
            rc = "killed: out of its time"
    with open(path) as f:
        text = f.read()
    say(log, f"\n=== {name}: {shlex.join(cmd)}\n{text.rstrip()}\n"
             f"=== {name}: exit status {rc}, {time.time() - t0:.0f} s")
    return rc == 0


def say(log, text):
    print(text, flush=True)
    log.write(text + "\n")
    log.flush()


def answers(log_dir):
    """The lines that answer the issue, from the steps' logs: pytest's count, bench.py ltd's rows
    (efficiency per keep, tokens/s), bench.py dense's row of ours, and the speedup row of the
    composition in reproduce.py's table."""
    def lines(name, keep):
        try:
            with open(os.path.join(log_dir, f"{name}.log")) as f:
                return [line.rstrip() for line in f if keep(line)]
        except OSError:
            return []

    return (lines("1_pytest", lambda s: " passed" in s or " failed" in s or "error" in s)[-1:]
            + lines("2_bench_ltd", lambda s: s.split()[:1] in (["mode"], ["eager"], ["compiled"]))
            + lines("2_bench_dense", lambda s: s.startswith(("ours ", "dense training step")))
            + lines("3_reproduce", lambda s: re.match(r"speedup to the baseline's 100% val loss \d",
                                                      s) or "2x (Table 7)" in s))


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m experiments.gpu", description=__doc__.split(
        "\n\n")[1], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("log_dir", help="the folder every output goes to (made if missing)")
    p.add_argument("--size", default="gpu", choices=SIZES, help="gpu (default) or tiny (a CPU)")
    p.add_argument("--data_dir", help="reproduce.py's corpus (gpu: data/installed; tiny: \"\")")
    a = p.parse_args(argv)
    s, py = SIZES[a.size], sys.executable
    data_dir = s["data_dir"] if a.data_dir is None else a.data_dir
    os.makedirs(a.log_dir, exist_ok=True)
    steps = {"1_pytest": [py, "-m", "pytest", "-q", *TESTS, *s["pytest"]],
             "2_bench_ltd": [py, "bench.py", "ltd", *s["ltd"]],
             "2_bench_dense": [py, "bench.py", "dense", *s["dense"]],
             "3_reproduce": [py, "reproduce.py", *s["reproduce"], f"--data_dir={data_dir}",
                             f"--out_dir={os.path.join(os.path.abspath(a.log_dir), 'reproduce')}",
                             f"--cases=baseline,{COMPOSED}", "--seeds=1337",
                             "--fractions=0.5,0.7,1"]}
    if data_dir == "data/installed" and not os.path.exists(f"{ROOT}/{data_dir}/meta.json"):
        steps = {"0_data": [py, "data.py", "--installed"], **steps}
    deadline = time.time() + s["budget"]
    # subtle: a copy of the working tree on a lent machine may have no .git, or no git
    commit = subprocess.run("git describe --always --dirty 2>/dev/null || echo unknown", cwd=ROOT,
                            shell=True, text=True, capture_output=True).stdout.strip()
    gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "no GPU"
    with open(os.path.join(a.log_dir, "gpu.log"), "w") as log:
        say(log, f"experiments.gpu --size={a.size}: {time.strftime('%Y-%m-%d %H:%M:%S %Z')}, "
                 f"commit {commit}, {gpu}, torch {torch.__version__}, Python "
                 f"{platform.python_version()}, {os.cpu_count()} cores; {s['budget']} s for all")
        failed = [name for name, cmd in steps.items()
                  if not run_step(name, cmd, a.log_dir, log, deadline)]
        say(log, "\n=== the answers\n" + "\n".join(answers(a.log_dir)))
        say(log, f"failed: {', '.join(failed)}" if failed else "every step succeeded")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
