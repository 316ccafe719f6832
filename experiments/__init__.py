"""Experiments and benchmarks, each one command from the repository root: python reproduce.py (the
papers' claims at small scale, experiments/reproduce.py) and python bench.py (side-by-side timings,
experiments/bench.py)."""
