"""data.py: tokenizer, sample windows, the by-file split, domains, the Python-installation corpus,
streaming, skipped inputs, all-or-nothing writes, nanoGPT format, vocabulary and size checks,
fingerprints, bad input; and services/index.py, which hashes a nanoGPT directory once and then
reads its record."""

import collections
import hashlib
import json
import os
import pickle
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
import tracemalloc

import numpy as np
import pytest

import data
from autoscale.domains import window_domains
from services import index as bins

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run_cli(*args):
    return subprocess.run([sys.executable, os.path.join(ROOT, "data.py"), *args],
                          capture_output=True, text=True)


def read_split(out, split):
    return np.fromfile(os.path.join(out, f"{split}.bin"), dtype=np.uint16)


def docs_of(tokens):
    """A split's documents as strings (EOT separates them)."""
    # each part after the first starts with its EOT
    parts = np.split(tokens, np.flatnonzero(tokens == data.EOT))
    return [data.decode(parts[0])] + [data.decode(p[1:]) for p in parts[1:]]


def both_splits(out):
    return docs_of(read_split(out, "train")), docs_of(read_split(out, "val"))


def write_files(root, files):
    """files {relative path: text or bytes} written under the directory root (a pathlib.Path)."""
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(text if isinstance(text, bytes) else text.encode())


def snapshot(d):
    return {os.path.relpath(os.path.join(r, f), d): open(os.path.join(r, f), "rb").read()
            for r, _, files in os.walk(d) for f in files}


def prepare(src, out, verbose=False, **kwargs):
    """data.prepare of src (None: the Python installation) into out at block_size 16."""
    return data.prepare(src and [str(src)], str(out), block_size=16, verbose=verbose, **kwargs)


# -----------------------------------------------------------------------------
# tokenizer and windows


def test_round_trip_bytes_ids_bytes():
    text = "héllo, wörld\n\tdef f(): return 1 ✓"
    ids = data.encode(text)
    assert ids.dtype == np.uint16 and ids.max() < 256 and list(data.encode("hi")) == [104, 105]
    # EOT prints as a newline
    assert data.decode(ids) == text and data.decode([104, data.EOT, 105]) == "h\ni"


def test_windows_count_and_contents(tmp_path):
    """tokens 0..9, T=3 -> N = (10-1)//3 = 3 windows sharing boundary tokens."""
    np.arange(10, dtype=np.uint16).tofile(tmp_path / "t.bin")
    w = data.SampleWindows(str(tmp_path / "t.bin"), 3)
    assert len(w) == 3 and w.get([0, 1, 2]).tolist() == [[0, 1, 2, 3], [3, 4, 5, 6], [6, 7, 8, 9]]
    assert w.get([2, 0]).tolist() == [[6, 7, 8, 9], [0, 1, 2, 3]] and w.get([0]).dtype == np.int64
    assert w.get_range(1, 3).tolist() == [[3, 4, 5, 6], [6, 7, 8, 9]]
    assert window_domains(w) is None  # no meta.json beside it


# -----------------------------------------------------------------------------
# prepare: by-file split, determinism, streaming


def test_prepare_hand_built_corpus_split_by_file(tmp_path):
    """3 files of 300 / 300 / 400 bytes, val_fraction 0.25: val is the first shuffled file (>= 250
    bytes), whole."""
    src = tmp_path / "src"
    write_files(src, {"a.txt": "a" * 300, "b.txt": "b" * 300, "c.txt": "c" * 400, ".hidden": "x"})
    meta = prepare(src, tmp_path / "out", val_fraction=0.25)
    train, val = read_split(tmp_path / "out", "train"), read_split(tmp_path / "out", "val")
    # two documents and one EOT in train, one document in val
    assert len(docs_of(val)) == 1 and len(docs_of(train)) == 2 and (val == data.EOT).sum() == 0
    # whole files, hidden one skipped
    assert sorted(docs_of(train) + docs_of(val)) == ["a" * 300, "b" * 300, "c" * 400]
    assert json.loads((tmp_path / "out" / "meta.json").read_text()) == meta
    assert meta["vocab_size"] == 257 and meta["max_token_id"] == data.EOT and "domains" not in meta
    # train.py asking for a smaller model than the corpus's ids
    with pytest.raises(ValueError, match=r"id 256 \(meta.json max_token_id\), not below .* 200"):
        data.load_meta(str(tmp_path / "out"), 200)
    # deterministic, and chunk boundaries change nothing: 7-byte reads (data.read) write the
    # same bytes
    prepare(src / "*.txt", tmp_path / "again", val_fraction=0.25, chunk_size=7)
    assert snapshot(tmp_path / "again") == snapshot(tmp_path / "out")


