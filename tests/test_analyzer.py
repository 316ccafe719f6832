"""analyzer.py: metric values against direct numpy, the sorted index; services/index.py: workers,
stale or damaged indexes, errors, progress lines."""

import json
import os
import re
import signal
import subprocess
import sys
import time
import zlib

import numpy as np
import pytest

import analyzer
import data
from services import index as index_cache

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture
def corpus(tmp_path):
    """8001 tokens with a skewed unigram distribution, a few EOTs, and a token (7) absent from
    train."""
    rng = np.random.default_rng(0)
    ids, p = np.array([1, 2, 3, 4, 5, 6, 8, data.EOT]), [.3, .2, .15, .1, .1, .05, .05, .05]
    tokens = rng.choice(ids, 8001, p=p).astype(np.uint16)
    tokens.tofile(tmp_path / "train.bin")
    return str(tmp_path / "train.bin"), tokens


@pytest.fixture(autouse=True)
def no_progress_lines(monkeypatch):
    """A progress line speaks after INTERVAL s of silence, which depends on the tests that ran
    before: none here (test_progress_lines_when_stdout_is_a_pipe sets its own)."""
    monkeypatch.setattr(index_cache, "INTERVAL", float("inf"))


def ensure(path, T, names, d, **kwargs):
    return index_cache.ensure_index(path, T, names, str(d), **{"num_workers": 1, **kwargs})


def test_vocab_rarity_equals_direct_numpy(corpus, tmp_path):
    path, tokens = corpus
    T = 16
    index = ensure(path, T, ["vocab_rarity"], tmp_path / "index", verbose=False)["vocab_rarity"]
    # vocabulary = ids 0..256 (max id + 1, no meta.json)
    counts = np.bincount(tokens).astype(np.float64)
    counts[counts == 0] = 1  # a token absent from train (7, and 248 more) counts as 1 occurrence
    p = counts / counts.sum()
    N = (len(tokens) - 1) // T
    want = np.array([-np.log(p[tokens[i * T : i * T + T + 1]]).sum() for i in range(N)])
    assert index["sample_to_metric"].dtype == np.float64
    np.testing.assert_allclose(index["sample_to_metric"], want, rtol=1e-12)
    # analyzer.metric_index (in memory) equals the built index: the next test


def test_worked_examples_of_the_metrics():
    """num_docs counts EOTs; compression is len(zlib.compress(its bytes)) / (T+1), EOT as 0, and
    ranks repetition easy. (unigram_neg_log_p's and vocab_rarity's worked examples:
    tests/test_exercises.py, exercises 1 and 2.)"""
    docs = analyzer.num_docs(np.array([[5, data.EOT, 7, data.EOT], [1, 2, 3, 4]]), None)
    assert docs.tolist() == [3, 1]
    varied = np.random.default_rng(0).integers(0, 256, (1, 129))
    text = np.frombuffer(b"the cat sat on the mat. " * 6, np.uint8)[:129][None].astype(np.int64)
    with_eot = text.copy()
    with_eot[0, 5] = data.EOT
    scores = analyzer.compression(np.concatenate([text, varied, with_eot]), None)
    assert analyzer.compression(np.full((1, 64), 97), None).tolist() == [0.1875]
    rows = (text[0].tolist(), varied[0].tolist(), [0 if t == data.EOT else t for t in with_eot[0]])
    assert scores.tolist() == [len(zlib.compress(bytes(row))) / 129 for row in rows]
    assert scores[0] < 0.5 < 1 < scores[1]  # repeated prose is easy, random bytes hard


