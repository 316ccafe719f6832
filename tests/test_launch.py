"""launch.py and train.py's CUDA-only lines on this CPU: the device of each process, a faked GPU
(tests/fake_cuda.py) under python and torchrun, resume across devices, two nodes, errors on one
rank, SIGTERM and SIGINT."""

import os
import re
import signal
import socket
import subprocess
import sys
import time

import pytest
import torch

from support import checkpoint
from support import launch
import train
from fake_cuda import CUDA_STATE_BYTES, FakeCuda
from test_data import nanogpt_copy
from test_train import LTD, ROOT, argv_for, cfg_for, ranks, recorder

# -----------------------------------------------------------------------------
# the device of each process: one function of --device, LOCAL_RANK, LOCAL_WORLD_SIZE and the
# visible GPUs


@pytest.mark.parametrize("device, n_gpu, local_rank, local_world, want", [
    ("auto", 0, 0, 1, "cpu"),  # no GPU
    # python train.py, or torchrun --nproc_per_node=1, on one GPU: never a bare "cuda"
    ("auto", 1, 0, 1, "cuda:0"),
    ("cuda:1", 2, 0, 1, "cuda:1"),
    ("auto", 8, 5, 8, "cuda:5"),  # torchrun --nproc_per_node=8: rank 5 of the node
    ("cuda", 8, 7, 8, "cuda:7"),
    ("cpu", 8, 3, 8, "cpu"),  # Gloo processes on a GPU machine
    # refused, in one line
    ("cuda", 0, 0, 1, "error: torch sees no CUDA device; use --device=cpu"),
    ("auto", 2, 0, 4,
     "error: 4 ranks on this machine but 2 GPU(s); use torchrun --nproc_per_node=2"),
    ("cuda:2", 2, 0, 1, "error: this machine has 2 GPU(s), cuda:0..cuda:1"),
    ("cuda:1", 2, 0, 2, "error: would put 2 ranks on one GPU; use --device=cuda"),
])
def test_resolve_device(device, n_gpu, local_rank, local_world, want):
    if want.startswith("error: "):
        with pytest.raises(ValueError, match=re.escape(want[len("error: "):])):
            launch.resolve_device(device, n_gpu, local_rank, local_world)
    else:
        assert launch.resolve_device(device, n_gpu, local_rank, local_world) == want


@pytest.mark.parametrize("rank, local_rank, calls", [(0, 0, ["make", "barrier", "barrier"]),
                                                     (2, 0, ["barrier", "make", "barrier"]),
                                                     (3, 1, ["barrier"] * 2)])
def test_what_every_rank_needs_is_built_once_per_machine(monkeypatch, rank, local_rank, calls):
    """Rank 0 builds first; the first rank of another machine builds after it (finding it built on
    a shared filesystem, building it on its own), while every other rank waits: never all ranks of
    a machine at once."""
    seen = []
    monkeypatch.setattr(launch.dist, "is_initialized", lambda: True)
    monkeypatch.setattr(launch.dist, "barrier", lambda: seen.append("barrier"))
    launch.on_each_filesystem(lambda: seen.append("make"), rank, local_rank)
    assert seen == calls


# -----------------------------------------------------------------------------
# train.py on one faked GPU: every CUDA-only line reached, its arguments checked