def test_one_file_is_cut_like_nanogpt_input_txt(tmp_path):
    """A domain of one document (e.g. nanoGPT's shakespeare input.txt): train = its first 90%, val =
    the rest, read in chunks from where each part starts (data.read of bytes start..stop-1)."""
    text = "".join(f"line {k}: to be or not to be\n" for k in range(40))  # 1,170 bytes
    (tmp_path / "input.txt").write_text(text)
    for chunk_size in (1 << 20, 7):
        meta = prepare(tmp_path / "input.txt", tmp_path / "out", chunk_size=chunk_size)
        train, val = read_split(tmp_path / "out", "train"), read_split(tmp_path / "out", "val")
        assert len(val) == len(text) // 10 and data.decode(np.concatenate([train, val])) == text
        assert meta["n_documents"] == 1 and meta["train_tokens"] == len(text) - len(val)


def test_no_content_in_both_splits_and_duplicates_read_once(tmp_path):
    """40 files (5 of them copies of others): every distinct text is in exactly one split, exactly
    once."""
    files = {f"d{k}/f{k}.txt": f"<{k}>" + f"text of file {k}. " * (20 + k) for k in range(35)}
    # same content, other names
    files.update({f"copy{k}.txt": files[f"d{k}/f{k}.txt"] for k in range(5)})
    write_files(tmp_path / "src", files)
    meta = prepare(tmp_path / "src", tmp_path / "out", val_fraction=0.2)
    train, val = both_splits(tmp_path / "out")
    # 35 documents, once
    assert sorted(train + val) == sorted(set(files.values())) and not set(train) & set(val)
    assert meta["skipped"] == {"duplicate": 5} and meta["n_documents"] == 35
    # val: the shortest prefix reaching 20% of the bytes
    assert 0.2 * sum(map(len, train + val)) <= sum(map(len, val))


def test_two_documents_split_near_the_asked_fraction_at_a_line_end(tmp_path, capsys):
    """A corpus that comes as valid.txt and test.txt prepared as two documents, the larger in val:
    53% of the bytes in val for --val_fraction=0.1, with no note. Now val's document is cut at a
    line end."""
    valid = "".join(f"line {k} of the valid file\n" for k in range(400))
    test = "".join(f"line {k} of the test file, a bit longer\n" for k in range(400))
    write_files(tmp_path / "src", {"valid.txt": valid, "test.txt": test})
    meta = prepare(tmp_path / "src", tmp_path / "out", verbose=True)
    out = capsys.readouterr().out
    # a line end past 10%
    assert 0.1 <= meta["val_tokens"] / (meta["train_tokens"] + meta["val_tokens"]) < 0.102
    val = data.decode(read_split(tmp_path / "out", "val"))
    # whole lines, from the start of a file
    assert val.endswith("\n") and val.startswith("line 0 of the ")
    assert re.search(r"^note: few documents: whole files would put far more than --val_fraction=0.1"
                     r" in val, so .*(valid|test)\.txt is cut at a line end: its first [\d,]+ "
                     r"bytes in val, the other [\d,]+ in train \(more files avoid it\)$", out, re.M)


def test_prepare_streams_in_chunks(tmp_path, monkeypatch):
    """What prepare holds at once (in 64K-token chunks: tracemalloc's peak plus the largest
    np.memmap made, whose touched pages are resident memory tracemalloc misses) does not grow with
    its input: for 3 and 6 MB (one large document, 20 or 40 small ones) it differs by under 5% of
    the extra 3 MB. Peak RSS grew 1.74 MB per MB of input (issue 26): each token file was mapped
    whole and every page touched (max, sha256), and each document was mapped whole too."""
    rng = np.random.default_rng(0)
    words = np.array(["alpha", "beta", "gamma", "delta", "def", "return", "\n"])
    held, sizes, maps, real_memmap = [], [], [np.zeros(0)], np.memmap
    monkeypatch.setattr(np, "memmap", lambda *a, **k: maps.append(real_memmap(*a, **k)) or maps[-1])
    for k in (1, 2):
        files = {"big.txt": " ".join(rng.choice(words, 450_000 * k))}
        files.update({f"small{j}.txt": " ".join(rng.choice(words, 8000)) for j in range(20 * k)})
        write_files(tmp_path / f"src{k}", files)
        tracemalloc.start()
        try:
            meta = prepare(tmp_path / f"src{k}", tmp_path / f"out{k}", chunk_size=1 << 16)
            peak = tracemalloc.get_traced_memory()[1] + max(m.nbytes for m in maps)
        finally:
            tracemalloc.stop()
        sizes.append(sum(len(t) for t in files.values()))
        # EOTs between 20k+1 docs
        assert meta["train_tokens"] + meta["val_tokens"] == sizes[-1] + 20 * k - 1
        held.append(peak)
    assert sizes[0] > 3e6 and sizes[1] > 6e6
    growth = (held[1] - held[0]) / (sizes[1] - sizes[0])
    assert growth < 0.05, f"{growth:.2f} MB per MB ({held[0] / 1e6:.1f}, {held[1] / 1e6:.1f} MB)"
    assert held[1] < sizes[1] / 2  # a few chunks, not the input


