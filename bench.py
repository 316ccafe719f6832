"""
Benchmarks that print ratios measured side by side in one run, as tables.

    python bench.py analyzer   # our analyzer vs DeepSpeed's DataAnalyzer (when importable)
    python bench.py sampler    # our sampler vs DeepSpeed's DeepSpeedDataSampler (when importable)
    python bench.py ltd        # random-LTD step time vs the FLOP ratio (efficiency)

Speed targets live here, never in timed test assertions.
"""

import argparse
import sys


# -----------------------------------------------------------------------------
# analyzer


def bench_analyzer(args):
    raise NotImplementedError


# -----------------------------------------------------------------------------
# sampler


def bench_sampler(args):
    raise NotImplementedError


# -----------------------------------------------------------------------------
# random-LTD


def bench_ltd(args):
    raise NotImplementedError


# -----------------------------------------------------------------------------


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("what", choices=["analyzer", "sampler", "ltd"])
    args, rest = p.parse_known_args(argv)
    {"analyzer": bench_analyzer, "sampler": bench_sampler, "ltd": bench_ltd}[args.what](rest)


if __name__ == "__main__":
    main()