@pytest.mark.parametrize("bf16, dtype", [(True, "bfloat16"), (False, "float16")])
def test_train_starts_and_steps_on_a_gpu_with_the_default_device(corpus, tmp_path, bf16, dtype):
    """`python train.py` on a CUDA machine: set_device gets an index (a bare "cuda" raises as the
    real one does), the generator and batches go to cuda:0, bf16 autocast, fused AdamW, and the
    checkpoint says where it ran. A V100 or T4 reports bf16 'supported' through emulation: auto
    picks float16 with a loss scaler there."""
    with FakeCuda(n_gpu=1, bf16=bf16) as gpu:
        out = train.train(cfg_for(corpus, tmp_path, "--device=auto", "--max_iters=3", *LTD))
    assert out["iter_num"] == 3 and out["val_loss"] < 6
    assert ("set_device", 0) in gpu.calls and ("Generator", "cuda:0") in gpu.calls
    assert ("autocast", "cuda", getattr(torch, dtype)) in gpu.calls and ("pin_memory",) in gpu.calls
    ckpt = torch.load(tmp_path / "ckpt.pt", weights_only=False)
    assert ckpt["where"] == f"cuda ({dtype})"
    assert ckpt["optimizer"]["param_groups"][0]["fused"] is True
    assert ckpt["rng"][0]["ltd"].numel() == ckpt["rng"][0]["cuda"].numel() == CUDA_STATE_BYTES


def test_a_gpu_checkpoint_resumes_on_the_cpu_and_a_cpu_one_on_the_gpu(corpus, tmp_path, capsys):
    """The CPU half of a device change: a checkpoint written on a GPU (CUDA generator states of 16
    bytes, fused AdamW, as the test above checks) goes on on the CPU, unfused, with a note; and a
    CPU checkpoint (a 5,056-byte generator state) goes on on a GPU."""
    args = ["--max_iters=2", "--eval_interval=2", "--lr_decay_iters=4", *LTD]
    with FakeCuda(n_gpu=1):
        train.train(cfg_for(corpus, tmp_path / "a", *args, "--device=auto"))
    out = train.train(cfg_for(corpus, tmp_path / "a", *args, "--max_iters=4", "--resume"))
    assert out["iter_num"] == 4
    assert "on cuda (bfloat16), this run has 1 on cpu (float32)" in capsys.readouterr().out
    ckpt = torch.load(tmp_path / "a" / "ckpt.pt", weights_only=False)
    assert not ckpt["optimizer"]["param_groups"][0]["fused"]
    train.train(cfg_for(corpus, tmp_path / "b", *args))
    with FakeCuda(n_gpu=1) as gpu:
        out = train.train(cfg_for(corpus, tmp_path / "b", *args, "--max_iters=4", "--resume",
                                  "--device=auto"))
    # a CPU run saved no CUDA state
    assert out["iter_num"] == 4 and ("set_rng_state",) not in gpu.calls
    assert "on cpu (float32), this run has 1 on cuda (bfloat16)" in capsys.readouterr().out


@pytest.mark.slow
def test_every_run_the_experiments_build_starts_on_one_gpu(corpus, domain_corpus, tmp_path,
                                                            monkeypatch):
    """Every train.py run that reproduce.py and reproduce_autoscale.py make goes through
    train.train: all of them, run on one faked GPU with the default device, start on cuda:0 (a new
    caller is covered as soon as it runs)."""
    from experiments import autoscale as reproduce_autoscale
    from experiments import reproduce
    import test_reproduce
    import test_reproduce_autoscale

    real, starts = train.train, []

    def on_one_gpu(cfg):
        with FakeCuda(n_gpu=1) as gpu:
            out = real(cfg)
        starts.append(gpu.calls[0])  # the first CUDA call of a run
        return out

    monkeypatch.setattr(train, "train", on_one_gpu)
    monkeypatch.setitem(reproduce.SIZES, "tiny", test_reproduce.TINY)
    reproduce.main(["--size=tiny", f"--data_dir={corpus}", f"--out_dir={tmp_path / 'grid'}",
                    "--seeds=5", "--fractions=1,0.5"])
    grid = len(starts)
    reproduce_autoscale.main([*test_reproduce_autoscale.TINY, "--n1=640", "--n2=1280", "--t=1",
                              "--seeds=1", f"--data_dir={domain_corpus}", f"--out_dir={tmp_path}"])
    assert grid == 10 and len(starts) == grid + 2 * 5 + 3 and set(starts) == {("set_device", 0)}