# -----------------------------------------------------------------------------
# the Python installation as a corpus, and domains


@pytest.fixture
def fake_python(tmp_path, monkeypatch):
    """A tiny installation: a standard library (with its own site-packages to ignore) and one
    package directory."""
    lib, site = tmp_path / "lib", tmp_path / "site"
    topics = {"if": "The if statement is used for conditional execution. " * 8,
              "for": "The for statement is used to iterate over the elements of a sequence. " * 8}
    write_files(lib, {"os.py": "import sys\n" * 40, "README.txt": "not .py\n" * 10,
                      "json/decoder.py": "def decode(s):\n    pass\n" * 20,
                      "test/test_os.py": "def test_os():\n    assert True\n" * 15,
                      "pydoc_data/topics.py": "# Autogenerated\ntopics = " + repr(topics) + "\n",
                      "site-packages/old.py": "not part of the installation\n" * 10,
                      "__pycache__/os.cpython-311.pyc": b"\x00\x01binary"})
    write_files(site, {"pkg/mod.py": "x = 1\n" * 50, "pkg/copy_of_os.py": "import sys\n" * 40,
                       "pkg/tests/test_mod.py": "def test_x():\n    pass\n" * 25,
                       "pkg/blob.py": b"\x7fELF\x00\x00" * 30})
    paths = {"stdlib": str(lib), "platstdlib": str(lib), "purelib": str(site), "platlib": str(site)}
    monkeypatch.setattr(data.sysconfig, "get_paths", lambda: paths)
    return topics


def test_standard_library_domains(fake_python, tmp_path):
    """code: os.py, json/decoder.py; tests: test/test_os.py; prose: two topics. val_fraction 0.3
    puts one document of each domain with two in val; the lone test file is cut, its last 30% in
    val. An EOT counts to the document before it; the last document of a split has none."""
    meta = prepare(None, tmp_path / "out", val_fraction=0.3)
    assert meta["domains"] == ["code", "tests", "prose"] and meta["source"] == "stdlib"
    # another Python, another standard library
    assert meta["python"] == sys.version.split()[0]
    n_code, n_tests = 11 * 40 + 24 * 20, 31 * 15
    n_if, n_for = (len(t) for t in fake_python.values())
    train, val = meta["domain_tokens"]["train"], meta["domain_tokens"]["val"]
    assert [t + v for t, v in zip(train, val)] == [n_code + 2, n_tests + 2, n_if + n_for]
    assert val[1] == int(n_tests * 0.3) + 1 and train[2] in (n_if, n_for)
    assert val[0] - 1 in (11 * 40, 24 * 20)
    texts = sum(both_splits(tmp_path / "out"), [])
    # topics as text, one document each, not the Python literal
    assert set(fake_python.values()) <= set(texts)
    # test_os.py in two
    assert not any("not part of" in t or "topics = " in t for t in texts) and len(texts) == 6
    # Docker's python images delete every test/ directory: the tests domain is empty (prepare raised
    # an IndexError)
    shutil.rmtree(tmp_path / "lib" / "test")
    tokens = prepare(None, tmp_path / "out")["domain_tokens"]
    assert tokens["train"][1] == tokens["val"][1] == 0 < tokens["train"][2]


def test_installed_corpus_dedup_and_split(fake_python, tmp_path):
    meta = prepare(None, tmp_path / "out", installed=True, val_fraction=0.3)
    assert meta["source"] == "installed" and meta["domains"] == ["code", "tests", "prose"]
    # pkg/copy_of_os.py has os.py's content; pkg/blob.py
    assert meta["skipped"] == {"duplicate": 1, "binary": 1}
    train, val = both_splits(tmp_path / "out")
    assert "x = 1\n" * 50 in train + val and "def test_x():\n    pass\n" * 25 in train + val
    # whole files would put over 60% of code in val (asked: 30%): one is cut at a line end, in two
    assert len(train + val) == meta["n_documents"] + 1 == 8 and not set(train) & set(val)
    assert "".join(train + val).count("import sys\n") == 40  # once: its copy was skipped


