"""Benchmarks printed side by side: python bench.py {analyzer,sampler,ltd,dense,prepare,scale}
(the code: experiments/bench.py)."""

from experiments.bench import main

if __name__ == "__main__":
    main()
