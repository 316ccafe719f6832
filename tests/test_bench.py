"""bench.py: what the benchmarks count (their timings are printed, never asserted)."""

import pytest

import bench


def test_bench_ltd_flop_ratio_falls_with_the_kept_length():
    """Counted FLOPs: dropping layers 1..L-2 to r of T tokens saves more the smaller r is, never all."""
    out = bench.bench_ltd(["--n_layer=4", "--n_head=2", "--n_embd=32", "--block_size=32", "--batch_size=2",
                           "--ratios=0.75,0.5,0.25", "--iters=1"])
    flop = [out[r][1] for r in (32, 24, 16, 8)]
    # layers 0, 3 and the head stay dense
    assert flop[0] == 1.0 and all(a > b for a, b in zip(flop, flop[1:])) and flop[-1] > 0.5


def test_interleaved_alternates_the_cases_and_drops_warmup_rounds():
    """interleaved({a, b}, rounds=2, warmup=1) calls a, b, a, b, a, b and keeps the last two timings of each."""
    calls = []
    times = bench.interleaved({"a": lambda: calls.append("a"), "b": lambda: calls.append("b")}, rounds=2, warmup=1)
    assert calls == ["a", "b"] * 3 and {k: len(v) for k, v in times.items()} == {"a": 2, "b": 2}


def test_med_range_is_median_then_min_max():
    assert bench.med_range([0.003, 0.001, 0.002], scale=1000) == "2 (1-3)"


def test_row_aligns_cells(capsys):
    bench.row((-4, 6), "ab", "1.5")
    assert capsys.readouterr().out == "ab      1.5\n"  # 'ab' left in 4 columns, a space, '1.5' right in 6


def test_each_benchmark_has_its_own_typed_options(capsys):
    """`bench.py prepare --help` is prepare's help; its options are typed as their defaults; unknown ones fail."""
    with pytest.raises(SystemExit):
        bench.main(["prepare", "--help"])
    assert "bench.py prepare" in capsys.readouterr().out
    a = bench.setup("x", ["--threads=1", "--rounds=3"], threads=1, rounds=(5, "help"), name="s")
    assert (a.threads, a.rounds, a.name) == (1, 3, "s")
    with pytest.raises(SystemExit):
        bench.setup("x", ["--bogus=1"], threads=1)