def test_user_domains_are_contiguous_and_label_windows(tmp_path):
    """Domain a holds only 'a' bytes, b only 'b': a window's domain is the one of its middle token's
    letter."""
    write_files(tmp_path, {f"a/{k}.txt": "a" * (50 + 13 * k) for k in range(12)})
    write_files(tmp_path, {f"b/{k}.md": "b" * (70 + 7 * k) for k in range(12)})
    write_files(tmp_path, {"other.txt": "o" * 60})
    r = run_cli(str(tmp_path / "other.txt"), f"--domain=a={tmp_path}/a/*.txt",
                f"--domain=b={tmp_path}/b", f"--out_dir={tmp_path / 'out'}", "--block_size=8")
    assert r.returncode == 0, r.stderr
    meta = data.load_meta(str(tmp_path / "out"))
    assert meta["domains"] == ["a", "b", "other"]
    for split in ("train", "val"):
        w = data.SampleWindows(str(tmp_path / "out" / f"{split}.bin"), 8)
        middle, dom = w.get(np.arange(len(w)))[:, 4], window_domains(w)
        # ordered by domain
        assert len(dom) == len(w) and (np.diff(dom.astype(int)) >= 0).all()
        known = middle != data.EOT
        # domains a, b, other: the index of the letter in "abo"
        assert (dom[known] == ["abo".index(chr(t)) for t in middle[known]]).all()
        assert meta["domain_offsets"][split][-1] == meta[f"{split}_tokens"]
        assert np.diff(meta["domain_offsets"][split]).tolist() == meta["domain_tokens"][split]
    # each domain with several files gets val documents
    assert meta["domain_tokens"]["val"][:2] != [0, 0]


# -----------------------------------------------------------------------------
# nothing lost: own output, non-text, all-or-nothing replacement, leftovers


def test_second_run_does_not_read_its_own_output_or_other_corpora(tmp_path):
    write_files(tmp_path, {"one.txt": "first document. " * 40, "two.txt": "second document. " * 30,
                           "prog.bin": b"\x7fELF\x02\x01\x01\x00" * 200,
                           "latin1.txt": "caf\xe9 ".encode("latin-1") * 50,
                           "old_corpus/train.bin": b"\x01\x00" * 100, "old_corpus/meta.json": "{}",
                           "old_corpus/notes.txt": "text beside a corpus " * 10})
    out = str(tmp_path / "data")
    first = run_cli(str(tmp_path), f"--out_dir={out}", "--block_size=8")
    second = run_cli(str(tmp_path), f"--out_dir={out}", "--block_size=8")
    assert first.returncode == 0 and second.returncode == 0, second.stderr
    # ties in walk order
    assert "skipped 5 files: 3 in a prepared corpus, 1 not UTF-8, 1 binary" in first.stdout
    assert ("skipped 8 files: 3 in the output directory, 3 in a prepared corpus, 1 not UTF-8, "
            "1 binary") in second.stdout
    meta = data.load_meta(out)
    assert meta["n_documents"] == 2 and meta["train_tokens"] + meta["val_tokens"] == 640 + 510


def test_failed_write_leaves_the_old_corpus_byte_identical(tmp_path, monkeypatch):
    """A disk full mid-write leaves the old corpus as it was and nothing beside it. And built in a
    hidden directory and renamed into place, out_dir still gets the umask's mode (mkdtemp's 0700
    made every corpus private to its owner)."""
    write_files(tmp_path / "src", {f"{k}.txt": f"document {k} " * 30 for k in range(6)})
    out = tmp_path / "out"
    umask = os.umask(0o027)
    try:
        prepare(tmp_path / "src", out)
    finally:
        os.umask(umask)
    assert oct(os.stat(out).st_mode & 0o777) == oct(0o750)
    write_files(out, {"index/info.json": "{}"})
    before = snapshot(out)
    write_files(tmp_path / "src", {"new.txt": "a new document " * 50})
    real_write = data.write_tokens

    def disk_full(f, *args):  # val.bin takes 100 bytes, then the disk is full
        if f.name.endswith("val.bin"):
            f.write(b"x" * 100)
            raise OSError(28, "No space left on device")
        return real_write(f, *args)

    monkeypatch.setattr(data, "write_tokens", disk_full)
    with pytest.raises(OSError, match="No space"):
        prepare(tmp_path / "src", out)
    # no leftover build directory
    assert snapshot(out) == before and sorted(os.listdir(tmp_path)) == ["out", "src"]
    monkeypatch.setattr(data, "write_tokens", real_write)
    assert prepare(tmp_path / "src", out)["n_documents"] == 7
    # the old index/ went with the old data
    assert sorted(os.listdir(out)) == ["meta.json", "train.bin", "val.bin"]


def test_two_first_runs_at_once_prepare_the_default_corpus_once(tmp_path, monkeypatch, capsys):
    """Two train.py started together on a fresh clone both prepared data/stdlib: one's clean-up
    took the other's build, data/stdlib was left empty and both stopped ("holds no train.bin").
    The second now waits on the lock, then finds the first's corpus."""
    monkeypatch.setattr(data, "DEFAULT_DIR", str(tmp_path / "data" / "stdlib"))
    calls = []

    def slow_prepare(out_dir):
        calls.append(out_dir)
        time.sleep(0.5)  # the other run arrives meanwhile
        os.makedirs(out_dir)
        with open(os.path.join(out_dir, "meta.json"), "w") as f:
            f.write("{}")

    monkeypatch.setattr(data, "prepare", slow_prepare)
    runs = [threading.Thread(target=data.corpus_dir) for _ in range(2)]
    for run in runs:
        run.start()
        time.sleep(0.05)
    for run in runs:
        run.join()
    assert calls == [data.DEFAULT_DIR]
    assert "waiting for another process that prepares the default corpus" in capsys.readouterr().out
    assert data.corpus_dir() == data.DEFAULT_DIR and len(calls) == 1  # prepared: no lock, no wait


