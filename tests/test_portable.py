"""Where fcntl or fork is missing (native Windows, and spawn-only Pythons): a run still starts,
locks its out_dir and trains. Both are faked on Linux: fcntl hidden from the import system."""

import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TINY = ["--block_size=16", "--batch_size=4", "--n_layer=2", "--n_head=2", "--n_embd=16",
        "--eval_samples=4", "--sample_tokens=0", "--device=cpu", "--max_iters=2", "--threads=1"]
WITHOUT_FCNTL = "import sys; sys.modules['fcntl'] = None; import train; train.main(sys.argv[1:])"


def run(code, *argv):
    return subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True,
                          cwd=ROOT, timeout=300)


def test_without_fcntl_a_run_locks_its_out_dir_trains_and_refuses_a_second(corpus, tmp_path):
    r = run(WITHOUT_FCNTL, *TINY, f"--data_dir={corpus}", f"--out_dir={tmp_path / 'a'}",
            "--cl_metric=vocab_rarity", f"--index_dir={tmp_path / 'index'}")
    assert r.returncode == 0 and "done: 2 steps" in r.stdout, r.stderr[-800:]
    assert sorted(os.listdir(tmp_path / "a")) == ["ckpt.pt"]  # the lock went with the run
    held = tmp_path / "b"
    held.mkdir()
    (held / ".lock").write_text("")  # another trainer's, or one a crashed run left
    r = run(WITHOUT_FCNTL, *TINY, f"--data_dir={corpus}", f"--out_dir={held}")
    err = r.stderr.strip().splitlines()
    assert r.returncode == 1 and len(err) == 1, r.stderr[-800:]
    assert "another trainer is running" in err[0] and "a crashed run left" in err[0]
    assert sorted(os.listdir(held)) == [".lock"]  # nothing written, nothing taken away


def test_without_fork_the_index_is_built_in_this_process_and_is_the_same(corpus, tmp_path,
                                                                        monkeypatch):
    """Where fork is missing (Windows; spawn only), --num_workers asks for a pool that cannot
    be made the way it is here: the index is built in this process, with the same arrays."""
    import multiprocessing

    from services import index

    bin_path = os.path.join(corpus, "train.bin")
    index.build_index(bin_path, 16, ["vocab_rarity"], str(tmp_path / "one"), 1, verbose=False)
    monkeypatch.setattr(multiprocessing, "get_all_start_methods", lambda: ["spawn"])
    monkeypatch.setattr(multiprocessing, "get_context", lambda *a: 1 / 0)  # no pool at all
    index.build_index(bin_path, 16, ["vocab_rarity"], str(tmp_path / "two"), 4, verbose=False,
                      shard=64)
    one, two = (index.load_index(str(tmp_path / d), 16, ["vocab_rarity"])["vocab_rarity"]
                for d in ("one", "two"))
    for key in ("sample_to_metric", "index_to_sample", "index_to_metric"):
        assert (one[key] == two[key]).all(), key
