"""data.py: tokenizer round trip, sample windows, nanoGPT format, and bad input."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

import data

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run_cli(*args):
    return subprocess.run([sys.executable, os.path.join(ROOT, "data.py"), *args], capture_output=True, text=True)


def test_round_trip_bytes_ids_bytes():
    text = "héllo, wörld\n\tdef f(): return 1 ✓"
    ids = data.encode(text)
    assert ids.dtype == np.uint16 and ids.max() < 256
    assert list(data.encode("hi")) == [104, 105]
    assert data.decode(ids) == text
    assert data.decode([104, data.EOT, 105]) == "h\ni"  # EOT prints as a newline


def test_windows_count_and_contents(tmp_path):
    """tokens 0..9, T=3 -> N = (10-1)//3 = 3 windows sharing boundary tokens."""
    path = tmp_path / "t.bin"
    np.arange(10, dtype=np.uint16).tofile(path)
    w = data.SampleWindows(str(path), 3)
    assert len(w) == 3
    assert w.get([0, 1, 2]).tolist() == [[0, 1, 2, 3], [3, 4, 5, 6], [6, 7, 8, 9]]
    assert w.get([2, 0]).tolist() == [[6, 7, 8, 9], [0, 1, 2, 3]]
    assert w.get_range(1, 3).tolist() == [[3, 4, 5, 6], [6, 7, 8, 9]]
    assert w.get([0]).dtype == np.int64


def test_prepare_hand_built_corpus(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    docs = {"a.txt": "a" * 300, "b.txt": "b" * 300, "c.txt": "c" * 400}
    for name, text in docs.items():
        (src / name).write_text(text)
    (src / ".hidden").write_text("x" * 1000)  # hidden files are skipped
    out = tmp_path / "out"
    meta = data.prepare([str(src)], str(out), val_fraction=0.25, block_size=16, verbose=False)
    train = np.fromfile(out / "train.bin", dtype=np.uint16)
    val = np.fromfile(out / "val.bin", dtype=np.uint16)
    total = 1000 + 2  # 3 documents + 2 EOT separators
    assert len(train) + len(val) == total and len(val) == int(total * 0.25)
    stream = np.concatenate([train, val])
    assert (stream == data.EOT).sum() == 2
    counts = {c: int((stream == ord(c)).sum()) for c in "abcx"}
    assert counts == {"a": 300, "b": 300, "c": 400, "x": 0}
    assert json.loads((out / "meta.json").read_text()) == meta and meta["vocab_size"] == 257
    # deterministic: a second run writes the same bytes
    data.prepare([str(src / "*.txt")], str(tmp_path / "again"), val_fraction=0.25, block_size=16, verbose=False)
    assert (np.fromfile(tmp_path / "again" / "train.bin", dtype=np.uint16) == train).all()


def test_nanogpt_bin_directory_accepted(tmp_path):
    rng = np.random.default_rng(0)
    for split, n in (("train", 5000), ("val", 600)):
        rng.integers(0, 50257, n).astype(np.uint16).tofile(tmp_path / f"{split}.bin")
    with pytest.raises(ValueError, match="--vocab_size"):
        data.load_meta(str(tmp_path))
    r = run_cli(str(tmp_path), "--vocab_size", "50257", "--block_size", "64")
    assert r.returncode == 0, r.stderr
    assert data.load_meta(str(tmp_path))["vocab_size"] == 50257
    w = data.SampleWindows(str(tmp_path / "train.bin"), 64)
    assert len(w) == (5000 - 1) // 64 and w.get([0]).max() < 50257


@pytest.mark.parametrize("case", ["missing", "empty", "short"])
def test_bad_corpus_one_line_no_files(tmp_path, case):
    out = tmp_path / "out"
    if case == "missing":
        args, want = [str(tmp_path / "nope.txt")], "no such file"
    elif case == "empty":
        (tmp_path / "e.txt").write_text("")
        args, want = [str(tmp_path / "e.txt")], "empty"
    else:
        (tmp_path / "s.txt").write_text("tiny corpus")
        args, want = [str(tmp_path / "s.txt")], "too short"
    r = run_cli(*args, "--out_dir", str(out), "--block_size", "64")
    assert r.returncode != 0
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:") and want in lines[0]
    assert not out.exists() or os.listdir(out) == []


def test_existing_data_survives_a_failed_prepare(tmp_path):
    (tmp_path / "ok.txt").write_text("some text " * 100)
    out = tmp_path / "out"
    data.prepare([str(tmp_path / "ok.txt")], str(out), block_size=16, verbose=False)
    before = {f: (out / f).read_bytes() for f in os.listdir(out)}
    (tmp_path / "s.txt").write_text("tiny")
    r = run_cli(str(tmp_path / "s.txt"), "--out_dir", str(out), "--block_size", "16")
    assert r.returncode != 0
    assert {f: (out / f).read_bytes() for f in os.listdir(out)} == before