KILLED = """
import os, signal, data
real_rename = os.rename
def write_tokens(f, *a):  # mid-write: a partial token file
    f.write(b"partial")
    os.kill(os.getpid(), signal.SIGKILL)
def rename(src, dst):  # between the renames: out_dir moved aside, the new one not yet in place
    if dst == {out!r}:
        os.kill(os.getpid(), signal.SIGKILL)
    real_rename(src, dst)
{patch}
data.prepare([{src!r}], {out!r}, block_size=16, verbose=False)
"""


@pytest.mark.parametrize("when", ["mid_write", "between_renames"])
def test_kill_9_leaves_the_old_corpus_and_the_next_run_cleans_up(tmp_path, when):
    """kill -9 mid-write leaves out_dir as it was and a hidden build directory, which the next
    prepare deletes; after out_dir was moved aside and before the new corpus took its place, out_dir
    is missing until the next prepare (even one that fails) puts the old corpus back, and nothing
    else is left."""
    write_files(tmp_path / "src", {f"{k}.txt": f"document {k} " * 300 for k in range(8)})
    out = tmp_path / "out"
    prepare(tmp_path / "src", out)
    before = snapshot(out)
    write_files(tmp_path / "src", {"new.txt": "a new document " * 50})
    patch = "data.write_tokens = write_tokens" if when == "mid_write" else "os.rename = rename"
    code = KILLED.format(out=os.path.realpath(out), src=str(tmp_path / "src"), patch=patch)
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True)
    assert r.returncode == -signal.SIGKILL, r.stderr
    # what the killed run left behind
    assert any(n.startswith(".out.tmp-") for n in os.listdir(tmp_path))
    if when == "mid_write":
        assert snapshot(out) == before
        assert prepare(tmp_path / "src", out)["n_documents"] == 9
    else:
        assert not out.exists()
        with pytest.raises(ValueError, match="no such file"):
            prepare(tmp_path / "nope.txt", out)
        assert snapshot(out) == before
    assert sorted(os.listdir(tmp_path)) == ["out", "src"]


def test_only_a_corpus_out_dir_is_replaced_and_never_by_user_files_in_ours(tmp_path, monkeypatch):
    """`python data.py MY_TEXT_DIR` used to prepare into data/stdlib, and every later train.py
    trained on the user's files. Now one line names --out_dir=data/NAME; both corpora stay. A
    directory holding more than a corpus is never replaced."""
    write_files(tmp_path, {f"mine/{k}.txt": f"my document {k}. " * 40 for k in range(4)})
    write_files(tmp_path, {"keep/notes.md": "keep me"})
    with pytest.raises(ValueError, match="more than a corpus.*notes.md"):
        prepare(tmp_path / "mine", tmp_path / "keep")
    assert snapshot(tmp_path / "keep") == {"notes.md": b"keep me"}
    default, installed = tmp_path / "data" / "stdlib", tmp_path / "data" / "installed"
    for d in (default, installed):  # stand-ins, prepared before they take the corpora's places
        prepare(tmp_path / "mine" / "0.txt", d)
    monkeypatch.setattr(data, "DEFAULT_DIR", str(default))
    monkeypatch.setattr(data, "INSTALLED_DIR", str(installed))
    os.symlink(default, tmp_path / "link")
    before = snapshot(tmp_path / "data")
    mine = str(tmp_path / "mine")
    for argv in ([mine], [mine, f"--out_dir={default}"], [mine, f"--out_dir={tmp_path / 'link'}"],
                 [f"--domain=a={mine}", f"--out_dir={installed}"]):
        with pytest.raises(SystemExit) as e:
            data.main(argv + ["--block_size=16"])
        assert str(e.value).startswith("error: ") and "\n" not in str(e.value)
        assert "--out_dir=data/NAME" in str(e.value), str(e.value)
    assert snapshot(tmp_path / "data") == before
    assert sorted(os.listdir(tmp_path / "data")) == ["installed", "stdlib"]  # nothing beside them
    data.main([mine, f"--out_dir={tmp_path / 'data' / 'mine'}", "--block_size=16"])  # the fix works
    assert data.load_meta(str(tmp_path / "data" / "mine"))["n_documents"] == 4


