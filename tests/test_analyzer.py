"""analyzer.py: metric values against direct numpy, the sorted index, workers, staleness, CLI errors."""

import os
import subprocess
import sys
import time

import numpy as np
import pytest

import analyzer
import data

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture
def corpus(tmp_path):
    """8001 tokens with a skewed unigram distribution, a few EOTs, and a token (7) absent from train."""
    rng = np.random.default_rng(0)
    tokens = rng.choice(np.array([1, 2, 3, 4, 5, 6, 8, data.EOT]), 8001, p=[.3, .2, .15, .1, .1, .05, .05, .05]).astype(np.uint16)
    path = tmp_path / "train.bin"
    tokens.tofile(path)
    return str(path), tokens


def test_vocab_rarity_equals_direct_numpy(corpus, tmp_path):
    path, tokens = corpus
    T = 16
    index = analyzer.ensure_index(path, T, ["vocab_rarity"], str(tmp_path / "index"), num_workers=1, verbose=False)["vocab_rarity"]
    counts = np.bincount(tokens).astype(np.float64)  # vocabulary = ids 0..256 (max id + 1, no meta.json)
    assert len(counts) == 257
    counts[counts == 0] = 1
    p = counts / counts.sum()
    N = (len(tokens) - 1) // T
    want = np.array([-np.log(p[tokens[i * T : i * T + T + 1]]).sum() for i in range(N)])
    assert index["sample_to_metric"].dtype == np.float64 and len(want) == N
    np.testing.assert_allclose(index["sample_to_metric"], want, rtol=1e-12)
    # a token absent from train counts as 1 occurrence
    total = len(tokens) + 257 - 8  # 249 absent ids count 1 each
    assert analyzer.vocab_rarity(np.array([[7]]), np.bincount(tokens))[0] == pytest.approx(-np.log(1 / total))


def test_num_docs_worked_example():
    assert analyzer.num_docs(np.array([[5, data.EOT, 7, data.EOT], [1, 2, 3, 4]]), None).tolist() == [3, 1]


def test_sorted_index_consistent(corpus, tmp_path):
    path, _ = corpus
    idx = analyzer.ensure_index(path, 8, ["num_docs"], str(tmp_path / "index"), num_workers=1, verbose=False)["num_docs"]
    s2m, i2s, i2m = (np.asarray(idx[k]) for k in ("sample_to_metric", "index_to_sample", "index_to_metric"))
    assert sorted(i2s.tolist()) == list(range(len(s2m)))  # a permutation
    assert np.array_equal(i2m, s2m[i2s]) and (np.diff(i2m) >= 0).all()
    ties = np.diff(i2m) == 0
    assert (np.diff(i2s)[ties] > 0).all()  # equal metrics keep id order (stable)
    assert analyzer.sort_index(np.array([5.0, 1.0, 3.0]))[0].tolist() == [1, 2, 0]


def test_one_and_several_workers_agree(corpus, tmp_path):
    path, _ = corpus
    a = analyzer.build_index(path, 4, ["vocab_rarity", "num_docs"], str(tmp_path / "a"), num_workers=1, shard=100, verbose=False)
    b = analyzer.build_index(path, 4, ["vocab_rarity", "num_docs"], str(tmp_path / "b"), num_workers=3, shard=100, verbose=False)
    for name in ("vocab_rarity", "num_docs"):
        for k in ("sample_to_metric", "index_to_sample", "index_to_metric"):
            assert np.array_equal(analyzer.load_index(str(tmp_path / "a"), name)[k], analyzer.load_index(str(tmp_path / "b"), name)[k])


def test_stale_index_rebuilt(corpus, tmp_path, capsys):
    path, tokens = corpus
    d = str(tmp_path / "index")
    first = np.asarray(analyzer.ensure_index(path, 16, ["vocab_rarity"], d, num_workers=1)["vocab_rarity"]["sample_to_metric"])
    capsys.readouterr()
    analyzer.ensure_index(path, 16, ["vocab_rarity"], d, num_workers=1)
    assert "built" not in capsys.readouterr().out  # fresh: loaded as it is
    other = analyzer.ensure_index(path, 32, ["vocab_rarity"], d, num_workers=1)["vocab_rarity"]  # another block size
    assert "rebuilding" in capsys.readouterr().out and len(other["sample_to_metric"]) == (len(tokens) - 1) // 32
    time.sleep(0.01)
    extra = np.concatenate([tokens[:100][::-1], tokens[100:]])  # other data, same size
    extra.tofile(path)
    again = np.asarray(analyzer.ensure_index(path, 16, ["vocab_rarity"], d, num_workers=1)["vocab_rarity"]["sample_to_metric"])
    assert "rebuilding" in capsys.readouterr().out and not np.array_equal(again, first)


def test_unknown_metric_and_cli_errors(corpus, tmp_path):
    path, _ = corpus
    with pytest.raises(ValueError, match="unknown metric 'perplexity'; known: vocab_rarity, num_docs"):
        analyzer.ensure_index(path, 16, ["perplexity"], str(tmp_path / "i"))
    r = subprocess.run([sys.executable, os.path.join(ROOT, "analyzer.py"), f"--data_dir={tmp_path}", "--metrics=nope"], capture_output=True, text=True)
    assert r.returncode != 0 and r.stderr.strip().count("\n") == 0 and "unknown metric 'nope'" in r.stderr
    r = subprocess.run([sys.executable, os.path.join(ROOT, "analyzer.py"), f"--data_dir={tmp_path}", "--block_size=100000"], capture_output=True, text=True)
    assert r.returncode != 0 and r.stderr.strip().count("\n") == 0 and "fewer than block_size+1" in r.stderr
    assert not os.path.exists(tmp_path / "index" / "vocab_rarity" / "info.json")
