"""
Figures for slides, drawn by the concept files' own functions over train.py's default run
(`python -m experiments.figures [--out=docs/figures]`), one PNG each, its caption in the picture:

    schedules.png    d(t) of fixed_linear, fixed_root and fixed_discrete (a percentile of
                     max_difficulty 100), and the sequence-length curriculum in tokens (--seqlen)
    random_ltd.png   random-LTD's kept length r(t) in tokens and the layer tokens saved so far
    kept_tokens.png  which positions each layer keeps in one step (model.sample_ltd_indices)

The schedules are the ones a train.py run builds from its flags (services/ds_config.py's
data_efficiency), the layer tokens model.layer_tokens; nothing here repeats a formula.

But:
- matplotlib is optional (the project does not need it): without it this prints one line naming
  `pip install matplotlib` and writes nothing; the text demos (python scheduler.py, python
  random_ltd.py) show the same numbers;
- fixed_discrete's stages (10, 50, 100 until steps 200, 400) are scheduler.py's demo's example:
  train.py has no default for them.
"""

import os
from dataclasses import dataclass

import numpy as np
import torch

import train
from experiments import runs
from model import GPT, GPTConfig
from scheduler import CurriculumScheduler
from services import ds_config
from support.launch import opt

KINDS = {"fixed_linear": [], "fixed_root": [],
         "fixed_discrete": ["--cl_discrete_difficulty=10,50,100", "--cl_discrete_max_step=200,400"]}


@dataclass
class FigureConfig:
    out: str = opt("docs/figures", "folder the three PNGs are written to")


def run_schedules(flags):
    """-> ({metric: CurriculumScheduler}, RandomLTDScheduler or None) of `train.py FLAGS`, built
    as train.py builds them (its defaults: 1500 steps, T = 128, 4 layers, batch 16)."""
    run = train.parse_args(flags)
    metrics, ltd = ds_config.data_efficiency(run, run.batch_size, [])
    return {name: CurriculumScheduler(entry) for name, entry in metrics.items()}, ltd


def caption(fig, title, text):
    """A title above and one caption line below: what the figure shows, in which units."""
    fig.suptitle(title)
    fig.text(0.5, 0.01, text, ha="center", fontsize=9)
    fig.tight_layout(rect=(0, 0.05, 1, 1))


def draw_schedules(fig, run):
    """d(t) of each schedule_type (left) and the --seqlen length in tokens (right), t = 1 .. the
    run's steps: get_difficulty(t), what DeepSpeed's sampler asks at step t."""
    steps = np.arange(1, run.max_iters + 1)
    ax, ax_len = fig.subplots(1, 2)
    for kind, more in KINDS.items():
        sched = run_schedules(["--cl_metric=vocab_rarity", f"--cl_schedule={kind}", *more])[0]
        ax.plot(steps, [sched["vocab_rarity"].get_difficulty(t) for t in steps], label=kind)
    ax.set(xlabel="optimizer step t", ylabel="d(t): percentile admitted (of 100)")
    ax.legend()
    seqlen = run_schedules(["--seqlen=truncate"])[0]["seqlen_truncate"]
    ax_len.plot(steps, [seqlen.get_difficulty(t) for t in steps], color="C3")
    ax_len.set(xlabel="optimizer step t", ylabel="sequence length (tokens)")
    caption(fig, f"Curriculum pacing over train.py's default run ({run.max_iters} steps)",
            "left: d(t) admits the easiest d% of the windows (fixed_discrete: scheduler.py's "
            "example stages); right: --seqlen, 16..128 tokens")


def draw_random_ltd(fig, run, model):
    """r(t) of train.py --random_ltd (min(r, T) as train.py's kept_length, t = 0 .. steps-1) and
    the share of the dense run's layer tokens saved up to t (model.layer_tokens, as train.budget
    counts); only the model's dropping layers (model.py's default: 1 .. L-2) matter, not its
    width."""
    ltd = run_schedules(["--random_ltd"])[1]
    steps = np.arange(run.max_iters)
    kept = [min(ltd.get_value(t), run.block_size) for t in steps]  # as train.py's kept_length
    spent = np.cumsum([model.layer_tokens(run.batch_size, run.block_size, r) for r in kept])
    saved = 100 * (1 - spent / (model.layer_tokens(run.batch_size, run.block_size, None)
                                * (steps + 1)))
    ax = fig.subplots()
    ax.plot(steps, kept)
    ax.set(xlabel="optimizer step t", ylabel=f"blue: kept r(t), tokens of T = {run.block_size}")
    right = ax.twinx()
    right.plot(steps, saved, color="C1")
    right.set(ylabel="orange: % of the dense layer tokens saved so far")
    caption(fig, f"Random-LTD over train.py --random_ltd ({run.max_iters} steps): {saved[-1]:.1f}% "
            "of the layer tokens saved in all", "layers 1..L-2 keep r(t) tokens: r grows from T/4 "
            "to T over 60% of the steps, so each step saves less")


def draw_kept_tokens(fig, model, B=2, T=64, r=16, seed=0):
    """Kept (dark) and dropped (light) positions of each layer and sample in one step: the draw
    of random_ltd.py's demo (its B, T, r and seed), here through model.sample_ltd_indices."""
    idx = model.sample_ltd_indices(B, T, r, torch.Generator().manual_seed(seed))  # (n_ltd, B, r)
    grid = np.ones((model.config.n_layer, B, T))  # the other layers see every token
    for j, layer in enumerate(sorted(model.ltd_layers)):  # row j of idx: the j-th dropping layer
        grid[layer] = 0
        np.put_along_axis(grid[layer], idx[j].numpy(), 1, axis=1)
    ax = fig.subplots()
    ax.imshow(grid.reshape(-1, T), cmap="Blues", vmin=-0.2, aspect="auto", interpolation="none")
    ax.set_yticks(range(grid.shape[0] * B), [f"layer {i // B}, sample {i % B}"
                                             for i in range(grid.shape[0] * B)])
    ax.set_xlabel(f"token position (of T = {T})")
    caption(fig, f"Random-LTD: the positions each layer keeps in one step (r = {r} of {T})",
            "dark = kept (the block ran on it), light = dropped (passed through); layers 0 and "
            "L-1 keep every token; the kept stay in order")


def write_figures(cfg):
    """Draw the three figures, then write them into cfg.out (nothing written if one fails)
    -> {name: matplotlib Figure}."""
    try:
        from matplotlib.figure import Figure  # optional: imported only here
    except ImportError:
        raise ValueError("the figures need matplotlib, which is not installed: pip install "
                         "matplotlib (the text demos need none: python scheduler.py)") from None
    run = train.parse_args([])  # train.py's defaults
    model = GPT(GPTConfig(n_layer=run.n_layer, n_head=1, n_embd=8))  # only its layers count here
    figs = {name: Figure(figsize=(10, 4)) for name in ("schedules", "random_ltd", "kept_tokens")}
    draw_schedules(figs["schedules"], run)
    draw_random_ltd(figs["random_ltd"], run, model)
    draw_kept_tokens(figs["kept_tokens"], model)
    os.makedirs(cfg.out, exist_ok=True)
    for name, fig in figs.items():
        path = os.path.join(cfg.out, f"{name}.png")
        fig.savefig(path, dpi=100)
        print(f"wrote {path}: {fig.get_suptitle()}")
    return figs


def main(argv=None):
    return runs.cli(write_figures, FigureConfig, "-m experiments.figures", __doc__, argv)


if __name__ == "__main__":
    main()