BAD_CORPUS = {"missing": (["{d}/nope.txt"], "no such file"),
              # was an IndexError
              "empty_domain": (["--domain=a={d}/[ab].txt", "--domain=e={d}/e.txt"],
                               "domain e holds no text"),
              # skipped as empty, not a crash on reading it
              "empty": (["{d}/e.txt"], "(1 empty)"),
              "short": (["{d}/s.txt", "--block_size=64"], "too short"),
              # two files of 120 bytes: too short for data.py's default block_size, train.py's 128
              "default_block_size": (["{d}/a.txt", "{d}/b.txt"], "block_size+1 = 129"),
              "domain": (["--domain", "code"], "is not NAME=GLOB")}


@pytest.mark.parametrize("args, want", BAD_CORPUS.values(), ids=list(BAD_CORPUS))
def test_bad_corpus_one_line_no_files(tmp_path, args, want):
    write_files(tmp_path, {"e.txt": "", "s.txt": "tiny", "a.txt": "a" * 120, "b.txt": "b" * 120})
    r = run_cli(*(a.format(d=tmp_path) for a in args), "--out_dir", str(tmp_path / "out"))
    lines = r.stderr.strip().splitlines()
    assert r.returncode != 0 and len(lines) == 1, lines
    assert lines[0].startswith("error:") and want in lines[0], lines
    # no out_dir, nothing hidden
    assert sorted(os.listdir(tmp_path)) == ["a.txt", "b.txt", "e.txt", "s.txt"]


# -----------------------------------------------------------------------------
# nanoGPT directories, token ids, sizes, fingerprints


def test_a_nanogpt_directory_needs_its_vocabulary_and_its_ids_below_it(tmp_path):
    """train.bin/val.bin of uint16 ids and no meta.json: train.py's load_meta asks for --vocab_size
    and checks every id against it (test_an_unchanged_nanogpt_corpus_is_not_read_again); data.py's
    command line leaves such a directory as it is, in one line."""
    np.arange(1000, dtype=np.uint16).tofile(tmp_path / "train.bin")  # ids up to 999
    np.arange(300, dtype=np.uint16).tofile(tmp_path / "val.bin")
    with pytest.raises(ValueError, match="nor meta.pkl; pass its tokenizer's --vocab_size"):
        data.load_meta(str(tmp_path))
    meta = data.load_meta(str(tmp_path), 1000)
    assert meta["vocab_size"] == 1000 and meta["max_token_id"] == 999
    # read where it is: nothing to prepare
    r = run_cli(str(tmp_path), "--out_dir", str(tmp_path / "other"))
    assert r.returncode == 1 and r.stderr.count("\n") == 1 and "2 in a prepared corpus" in r.stderr
    assert sorted(os.listdir(tmp_path)) == ["train.bin", "val.bin"]


def nanogpt_char_dataset(d):
    """A directory as nanoGPT's data/shakespeare_char/prepare.py writes it: uint16 char ids,
    meta.pkl (tests/test_train.py trains on one)."""
    text = "First Citizen:\nBefore we proceed any further, hear me speak.\n" * 200
    itos = dict(enumerate(sorted(set(text))))
    stoi, V = {c: i for i, c in itos.items()}, len(itos)
    ids = np.array([stoi[c] for c in text], dtype=np.uint16)
    cut = int(0.9 * len(ids))
    ids[:cut].tofile(d / "train.bin")
    ids[cut:].tofile(d / "val.bin")
    (d / "meta.pkl").write_bytes(pickle.dumps({"vocab_size": V, "itos": itos, "stoi": stoi}))
    return V, itos


def test_a_nanogpt_meta_pkl_gives_the_vocabulary_and_the_decoder(tmp_path):
    """nanoGPT's meta.pkl was not read ('no meta.json ... pass --vocab_size')."""
    V, itos = nanogpt_char_dataset(tmp_path)
    meta = data.load_meta(str(tmp_path))
    assert meta["vocab_size"] == V and meta["itos"] == [itos[i] for i in range(V)]
    with pytest.raises(ValueError, match=f"--vocab_size=99 but .*meta.pkl says {V}; drop the flag"):
        data.load_meta(str(tmp_path), 99)
    with open(tmp_path / "meta.pkl", "wb") as f:  # not plain data: never unpickled
        pickle.dump({"vocab_size": V, "itos": collections.OrderedDict(itos)}, f)
    with pytest.raises(ValueError, match="refers to collections.OrderedDict, not plain data"):
        data.load_meta(str(tmp_path))


REFUSED = {"missing": "--data_dir={d} does not exist; prepare your text with python data.py "
                      "FILES --out_dir=data/NAME",
           "file": "--data_dir={d} is not a directory",
           "text": "{d} holds no train.bin: it is not a prepared corpus; prepare it with python "
                   "data.py {d} --out_dir=",
           "changed": "{d}/val.bin holds 2 tokens but {d}/meta.json records 1: the files changed "
                      "after it",
           "bad_json": "{d}/meta.json is not valid JSON",
           "empty": "{d}/val.bin is empty: not a uint16 token file",
           "odd": "{d}/val.bin is 101 bytes, an odd length"}