def test_one_and_several_workers_agree_and_count_as_one_pass(corpus, tmp_path):
    """21 jobs of 100 windows (400 tokens) in 1 or 3 processes: the same arrays, sorted stably; the
    counts equal one pass's."""
    path, tokens = corpus
    names = ["vocab_rarity", "num_docs"]
    for d, workers in (("a", 1), ("b", 3)):
        index_cache.build_index(path, 4, names, str(tmp_path / d), num_workers=workers, shard=100,
                                verbose=False)
    a, b = (index_cache.load_index(str(tmp_path / d), 4, names) for d in "ab")
    assert all(np.array_equal(a[n][k], b[n][k]) for n in names for k in analyzer.KEYS)
    s2m, i2s, i2m = (np.asarray(a["num_docs"][k]) for k in analyzer.KEYS)  # many ties
    # a permutation
    assert sorted(i2s.tolist()) == list(range(len(s2m))) and np.array_equal(i2m, s2m[i2s])
    # ties keep id order (stable)
    assert (np.diff(i2m) >= 0).all() and (np.diff(i2s)[np.diff(i2m) == 0] > 0).all()
    np.testing.assert_allclose(a["vocab_rarity"]["sample_to_metric"],
                               analyzer.metric_index(path, 4)["sample_to_metric"])  # in memory
    # 257 ids: max id + 1, no meta.json
    assert np.array_equal(analyzer.unigram_counts(path), np.bincount(tokens))
    json.dump({"vocab_size": 300}, open(tmp_path / "meta.json", "w"))
    assert np.array_equal(analyzer.unigram_counts(path), np.bincount(tokens, minlength=300))
    # ids up to 256: never fewer counts than ids (data.load_meta refuses it to train.py)
    json.dump({"vocab_size": 200}, open(tmp_path / "meta.json", "w"))
    assert np.array_equal(analyzer.unigram_counts(path), np.bincount(tokens))


def test_stale_index_rebuilt_and_one_kept_per_block_size(corpus, tmp_path, capsys):
    """Alternating two block sizes rebuilt the index each time (one index per metric evicted the
    other's); now each block size has its own, and other data is still rebuilt with a note. A build
    says its time and rate."""
    path, tokens = corpus
    d = tmp_path / "index"
    first = np.asarray(ensure(path, 16, ["vocab_rarity"], d)["vocab_rarity"]["sample_to_metric"])
    # a first build: no note, one line
    built = re.escape(index_cache.slot(str(d), 16, "vocab_rarity"))
    assert re.fullmatch(rf"built index vocab_rarity in {built}: 8,001 tokens in [\d.]+ s "
                        rf"\([\d.]+\w? tokens/s\)\n", capsys.readouterr().out)
    other = ensure(path, 32, ["vocab_rarity"], d)["vocab_rarity"]  # another block size
    out = capsys.readouterr().out
    assert "rebuilding" not in out and "built index vocab_rarity" in out
    assert len(other["sample_to_metric"]) == (len(tokens) - 1) // 32
    kept = ensure(path, 16, ["vocab_rarity"], d)["vocab_rarity"]
    # fresh, not evicted
    assert capsys.readouterr().out == "" and np.array_equal(kept["sample_to_metric"], first)
    time.sleep(0.01)
    np.concatenate([tokens[:100][::-1], tokens[100:]]).tofile(path)  # other data, same size
    again = np.asarray(ensure(path, 16, ["vocab_rarity"], d)["vocab_rarity"]["sample_to_metric"])
    assert "rebuilding" in capsys.readouterr().out and not np.array_equal(again, first)


def _first_token(samples, neg_log_p):
    return samples[:, 0].astype(np.float64)


def _last_token(samples, neg_log_p):
    return samples[:, -1].astype(np.float64)


def test_a_changed_metric_function_gets_its_own_index(corpus, tmp_path, capsys, monkeypatch):
    """The metric's code is part of what an index describes: same name and data, new function, a new
    index beside the old one (kept for a return to the old function)."""
    path, tokens = corpus
    d = tmp_path / "index"
    monkeypatch.setitem(analyzer.METRICS, "m", _first_token)
    first = ensure(path, 16, ["m"], d)["m"]["sample_to_metric"]
    assert np.array_equal(first, tokens[:-1:16][: len(first)])
    capsys.readouterr()
    monkeypatch.setitem(analyzer.METRICS, "m", _last_token)
    again = ensure(path, 16, ["m"], d)["m"]["sample_to_metric"]
    assert np.array_equal(again, tokens[16::16][: len(again)])
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 1
    assert out[0].startswith(f"built index m in {index_cache.slot(str(d), 16, 'm')}: ")
    monkeypatch.setitem(analyzer.METRICS, "m", _first_token)
    back = ensure(path, 16, ["m"], d)["m"]["sample_to_metric"]
    assert capsys.readouterr().out == "" and np.array_equal(back, first)
    typed = {}  # functions without a source file (a REPL's): their compiled code tells them apart
    exec("def first(s, p): return s[:, 0]\ndef last(s, p): return s[:, -1]", typed)
    assert index_cache.metric_code(typed["first"]) != index_cache.metric_code(typed["last"])


