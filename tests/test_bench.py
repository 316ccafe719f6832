"""bench.py: what the benchmarks count (their timings are printed, never asserted)."""

import pytest
import torch

import model
from experiments import bench

TINY = ["--n_layer=4", "--n_head=2", "--n_embd=32", "--block_size=32", "--batch_size=2",
        "--device=cpu", "--threads=1"]


def test_bench_ltd_flop_ratio_falls_with_the_kept_length(capsys):
    """Counted FLOPs: dropping layers 1..L-2 to r of T tokens saves more the smaller r is, never
    all; the dense row's efficiency is "-" (it printed nan); tokens/s beside ms/step."""
    out = bench.bench_ltd(TINY + ["--vocab_size=257", "--modes=eager", "--ratios=0.75,0.5,0.25",
                                  "--iters=1"])
    flop = [out[r][1] for r in (32, 24, 16, 8)]
    # layers 0, 3 and the head stay dense
    assert flop[0] == 1.0 and all(a > b for a, b in zip(flop, flop[1:])) and flop[-1] > 0.5
    rows = capsys.readouterr().out.splitlines()
    assert rows[1].split()[4:6] == ["ms/step", "tokens/s"]
    assert "nan" not in "\n".join(rows) and rows[2].split()[:3] == ["eager", "1.00", "32"]
    assert rows[2].endswith(" 1.000      1.000          -")


def test_bench_dense_times_a_second_model_file_beside_ours(capsys):
    """--nanogpt loads another model.py (here our own) and times it beside ours, one row each."""
    med = bench.bench_dense(TINY + [f"--nanogpt={model.__file__}", "--iters=1",
                                    "--vocab_size=50304"])
    assert list(med) == ["ours (model.py)", "nanoGPT (--nanogpt)"] and min(med.values()) > 0
    assert "nanoGPT (--nanogpt)" in capsys.readouterr().out
    bench.bench_dense(TINY + ["--iters=1"])
    assert "no nanoGPT row: pass --nanogpt=path/to/nanoGPT/model.py" in capsys.readouterr().out


def test_device_auto_takes_the_first_gpu_with_bf16_autocast(monkeypatch):
    """With a (faked) GPU, --device=auto is cuda:0, autocast is CUDA bf16 and the clock syncs
    that device."""
    synced = []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: True)  # for autocast
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device: f"FakeGPU on {device}")
    monkeypatch.setattr(torch.cuda, "synchronize", synced.append)
    device, ctx, sync, where = bench.on_device("auto")
    sync()
    assert (device, ctx.device, ctx.fast_dtype, synced, where) == (
        "cuda:0", "cuda", torch.bfloat16, ["cuda:0"], "FakeGPU on cuda:0 bf16")
    assert bench.on_device("cuda:1")[0] == "cuda:1" and bench.on_device("cpu")[3] == "cpu fp32"


def test_interleaved_rounds_median_range_and_rows(capsys):
    """interleaved({a, b}, rounds=2, warmup=1) calls a, b, a, b, a, b and keeps the last two
    timings of each; a cell is the median (min-max); rows align left where the width is < 0."""
    calls = []
    times = bench.interleaved({"a": lambda: calls.append("a"), "b": lambda: calls.append("b")},
                              rounds=2, warmup=1)
    assert calls == ["a", "b"] * 3 and {k: len(v) for k, v in times.items()} == {"a": 2, "b": 2}
    assert bench.med_range([0.003, 0.001, 0.002], scale=1000) == "2 (1-3)"
    bench.row((-4, 6), "ab", "1.5")
    assert capsys.readouterr().out == "ab      1.5\n"


def test_each_benchmark_has_its_own_typed_options(capsys):
    """`bench.py ltd --help` is ltd's help; options are typed as their defaults; unknown ones
    fail."""
    with pytest.raises(SystemExit):
        bench.main(["ltd", "--help"])
    assert "bench.py ltd" in capsys.readouterr().out
    a = bench.options("x", ["--threads=1", "--rounds=3"], rounds=(5, "help"), name=("s", "h"))
    assert (a.threads, a.rounds, a.name) == (1, 3, "s")
    with pytest.raises(SystemExit, match="unknown option"):
        bench.main(["dense", "--bogus=1"])
    with pytest.raises(SystemExit, match=r"^error: no benchmark 'scale'; pick one of ltd, dense "):
        bench.main(["scale"])  # it printed the usage alone, with no error line
    bench.main([])
    assert capsys.readouterr().out.startswith(
        "usage: python bench.py {ltd,dense}")