@pytest.mark.parametrize("case", REFUSED)
def test_what_train_py_reads_is_checked_in_one_line(tmp_path, case):
    d, want = tmp_path / "d", REFUSED[case]
    if case == "file":
        d.write_text("x")
    elif case == "text":
        write_files(d, {"a.txt": "hello"})
    elif case != "missing":
        n_val = {"empty": 0, "odd": 101}.get(case, 4)
        write_files(d, {"train.bin": b"\x01\x00" * 500, "val.bin": b"\x01" * n_val})
    if case in ("changed", "bad_json"):
        meta = '{"vocab_size": 257, "train_tokens": 500, "val_tokens": 1}'
        (d / "meta.json").write_text(meta if case == "changed" else meta[:20])  # JSON cut short
    with pytest.raises(ValueError, match=re.escape(want.format(d=d))):
        data.load_meta(str(d), 600)
    if case in ("empty", "odd"):  # SampleWindows too
        with pytest.raises(ValueError, match=re.escape(want.format(d=d))):
            data.SampleWindows(str(d / "val.bin"), 8)


def test_fingerprint_entropy_and_counts_of_both_splits_at_any_chunk_size(corpus, tmp_path):
    """One pass per split gives the largest id, the fingerprint (bit for bit the whole-file hash of
    hashes, so the same tokens as a nanoGPT directory give the same one, and one changed token or a
    moved split point another) and the train split's unigram entropy H = -sum_u p(u) ln p(u), at any
    chunk size."""
    train, val = read_split(corpus, "train"), read_split(corpus, "val")
    inner = hashlib.sha256(train.tobytes()).digest() + hashlib.sha256(val.tobytes()).digest()
    p = np.unique(train, return_counts=True)[1] / len(train)
    want = {"max_token_id": int(max(train.max(), val.max())), "train_tokens": len(train),
            "val_tokens": len(val), "fingerprint": hashlib.sha256(inner).hexdigest()[:32],
            "unigram_entropy": pytest.approx(float(-(p * np.log(p)).sum()), rel=1e-12)}
    # 7-token reads: the same
    assert data.scan_bins(corpus) == want and data.scan_bins(corpus, chunk=7) == want
    assert {k: data.load_meta(corpus)[k] for k in want} == want  # as prepare recorded them
    # as it is, one token changed, split one later
    for changed in ((train, val), (train, np.where(np.arange(len(val)) == 7, (val + 1) % 256, val)),
                    (np.concatenate([train, val[:1]]), val[1:])):
        changed[0].tofile(tmp_path / "train.bin")
        changed[1].tofile(tmp_path / "val.bin")
        fp = data.load_meta(str(tmp_path), 257)["fingerprint"]  # read whole, as train.py reads it
        assert (fp == want["fingerprint"]) == (changed[1] is val)


def rss_file_kb():
    """Resident memory backed by files (mapped token files among them), in kB, as /proc reports
    it."""
    with open("/proc/self/status") as f:
        return int(f.read().split("RssFile:")[1].split()[0])


@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="Linux's /proc")
def test_batches_read_through_a_fresh_map_are_the_same_and_leave_no_resident_pages(tmp_path):
    """windows.get opens the token file's map for each read (as nanoGPT's get_batch): the same rows
    as indexing one map held open, and the pages it touched do not stay in this process's resident
    memory."""
    rng = np.random.default_rng(0)
    rng.integers(0, 50257, 16 << 20, dtype=np.uint16).tofile(tmp_path / "train.bin")  # 32 MB
    T = 128
    windows = data.SampleWindows(str(tmp_path / "train.bin"), T)
    before = rss_file_kb()
    # 1,600 random windows: a held map keeps every page (or large folio) they touch
    for _ in range(100):
        windows.get(rng.integers(0, len(windows), 16))
    assert rss_file_kb() - before < 2048, (before, rss_file_kb())
    held = np.memmap(tmp_path / "train.bin", dtype=np.uint16, mode="r")
    for _ in range(20):  # the old path: one map, fancy-indexed
        ids = rng.integers(0, len(windows), 16)
        assert np.array_equal(windows.get(ids), held[ids[:, None] * T + np.arange(T + 1)])


# -----------------------------------------------------------------------------
# a nanoGPT corpus is identified by its files' stat, hashed only when that changes (issue 41,
# services/index.py)


def nanogpt_copy(corpus, d, age_s=60):
    """corpus's two token files in d (no meta.json: a nanoGPT directory), last modified age_s ago
    (a file modified within 2 s of its hash is not recorded: its mtime could hide a second
    write)."""
    os.makedirs(d, exist_ok=True)
    for name in ("train.bin", "val.bin"):
        (d / name).write_bytes(open(os.path.join(corpus, name), "rb").read())
        t = os.stat(d / name).st_mtime_ns - age_s * 10**9
        os.utime(d / name, ns=(t, t))
    return str(d)