@pytest.mark.parametrize("target, how, why", [
    ("index_to_sample", "truncate", "index_to_sample.npy is unreadable (ValueError)"),
    ("sample_to_metric", "empty", "sample_to_metric.npy is unreadable (EOFError)"),
    ("index_to_metric", "delete", "index_to_metric.npy is unreadable (FileNotFoundError)"),
    ("index_to_sample", "short", "index_to_sample.npy holds (124,), not (125,)"),
    ("info.json", "garbage", "info.json is unreadable"),
    ("info.json", "truncate", "info.json is unreadable (JSONDecodeError)"),
    ("info.json", "keys",
     "built for other data, another block size or another version of its metric"),
    ("info.json", "delete", "info.json is missing"),
])
def test_damaged_index_rebuilt_with_one_line(corpus, tmp_path, capsys, target, how, why):
    d = tmp_path / "index"
    built = ensure(corpus[0], 64, ["vocab_rarity"], d)["vocab_rarity"]
    clean = {k: np.array(v) for k, v in built.items()}
    capsys.readouterr()
    where = os.path.join(index_cache.slot(str(d), 64, "vocab_rarity"), "vocab_rarity")
    path = os.path.join(where, target if target == "info.json" else target + ".npy")
    raw = open(path, "rb").read()
    if how == "delete":  # spoil one file of the index
        os.remove(path)
    elif how == "short":
        np.save(path, np.load(path)[:-1])
    else:
        open(path, "wb").write({"truncate": raw[: len(raw) // 2],
                                "garbage": np.random.default_rng(1).bytes(len(raw)),
                                "empty": b"", "keys": b'{"a": 1}'}[how])
    index = ensure(corpus[0], 64, ["vocab_rarity"], d)["vocab_rarity"]
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 2 and out[0].startswith(f"index {where}: ")
    assert why in out[0] and out[0].endswith("; rebuilding")
    assert out[1].startswith("built index vocab_rarity")
    for k in analyzer.KEYS:
        assert np.array_equal(index[k], clean[k]) and index[k].dtype == clean[k].dtype
    ensure(corpus[0], 64, ["vocab_rarity"], d)
    assert capsys.readouterr().out == ""  # the rebuilt index is whole: loaded as it is


def test_a_nan_metric_is_refused(corpus, tmp_path, monkeypatch):
    monkeypatch.setitem(analyzer.METRICS, "nan", lambda s, p: np.where(s[:, 0] == 1, np.nan, 0.0))
    nan = r"metric nan gave NaN for \d+ samples \(first: \d+\); make it return numbers"
    with pytest.raises(ValueError, match=nan):
        ensure(corpus[0], 64, ["nan"], tmp_path / "index")
    slot = index_cache.slot(str(tmp_path / "index"), 64, "nan")
    assert not os.path.exists(os.path.join(slot, "nan"))
    with pytest.raises(ValueError, match=nan):  # the demos' index in memory too
        analyzer.metric_index(corpus[0], 64, "nan")


def _at_start(initializer=index_cache._worker_signals):
    """The worker initializer, after noting the signal mask the worker was forked with."""
    global _forked_mask
    _forked_mask = signal.pthread_sigmask(signal.SIG_BLOCK, [])
    initializer()


def _dispositions(_):
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, [])
    return (signal.getsignal(signal.SIGTERM) is signal.SIG_DFL,
            signal.getsignal(signal.SIGINT) is signal.SIG_IGN,
            signal.SIGTERM in _forked_mask, signal.SIGTERM in mask)