# -----------------------------------------------------------------------------
# torchrun: a faked GPU per rank, two nodes, an error on one rank, signals (the processes run
# tests/test_train.py's RECORDER)


def torchrun(*args):
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    return subprocess.Popen([sys.executable, "-m", "torch.distributed.run", *args], cwd=ROOT,
                            env=env, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


@pytest.mark.slow
def test_torchrun_on_two_faked_gpus_hashes_a_nanogpt_corpus_on_one_rank(corpus, tmp_path):
    """Each rank takes cuda:LOCAL_RANK, NCCL, and DDP with device_ids=[its index]. A nanoGPT
    directory (no meta.json) is read whole by rank 0 alone; rank 1 waits at the barrier, then finds
    the record (scan.json) and reads only that."""
    nano = nanogpt_copy(corpus, tmp_path / "nano")
    p = torchrun("--standalone", "--nproc_per_node=2", recorder(tmp_path, gpus=2),
                 *argv_for(nano, tmp_path / "out", "--device=auto", "--vocab_size=257",
                           "--max_iters=2", "--global_batch_size=8"))
    out, err = p.communicate(timeout=300)
    assert p.returncode == 0, err[-3000:]
    for r, rec in enumerate(ranks(tmp_path)):
        assert rec["calls"] == [["set_device", r], ["init_process_group", "nccl"], ["DDP", [r]]]
    assert [len(rec["scans"]) for rec in ranks(tmp_path)] == [1, 0]
    assert len([x for x in out.splitlines() if x.startswith("hashing ")]) == 1, out


@pytest.mark.slow
def test_two_nodes_train_disjoint_slices_and_only_rank_0_writes(corpus, tmp_path):
    """torchrun --nnodes=2 on localhost (two launchers, Gloo): each node's rank draws its half of
    every global batch, and only node 0 writes a checkpoint (node 1 is given another out_dir to show
    it writes nothing)."""
    with socket.socket() as s:  # a free port
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    script = recorder(tmp_path)
    nodes = [torchrun("--nnodes=2", f"--node_rank={k}", "--nproc_per_node=1",
                      "--master_addr=127.0.0.1", f"--master_port={port}", script,
                      *argv_for(corpus, tmp_path / f"node{k}", "--max_iters=3", "--eval_interval=3",
                                "--global_batch_size=8"))
             for k in range(2)]
    errs = [p.communicate(timeout=300)[1] for p in nodes]
    assert all(p.returncode == 0 for p in nodes), errs[0][-2000:] + errs[1][-2000:]
    a, b = (rec["seen"] for rec in ranks(tmp_path))
    assert len(a) == len(b) == 3
    # each node's rank draws its half of every global batch of 8
    assert all(len(x) == len(y) == 4 and not set(x) & set(y) for x, y in zip(a, b))
    assert os.path.exists(tmp_path / "node0" / "ckpt.pt")
    assert not os.path.exists(tmp_path / "node1" / "ckpt.pt")


@pytest.mark.slow
@pytest.mark.parametrize("fail_rank, extra, want", [
    # the error of one rank, with its rank
    ("1", [], "error: rank 1: no train.bin in CORPUS; copy it here"),
    (None, ["--global_batch_size=6"], "global_batch_size 6 is not divisible"),  # every rank's
])
def test_an_error_under_torchrun_prints_once(corpus, tmp_path, fail_rank, extra, want):
    p = torchrun("--standalone", "--nproc_per_node=2", recorder(tmp_path, fail_rank=fail_rank),
                 *argv_for(corpus, tmp_path, "--max_iters=2", *extra))
    _, err = p.communicate(timeout=300)
    lines = [x for x in err.splitlines() if x.startswith("error:")]
    assert p.returncode != 0 and len(lines) == 1, err[-3000:]
    assert want.replace("CORPUS", corpus) in lines[0], lines


def stopped_at(p, tmp_path, sig, after_s, resume):
    """sig to rank 0 after_s seconds in: p stops with one line naming the step and the command that
    resumes, its checkpoint whole (the checksum holds) at that step -> (the step, p's stderr)."""
    deadline = time.time() + 120
    while not os.path.exists(tmp_path / "rank0.json.pid") and time.time() < deadline:
        time.sleep(0.1)
    time.sleep(after_s)  # some steps in
    os.kill(int(open(tmp_path / "rank0.json.pid").read()), sig)
    _, err = p.communicate(timeout=180)
    lines = [x for x in err.splitlines() if x.startswith(("stopped", "error"))]
    assert p.returncode != 0 and len(lines) == 1, err
    assert lines[0].startswith(f"stopped by {sig.name} at iter "), err
    assert lines[0].endswith(f"; continue with: {resume}")
    n = int(lines[0].split(" at iter ")[1].split(";")[0])
    assert n > 0 and checkpoint.load_checkpoint(str(tmp_path / "ckpt.pt"))["state"]["iter_num"] == n
    return n, err


@pytest.mark.parametrize("sig", [signal.SIGTERM,
                                 pytest.param(signal.SIGINT, marks=pytest.mark.slow)])
def test_a_signal_stops_after_the_step_with_a_checkpoint_and_one_line(corpus, tmp_path, sig):
    argv = argv_for(corpus, tmp_path, "--max_iters=100000", "--eval_interval=100000")
    p = subprocess.Popen([sys.executable, recorder(tmp_path, sleep=0.05), *argv], cwd=ROOT,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         # subtle: a background shell job's children inherit SIGINT ignored
                         preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    n, err = stopped_at(p, tmp_path, sig, 1.5, f"python train.py --resume --out_dir={tmp_path}")
    assert len(err.strip().splitlines()) == 1 and n == len(ranks(tmp_path, 1)[0]["seen"])


@pytest.mark.slow
def test_sigterm_to_one_rank_stops_every_rank_after_the_same_step(corpus, tmp_path):
    """A scheduler's SIGTERM reaches the ranks at different times (here: only rank 0 gets it);
    every rank stops after the same step, one line is printed, and the checkpoint is whole."""
    p = torchrun("--standalone", "--nproc_per_node=2", recorder(tmp_path, sleep=0.05),
                 *argv_for(corpus, tmp_path, "--max_iters=100000", "--eval_interval=100000",
                           "--global_batch_size=8", "--log_interval=3"))
    resume = f"torchrun --standalone --nproc_per_node=2 train.py --resume --out_dir={tmp_path}"
    n, _ = stopped_at(p, tmp_path, signal.SIGTERM, 4, resume)
    a, b = (rec["seen"] for rec in ranks(tmp_path))
    assert n % 3 == 0 and len(a) == len(b) == n  # both stopped after step n, at a log step


def test_the_resume_command_is_the_one_that_continues_this_run(monkeypatch):
    """The stop line's command names the run's out_dir (typed as printed, --resume alone would
    continue the default out/), and torchrun's form under torchrun."""
    monkeypatch.delenv("RANK", raising=False)  # not under torchrun
    # a plain out_dir as typed: test_a_signal_stops_after_the_step_with_a_checkpoint_and_one_line
    assert checkpoint.resume_command("my runs") == "python train.py --resume --out_dir='my runs'"
    for k, v in dict(RANK="0", WORLD_SIZE="4", LOCAL_WORLD_SIZE="4").items():
        monkeypatch.setenv(k, v)
    assert checkpoint.resume_command("o") == ("torchrun --standalone --nproc_per_node=4 train.py "
                                              "--resume --out_dir=o")
    monkeypatch.setenv("WORLD_SIZE", "8")
    assert checkpoint.resume_command("o").startswith("torchrun --nnodes=2 <rendezvous flags> "
                                                     "--nproc_per_node=4 ")