@pytest.fixture
def start(monkeypatch):
    """-> (start(d, vocab_size=257): data.load_meta as train.py's new process calls it, [d of each
    full read])."""
    scans, scan_bins = [], data.scan_bins
    monkeypatch.setattr(data, "scan_bins", lambda *a, **k: scans.append(a[0]) or scan_bins(*a, **k))

    def new_start(d, vocab_size=257):
        monkeypatch.setattr(bins, "_hashed", {})  # nothing hashed in this process yet
        return data.load_meta(d, vocab_size, bins.recorded_scan)
    return new_start, scans


def test_an_unchanged_nanogpt_corpus_is_not_read_again(corpus, tmp_path, start, capsys):
    """The first start hashes both splits and records their (size, mtime, ctime, inode) beside them;
    the next starts read only that record: no full read, and the same meta (fingerprint, entropy,
    counts) as a full scan."""
    new_start, scans = start
    d = nanogpt_copy(corpus, tmp_path / "nano")
    first = new_start(d)
    assert scans == [d] and re.search(r"^hashing .*nano \([\d,]+ tokens: no record of them yet\)",
                                      capsys.readouterr().out, re.M)
    # the content hash, as today
    assert first["fingerprint"] == data.load_meta(corpus)["fingerprint"]
    assert new_start(d) == first and new_start(d) == first
    assert scans == [d] and capsys.readouterr().out == ""  # not read again, nothing said
    # the largest id is still checked, from the record
    with pytest.raises(ValueError, match=r"holds token id 256 \(its token files\), not below the "
                                         r"vocabulary size 100; .*\(at least --vocab_size=257\)"):
        new_start(d, 100)
    fresh = nanogpt_copy(corpus, tmp_path / "fresh", age_s=0)  # just written: not recorded
    new_start(fresh)
    # the same process: what it hashed (train.py asks twice)
    data.load_meta(fresh, 257, bins.recorded_scan)
    assert scans == [d, fresh] and not os.path.exists(os.path.join(fresh, bins.SCAN_RECORD))
    new_start(fresh)  # the next start reads it whole again
    assert scans == [d, fresh, fresh]


@pytest.mark.parametrize("how", ["size", "mtime"])
def test_a_changed_nanogpt_corpus_is_hashed_again(corpus, tmp_path, start, capsys, how):
    """One token more (size) or one token changed in place (same size, new mtime): the stat says so,
    the corpus is read whole again with a line naming what changed, and its fingerprint is the new
    content's."""
    new_start, scans = start
    d = nanogpt_copy(corpus, tmp_path / "nano")
    before = new_start(d)
    val = read_split(d, "val")
    # one token more, or token 5 plus one (a byte: still below 256)
    val = np.append(val, val[:1]) if how == "size" else val + (np.arange(len(val)) == 5)
    t = os.stat(os.path.join(d, "val.bin")).st_mtime_ns
    val.astype(np.uint16).tofile(os.path.join(d, "val.bin"))
    # a second later, still 59 s ago
    os.utime(os.path.join(d, "val.bin"), ns=(t + 10**9, t + 10**9))
    capsys.readouterr()
    after = new_start(d)
    out = capsys.readouterr().out
    assert scans == [d, d] and after["fingerprint"] != before["fingerprint"]
    assert re.search(r"^hashing .*nano \([\d,]+ tokens: val.bin changed since "
                     rf"{bins.SCAN_RECORD} ", out, re.M), out
    assert re.search(r"^hashed [\d,]+ tokens in [\d.]+ s \([\d.]+\w? tokens/s\)$", out, re.M), out
    assert new_start(d) == after and len(scans) == 2  # recorded again


def test_a_damaged_record_or_one_of_something_else_is_read_past(corpus, tmp_path, start, capsys):
    """Truncated JSON, or valid JSON that is not scan_bins' record (a hand edit, another tool's
    file): one line saying so and a fresh hash."""
    new_start, scans = start
    d = nanogpt_copy(corpus, tmp_path / "nano")
    want = new_start(d)
    record = tmp_path / "nano" / bins.SCAN_RECORD
    files = json.loads(record.read_text())["files"]
    for junk in ('{"files": ', {"files": {"train.bin": 7}, "scan": want}, [1, 2],
                 {"files": 3, "scan": {}}, {"files": files, "scan": {"train_tokens": 1}}):
        record.write_text(junk if isinstance(junk, str) else json.dumps(junk))
        capsys.readouterr()
        assert new_start(d) == want
        why = r"(scan.json is unreadable|train.bin and val.bin changed)"
        assert re.search(rf"hashing .*\([\d,]+ tokens: {why}", capsys.readouterr().out)
    assert len(scans) == 6