def test_workers_die_on_sigterm_under_the_trainers_stop_handler(monkeypatch):
    """Pool.terminate() stops workers idle on its queue's lock with SIGTERM. Forked under train.py,
    a worker inherited the handler that only notes a signal, ignored it, and the index build hung
    in join (seen in a run); and a SIGTERM that reached a worker before its initializer reset that
    handler did the same (seen in the suite): so SIGTERM is blocked from the fork until the
    initializer has set SIG_DFL, then unblocked."""
    monkeypatch.setattr(index_cache, "_worker_signals", _at_start)
    old = signal.signal(signal.SIGTERM, lambda signum, frame: None)  # as launch.process installs
    try:
        got = set(index_cache.parallel_map(_dispositions, range(8), 2))
    finally:
        signal.signal(signal.SIGTERM, old)
    # SIGTERM kills; Ctrl-C goes to the trainer, which stops the run
    assert got == {(True, True, True, False)}
    # nor blocked in the parent
    assert signal.SIGTERM not in signal.pthread_sigmask(signal.SIG_BLOCK, [])


def test_import_is_light():
    """train.py --help imports the analyzer: it must not pull in torch; nor does it import the
    project's plumbing."""
    code = ("import sys, analyzer; print('torch' in sys.modules, "
            "sorted(m for m in sys.modules if m.startswith(('support', 'services'))))")
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert r.stdout.strip() == "False []", r.stderr


def test_the_command_line_says_the_index_is_up_to_date_or_what_is_wrong_in_one_line(
        domain_corpus, tmp_path, capsys):
    """python -m services.index on a built index says so; an unknown metric or a corpus too short
    is one line."""
    args = [f"--data_dir={domain_corpus}", "--block_size=16", f"--index_dir={tmp_path}",
            "--num_workers=1"]
    index_cache.main(args)
    capsys.readouterr()
    index_cache.main(args)
    n = len(data.SampleWindows(os.path.join(domain_corpus, "train.bin"), 16))
    where = os.path.join(index_cache.slot(str(tmp_path), 16, "vocab_rarity"), "vocab_rarity")
    assert capsys.readouterr().out == f"index {where}: {n:,} samples of 16+1 tokens, up to date\n"
    cli = [sys.executable, "-m", "services.index", args[0], f"--index_dir={tmp_path / 'i'}"]
    known = ", ".join(analyzer.METRICS)
    for flag, want in (("--metrics=nope", f"unknown metric 'nope'; known: {known}\n"),
                       ("--block_size=100000", "fewer than block_size+1")):
        r = subprocess.run(cli + [flag], capture_output=True, text=True, cwd=ROOT)
        assert r.returncode != 0 and r.stderr.strip().count("\n") == 0 and want in r.stderr
    assert not os.path.exists(tmp_path / "i")


PIPED = """
import sys, time
import analyzer, data
from services import index
index.INTERVAL = 0
sort = analyzer.sort_index
analyzer.sort_index = lambda v: time.sleep(0.3) or sort(v)  # a long sort
data.load_meta(sys.argv[1], 300, index.recorded_scan)  # a nanoGPT directory: hashed
index.main([f"--data_dir={sys.argv[1]}", "--block_size=16", "--num_workers=1"])
"""


def test_progress_lines_when_stdout_is_a_pipe(tmp_path):
    """With stdout a pipe (nohup, a scheduler, | tee) tqdm's bars vanish: each long phase (hashing,
    counting, scoring, sorting and saving) prints lines with what is done, the rate and the time
    left; the build ends with its total time and rate, as any build's (its line:
    test_stale_index_rebuilt_and_one_kept_per_block_size). Here every update prints
    (INTERVAL = 0), and the thread speaks during the sort."""
    rng = np.random.default_rng(0)
    # a nanoGPT directory
    rng.integers(0, 300, 40_000, dtype=np.uint16).tofile(tmp_path / "train.bin")
    rng.integers(0, 300, 5_000, dtype=np.uint16).tofile(tmp_path / "val.bin")
    r = subprocess.run([sys.executable, "-c", PIPED, str(tmp_path)], cwd=ROOT,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=120)
    assert r.returncode == 0 and r.stderr == "", r.stderr  # no bar: stderr is a pipe too
    out, rate = r.stdout, r"[\d.]+\w? tokens/s"
    for phase in ("hashing .*", "counting tokens", "scoring vocab_rarity"):
        line = rf"^{phase}: [\d.]+\w? of [\d.]+\w? tokens \(\d+%\), {rate}, \d+ s left$"
        assert re.search(line, out, re.M), out
    assert "\nsorting and saving vocab_rarity (2,499 samples): 0 s so far\n" in out, out
