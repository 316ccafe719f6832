"""Benchmarks printed side by side: python bench.py {ltd,dense}
(the code: experiments/bench.py)."""

from experiments.bench import main

if __name__ == "__main__":
    main()
