"""Experiments and benchmarks, each one command from the repository root: python reproduce.py (the
papers' claims at small scale, experiments/reproduce.py), python bench.py (side-by-side timings,
experiments/bench.py), python -m experiments.autoscale (AutoScale's mixtures), python -m
experiments.gpu LOG_DIR (the check on one GPU: its tests, bench.py ltd, reproduce.py at ~20M
parameters) and python -m experiments.figures (the slides' PNGs in docs/figures/, with
matplotlib)."""
