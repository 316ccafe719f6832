"""bench.py: what the benchmarks count (their timings are printed, never asserted)."""

import bench


def test_bench_ltd_flop_ratio_falls_with_the_kept_length():
    """Counted FLOPs: dropping layers 1..L-2 to r of T tokens saves more the smaller r is, never all."""
    out = bench.bench_ltd(["--n_layer=4", "--n_head=2", "--n_embd=32", "--block_size=32", "--batch_size=2",
                           "--ratios=0.75,0.5,0.25", "--iters=1"])
    flop = [out[r][1] for r in (32, 24, 16, 8)]
    # layers 0, 3 and the head stay dense
    assert flop[0] == 1.0 and all(a > b for a, b in zip(flop, flop[1:])) and flop[-1] > 0.5
