"""
Text -> token stream (train.bin, val.bin, meta.json) -> fixed-length sample windows.

Follows nanoGPT's data/*/prepare.py (flat uint16 token files read through np.memmap) and gives
DeepSpeed Data Efficiency (arXiv 2212.03597) a fixed set of samples with stable ids for its
analyzer and sampler: sample i is

    sample_i = tokens[i*T : i*T + T + 1],  x = sample_i[:-1], y = sample_i[1:]

so windows share one boundary token and N = (n_tokens - 1) // T.

    python data.py                                # the standard library's .py files -> data/stdlib
    python data.py --installed                    # every installed .py file -> data/installed
    python data.py MY_TEXT --out_dir=data/mytext  # your files, directories or globs
    python data.py --domain code='src/**/*.py' --domain docs=docs --out_dir=data/mine

then train.py --data_dir=data/mytext. Documents are split whole between train and val
(split_documents; with few documents one may be cut at a line end, with a note); each split is its
domains in order, EOT between documents:

    train = [domain 0 docs, shuffled] EOT [domain 1 docs, shuffled] EOT ...   (val alike)

But:
- the tokenizer is plain bytes (ids 0..255) plus one end-of-document id, so any text works with
  no download; nanoGPT-format train.bin / val.bin (e.g. GPT-2 BPE) are read as they are, where
  they are (train.py --data_dir=DIR; the vocabulary from its meta.pkl or --vocab_size);
- the default corpus is the running Python's standard library (found through sysconfig) in three
  domains: `code` (its .py files), `tests` (.py files under test/, tests/, idle_test/ or named
  test_*.py) and `prose` (pydoc_data/topics.py, the documentation topics, as text: one document
  per topic); `--installed` adds every installed package's .py files, in the same domains; user
  files form one unnamed domain, or named ones (`--domain NAME=GLOB`, then the positional paths
  form a last domain "other");
- never read as input: the output directory, any directory holding a train.bin, files that are
  not text (a NUL byte or invalid UTF-8 in their first 8 KB) and duplicates (a path seen before,
  or its content under another name);
- written in chunks through one reused buffer: memory grows with the number of files, not their
  bytes; the corpus is built in a hidden sibling directory and swapped in with two renames, so
  out_dir changes all at once and a killed run leaves the old corpus whole;
- no .idx of document boundaries (DeepSpeed's indexed_dataset.py): meta.json records where each
  domain starts; what train.py reads is checked first (load_meta), in one line naming the fix.
"""

import argparse
import ast
import codecs
import collections
import glob
import hashlib
import io
import json
import os
import pickle
import shutil
import sys
import sysconfig

import numpy as np
from tqdm import tqdm

try:
    import fcntl  # Unix: a lock that dies with its holder
except ImportError:  # Windows: no lock (corpus_dir)
    fcntl = None

EOT = 256  # the end-of-document id written between documents; the others are the bytes 0..255
VOCAB_SIZE = 257  # 256 byte values + EOT
ROOT = os.path.dirname(os.path.abspath(__file__))  # the repository
DEFAULT_DIR = os.path.join(ROOT, "data", "stdlib")
INSTALLED_DIR = os.path.join(ROOT, "data", "installed")
# what out_dir may hold before it is replaced
CORPUS_ENTRIES = {"train.bin", "val.bin", "meta.json", "index", "scan.json"}
PYTHON_DOMAINS = ["code", "tests", "prose"]  # domain ids 0, 1, 2 of the built-in corpora
TEST_DIRS = {"test", "tests", "idle_test"}
# bytes checked for text: no NUL and valid UTF-8 (git's 8000-byte binary test, plus UTF-8)
HEAD = 8192

# -----------------------------------------------------------------------------
# byte-level tokenizer


def encode(text):
    """str or bytes -> uint16 ids. encode("hi") -> [104, 105]"""
    b = text.encode("utf-8") if isinstance(text, str) else bytes(text)
    return np.frombuffer(b, dtype=np.uint8).astype(np.uint16)


def decode(ids):
    """ids -> str; EOT becomes a newline, invalid UTF-8 becomes U+FFFD."""
    ids = np.asarray(ids).ravel()
    b = np.where(ids == EOT, ord("\n"), ids).astype(np.uint8)
    return bytes(b).decode("utf-8", errors="replace")


# -----------------------------------------------------------------------------
# reading a prepared corpus back: sample windows and checks


def n_tokens(path):
    """Tokens in a uint16 token file; one line naming the file if it is missing, empty or of odd
    length."""
    if not os.path.isfile(path):
        raise ValueError(f"no such token file: {path}; prepare the data with python data.py first")
    size = os.path.getsize(path)
    if size == 0 or size % 2:
        problem = "empty" if size == 0 else f"{size} bytes, an odd length"
        raise ValueError(f"{path} is {problem}: not a uint16 token file; prepare it with data.py")
    return size // 2


class SampleWindows:
    """Sample i of a token file = tokens[i*T : i*T + T + 1]; N = (n_tokens - 1) // T.
    tokens = [0..9], T = 3 -> N = 3 samples: [0,1,2,3], [3,4,5,6], [6,7,8,9]"""

    def __init__(self, path, block_size):
        n = n_tokens(path)  # one line for a missing, empty or odd-length file
        self.path, self.block_size = path, block_size
        if n < block_size + 1:
            raise ValueError(f"{path} has {n} tokens, fewer than block_size+1 = {block_size + 1}; "
                             f"use a smaller --block_size or more text")
        self.data = np.memmap(path, dtype=np.uint16, mode="r")  # never the whole corpus in RAM

    def __len__(self):
        return (len(self.data) - 1) // self.block_size

    def get(self, ids):
        """Sample ids (B,) -> int64 tokens (B, T+1), through a map opened for this read alone."""
        T = self.block_size
        offsets = np.asarray(ids, dtype=np.int64)[:, None] * T + np.arange(T + 1)  # (B, T+1)
        # subtle: a fresh map per batch, as nanoGPT's get_batch: the pages a map has touched count
        # as this process's resident memory (RssFile) until it closes, so one map held for the
        # whole run grows toward the file's size
        tokens = np.memmap(self.path, dtype=np.uint16, mode="r")
        return tokens[offsets].astype(np.int64)  # a copy: the map closes when tokens goes

    def get_range(self, start, stop):
        """Samples start..stop-1 as one contiguous read: (stop-start, T+1) int64."""
        T = self.block_size
        flat = self.data[start * T : stop * T + 1]  # uint16 view of the memmap, no copy yet
        windows = np.lib.stride_tricks.sliding_window_view(flat, T + 1)[::T]  # still a view
        return windows.astype(np.int64)  # one contiguous copy


def load_splits(data_dir, block_size, vocab_size=None, scan=None):
    """-> (train windows, val windows, meta) of a prepared data_dir, checked (see load_meta)."""
    meta = load_meta(data_dir, vocab_size, scan)  # checks the largest token id first
    train = SampleWindows(os.path.join(data_dir, "train.bin"), block_size)
    val = SampleWindows(os.path.join(data_dir, "val.bin"), block_size)
    return train, val, meta


def load_meta(data_dir, vocab_size=None, scan=None):
    """meta.json of data_dir, checked: both token files hold its counts, its largest id is below
    vocab_size (if given) and its own. A nanoGPT directory (train.bin and val.bin, no meta.json):
    its vocabulary from meta.pkl or vocab_size, its counts, largest id and fingerprint from
    scan(data_dir) (scan_bins, which reads it whole; services/index.py's recorded_scan reads a
    record of it instead while its files are unchanged)."""
    if not os.path.isdir(data_dir):
        what = "is not a directory" if os.path.exists(data_dir) else "does not exist"
        raise ValueError(f"--data_dir={data_dir} {what}; prepare your text with python data.py "
                         "FILES --out_dir=data/NAME, then pass --data_dir=data/NAME")
    path = os.path.join(data_dir, "meta.json")
    if not os.path.exists(os.path.join(data_dir, "train.bin")):
        raise ValueError(f"{data_dir} holds no train.bin: it is not a prepared corpus; "
                         f"prepare it with python data.py {data_dir} --out_dir=data/NAME, "
                         "then pass --data_dir=data/NAME")
    source = "meta.json max_token_id" if os.path.exists(path) else "its token files"
    if not os.path.exists(path):  # the vocabulary first: its one line comes before a long read
        # scan: one line for a missing, empty or odd file
        meta = {**nanogpt_meta(data_dir, vocab_size), **(scan or scan_bins)(data_dir)}
    else:
        try:
            with open(path) as f:
                meta = json.load(f)
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            raise ValueError(f"{path} is not valid JSON ({e}); "
                             "prepare the corpus again (python data.py)") from None
        for split in ("train", "val"):
            n = n_tokens(os.path.join(data_dir, f"{split}.bin"))
            if meta.get(f"{split}_tokens", n) != n:
                raise ValueError(f"{os.path.join(data_dir, split + '.bin')} holds {n:,} tokens "
                                 f"but {path} records {meta[split + '_tokens']:,}: "
                                 "the files changed after it; prepare the corpus again")
    top = meta.get("max_token_id")
    V = min(v for v in (meta["vocab_size"], vocab_size) if v)
    if top is not None and top >= V:
        raise ValueError(f"{data_dir} holds token id {top} ({source}), not below the vocabulary "
                         f"size {V}; pass the tokenizer's own (at least --vocab_size={top + 1})")
    return meta


def nanogpt_meta(data_dir, vocab_size=None):
    """The vocabulary of a directory holding nanoGPT's train.bin and val.bin: from its meta.pkl if
    it has one (vocab_size; itos decodes a char-level sample), else vocab_size."""
    meta = {"vocab_size": vocab_size, "eot_id": None, "tokenizer": "external"}
    path = os.path.join(data_dir, "meta.pkl")
    if os.path.exists(path):
        with open(path, "rb") as f:
            pkl = _PlainUnpickler(f).load()
        V = meta["vocab_size"] = pkl["vocab_size"]
        if vocab_size not in (None, V):
            raise ValueError(f"--vocab_size={vocab_size} but {path} says {V}; drop the flag")
        if "itos" in pkl:  # {id: str} of nanoGPT's char-level datasets
            meta["itos"] = [pkl["itos"][i] for i in range(V)]
    if meta["vocab_size"] is None:
        raise ValueError(f"{data_dir} holds nanoGPT's train.bin/val.bin but no meta.json nor "
                         "meta.pkl; pass its tokenizer's --vocab_size (e.g. 50257 for GPT-2 BPE)")
    return meta


class _PlainUnpickler(pickle.Unpickler):
    """nanoGPT's meta.pkl holds only dicts, strings and numbers: refuse anything that would run
    code."""

    def find_class(self, module, name):
        raise ValueError(f"meta.pkl refers to {module}.{name}, not plain data; it is not read")


def scan_bins(data_dir, chunk=1 << 20, bar=None):
    """-> {train_tokens, val_tokens, max_token_id, fingerprint, unigram_entropy} of data_dir's token
    files, in one pass per split of chunk-token reads (memory stays flat); bar (tqdm's, or
    services/index.py's Progress) is told the tokens as they are read.
    fingerprint = a hash of both splits' content hashes (so the split point counts too);
    unigram_entropy = -sum_u p(u) ln p(u) over the train split (nats): the loss of a model that
    ignores context. train [5, 5, 7, 7] -> p = [0.5, 0.5] -> ln 2 = 0.6931."""
    meta = {"max_token_id": 0}
    h = hashlib.sha256()
    buf = np.empty(chunk, dtype=np.uint16)  # subtle: one reused buffer, and read(), not np.memmap:
    for split in ("train", "val"):  # a mapping's pages count as this process's memory once touched
        path = os.path.join(data_dir, f"{split}.bin")
        meta[f"{split}_tokens"] = n_tokens(path)  # one line for a missing, empty or odd file
        counts, split_hash = np.zeros(1 << 16, dtype=np.int64), hashlib.sha256()
        with open(path, "rb") as f:
            while n_bytes := f.readinto(buf):
                tokens = buf[: n_bytes // 2]
                counts += np.bincount(tokens, minlength=len(counts))
                split_hash.update(tokens)  # the same digest as hashing the whole file at once
                if bar:
                    bar.update(len(tokens))
        meta["max_token_id"] = max(meta["max_token_id"], int(np.flatnonzero(counts)[-1]))
        h.update(split_hash.digest())
        if split == "train":
            p = counts[counts > 0] / counts.sum()  # p(u) of the ids that occur
            meta["unigram_entropy"] = float(-(p * np.log(p)).sum())  # H = -sum_u p(u) ln p(u)
    return {**meta, "fingerprint": h.hexdigest()[:32]}  # 128 bits are plenty


# -----------------------------------------------------------------------------
# writing a corpus: documents -> train.bin, val.bin, meta.json, all at once


def prepare(paths=None, out_dir=DEFAULT_DIR, val_fraction=0.1, block_size=128, seed=0,
            verbose=True, domains=None, installed=False, chunk_size=1 << 20):
    """Tokenize documents into out_dir/{train.bin, val.bin, meta.json} -> meta. paths: files,
    directories, globs (None: the standard library; installed=True: the whole installation);
    domains: {name: [files, dirs, globs]}. out_dir is replaced whole, only if it holds nothing but a
    corpus, and only if both splits hold a window; user files (paths or domains) never replace the
    default or installed corpus."""
    out_dir = os.path.realpath(out_dir)  # subtle: a symlinked out_dir is replaced where it points
    _check_out_dir(out_dir, bool(paths or domains) and not installed)
    if not 0 < val_fraction < 1:
        raise ValueError(f"val_fraction={val_fraction} must be between 0 and 1")
    names, kept, skipped = documents(paths, domains, installed, out_dir, verbose)
    n_domains = len(names or [None])
    train, val, cuts = split_documents(kept, n_domains, val_fraction, seed)
    n_train, n_val = (sum(n for _, n in s) + max(len(s) - 1, 0) for s in (train, val))  # + EOTs
    if min(n_train, n_val) < block_size + 1:
        raise ValueError(f"corpus too short: {n_train} train and {n_val} val tokens (val takes "
                         f"whole files), each split needs block_size+1 = {block_size + 1}; "
                         "add text or use a smaller --block_size")
    tmp = os.path.join(os.path.dirname(out_dir), f".{os.path.basename(out_dir)}.tmp-{os.getpid()}")
    # subtle: not mkdtemp, whose 0700 would become out_dir's mode; this one follows the umask
    os.makedirs(tmp)
    try:  # plain writes: nothing reads tmp, and a failure deletes it whole
        domain_tokens = {}
        for split, docs in (("train", train), ("val", val)):
            with open(os.path.join(tmp, f"{split}.bin"), "wb") as f:
                domain_tokens[split] = write_tokens(f, docs, n_domains, chunk_size)
        source = "installed" if installed else "files" if paths or domains else "stdlib"
        meta = {"vocab_size": VOCAB_SIZE, "eot_id": EOT, "tokenizer": "bytes",
                **scan_bins(tmp, chunk_size), "source": source, "n_documents": len(kept),
                "val_fraction": val_fraction, "seed": seed, "skipped": skipped,
                # the Python whose standard library (and site-packages) the corpus holds: another
                # version gives other text, so other loss values (train.py's first line says it)
                "python": sys.version.split()[0] if source != "files" else None}
        if names:  # domain d of a split holds its tokens offsets[d] .. offsets[d+1]-1
            offsets = {s: np.cumsum([0] + n).tolist() for s, n in domain_tokens.items()}
            meta.update(domains=names, domain_tokens=domain_tokens, domain_offsets=offsets)
        with open(os.path.join(tmp, "meta.json"), "w") as f:
            json.dump(meta, f, indent=1)
        if os.path.exists(out_dir):
            # subtle: killed before the next rename, _clean_up renames it back
            os.rename(out_dir, tmp + ".old")
        os.rename(tmp, out_dir)
    finally:
        # the old corpus, or a failed build (and out_dir back if the second rename failed)
        _clean_up(out_dir)

    if verbose:
        print(f"wrote {out_dir}: {meta['n_documents']} documents, "
              f"{meta['train_tokens']:,} train, {meta['val_tokens']:,} val")
        for d, name in enumerate(names or []):
            print(f"  domain {d} {name}: "
                  f"{domain_tokens['train'][d]:,} train, {domain_tokens['val'][d]:,} val tokens")
        for doc, to_val, to_train in cuts:
            print(f"note: few documents: whole files would put far more than --val_fraction="
                  f"{val_fraction:g} in val, so {doc.path} is cut at a line end: its first "
                  f"{to_val:,} bytes in val, the other {to_train:,} in train (more files avoid it)")
    return meta


def _check_out_dir(out_dir, user_files):
    """out_dir may be replaced whole: it holds a corpus or nothing, and your files never go where
    the default or installed corpus lives (train.py would train on them)."""
    ours = {os.path.realpath(DEFAULT_DIR): "default", os.path.realpath(INSTALLED_DIR): "installed"}
    if user_files and out_dir in ours:
        raise ValueError(f"{out_dir} is the {ours[out_dir]} corpus's place, not for your files; "
                         f"pass --out_dir=data/NAME (then train.py --data_dir=data/NAME)")
    _clean_up(out_dir)  # first: a killed run may have left out_dir missing, its corpus beside it
    extra = set(os.listdir(out_dir)) - CORPUS_ENTRIES if os.path.isdir(out_dir) else set()
    if os.path.exists(out_dir) and (extra or not os.path.isdir(out_dir)):
        raise ValueError(f"{out_dir} holds more than a corpus "
                         f"({', '.join(sorted(extra)[:3]) or 'it is a file'}) and "
                         f"would be replaced whole; pass a new or corpus-only --out_dir")


def _clean_up(out_dir):
    """Delete what failed or killed runs left beside out_dir (.NAME.tmp-*), except an old corpus
    left without out_dir (killed between the swap's renames): it becomes out_dir again. subtle: one
    prepare per out_dir at a time."""
    parent, base = os.path.split(out_dir)
    pattern = os.path.join(glob.escape(parent), glob.escape(f".{base}.tmp-") + "*")
    for p in sorted(glob.glob(pattern)):
        if p.endswith(".old") and not os.path.exists(out_dir):
            os.rename(p, out_dir)  # the previous corpus comes back
        else:
            shutil.rmtree(p, ignore_errors=True)


def corpus_dir(data_dir="", prepare_default=True):
    """data_dir, or "" for the default corpus (the standard library), which is prepared here on
    first use. The one place that prepares the default corpus: train.py, the demos, the
    experiments and bench.py call it. subtle: two first runs at once (two demos, one thread each)
    prepare it once: the second waits on data/stdlib.lock, then finds it (without fcntl, as on
    Windows, start one run first)."""
    if data_dir or not prepare_default or os.path.exists(DEFAULT_DIR + "/meta.json"):
        return data_dir or DEFAULT_DIR
    os.makedirs(os.path.dirname(DEFAULT_DIR), exist_ok=True)
    with open(DEFAULT_DIR + ".lock", "w") as lock:
        if fcntl:  # the lock goes when the file closes
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                print("waiting for another process that prepares the default corpus ...",
                      flush=True)
                fcntl.flock(lock, fcntl.LOCK_EX)
        if not os.path.exists(DEFAULT_DIR + "/meta.json"):  # else prepared while this one waited
            print("preparing the default corpus (the standard library's .py files) ...", flush=True)
            prepare(out_dir=DEFAULT_DIR)
    return DEFAULT_DIR


def write_tokens(f, docs, n_domains, chunk_size):
    """Stream documents into f as uint16 byte-level ids, EOT between documents -> tokens per domain
    (an EOT counts to the document before it). subtle: one reused buffer keeps memory flat; fresh
    arrays fragment the heap."""
    domain_tokens = [0] * n_domains
    buf = np.empty(chunk_size, dtype=np.uint16)
    for i, (doc, n) in enumerate(docs):
        for b in read(doc, chunk_size):  # (at most chunk_size,) uint8
            np.copyto(buf[: len(b)], b)  # token id = byte value
            f.write(buf[: len(b)])
        if i < len(docs) - 1:  # EOT between documents, none after the last
            f.write(np.uint16(EOT).tobytes())
        domain_tokens[doc.domain] += n + (i < len(docs) - 1)
    return domain_tokens


def split_documents(kept, n_domains, val_fraction, seed):
    """Per domain, a seeded shuffle; val = its shortest prefix holding val_fraction of the domain's
    bytes, never all of it; a domain of one document is cut by bytes instead (its last val_fraction
    is val). With few documents the prefix can overshoot far (two files: half the bytes in val);
    where whole documents would give val more than twice its share, the last one is cut at the
    first line end past the share: its head to val, the rest to train. Splits ordered by domain
    -> (train, val, cuts [(doc, bytes to val, bytes to train)]).
    Bytes [5, 3, 2] after the shuffle, val_fraction 0.3 -> val [5], train [3, 2];
    [1000] -> val [100], train [900]; lines, [600, 400] bytes, 0.1 -> val [~100], train [~500, 400].
    """
    train, val, cuts = [], [], []
    for d in range(n_domains):
        group = [k for k in kept if k[0].domain == d]
        if not group:  # a Python without its tests (Docker's images delete them): no tokens
            continue
        if len(group) == 1:  # one document (nanoGPT's input.txt): train = its head, val = its tail
            doc, n = group[0]
            cut = n - int(n * val_fraction)
            train.append((doc._replace(stop=cut), cut))
            val += [(doc._replace(start=cut), n - cut)] if cut < n else []
            continue
        order = np.random.default_rng([seed, d]).permutation(len(group))  # deterministic shuffle
        group = [group[i] for i in order]
        sizes = np.cumsum([n for _, n in group])
        target = val_fraction * sizes[-1]
        # shortest prefix reaching the target, one document left
        n_val = min(int(np.searchsorted(sizes, target)) + 1, len(group) - 1)
        taken = int(sizes[n_val - 1])
        doc, n = group[n_val - 1]
        # subtle: 2x leaves the standard library's split as it was (its prose: 15.8% for 10%)
        cut = line_end_after(doc, target - (taken - n)) if taken > 2 * target else None
        if cut is not None and cut < n:  # few documents: the last val one shared at a line end
            group[n_val - 1] = (doc._replace(stop=doc.start + cut), cut)
            group.append((doc._replace(start=doc.start + cut), n - cut))
            cuts.append((doc, cut, n - cut))
        val += group[:n_val]
        train += group[n_val:]
    return train, val, cuts


def line_end_after(doc, need):
    """The offset just past the first newline at or after byte `need` of doc, or None.
    b"ab\ncd\nef", need 3 -> 6."""
    at = int(need)
    for b in read(doc._replace(start=doc.start + at)):  # the bytes from `need` on
        ends = np.flatnonzero(b == ord("\n"))
        if len(ends):
            return at + int(ends[0]) + 1
        at += len(b)
    return None


# -----------------------------------------------------------------------------
# which documents, in which domains; skip what is not input text, and content read before

# text: bytes held in memory, or None to read path; bytes start .. stop-1 of it
# (stop None: to the end)
Doc = collections.namedtuple("Doc", "domain path text start stop", defaults=(None, 0, None))


def documents(paths, domains, installed, out_dir, verbose=True):
    """-> (domain names or None, kept [(doc, n_bytes)], skipped {reason: files}): the running
    Python's .py files (no paths or domains, or installed=True) or the user's, each read once, the
    first of equal contents kept."""
    if installed and (paths or domains):
        raise ValueError("--installed reads the Python installation: pass no paths or --domain")
    names, docs = (user_documents(paths, domains) if paths or domains
                   else (PYTHON_DOMAINS, python_documents(installed)))
    out_real = os.path.join(os.path.realpath(out_dir), "")
    seen, cache, kept, skipped = set(), {}, [], collections.Counter()
    for doc in tqdm(docs, desc="scanning", unit="file", disable=None if verbose else True):
        real = os.path.realpath(doc.path) if doc.text is None else doc.path
        if real.startswith(out_real):
            reason = "in the output directory"
        elif doc.text is None and _in_corpus(os.path.dirname(real), cache):
            reason = "in a prepared corpus"
        else:
            reason, n = _read(doc, seen)
        if reason:
            skipped[reason] += 1
        else:
            kept.append((doc, n))
    why = ", ".join(f"{n} {reason}" for reason, n in skipped.most_common())  # the most first
    if verbose and skipped:
        print(f"skipped {sum(skipped.values())} files: {why}")
    if not kept:
        raise ValueError(f"the corpus is empty: no text in {len(docs)} files "
                         f"({why or 'none found'}); pass files with text in them")
    empty = [x for d, x in enumerate(names or []) if all(doc.domain != d for doc, _ in kept)]
    if empty and names is not PYTHON_DOMAINS:  # a user's domain whose files were all skipped
        raise ValueError(f"domain {empty[0]} holds no text; pass files with text in it")
    return names, kept, dict(skipped)


def _walk(root, skip=()):
    """Files under a directory, sorted; hidden entries and directories named in skip are left
    out."""
    for d, dirs, files in os.walk(root):
        dirs[:] = sorted(x for x in dirs if not x.startswith(".") and x not in skip)
        yield from (os.path.join(d, f) for f in sorted(files) if not f.startswith("."))


def python_documents(installed=False):
    """Documents of the running Python in PYTHON_DOMAINS: the standard library's .py files, or with
    installed=True every .py file under sysconfig's stdlib, platstdlib, purelib and platlib
    (packages only through the last two)."""
    keys = ("stdlib", "platstdlib", "purelib", "platlib") if installed else ("stdlib",)
    roots = dict.fromkeys(sysconfig.get_paths()[k] for k in keys)  # unique roots, in order
    docs = []
    for root in roots:
        # packages: purelib, platlib
        for path in _walk(root, skip=("__pycache__", "site-packages", "dist-packages")):
            rel = os.path.relpath(path, root).split(os.sep)
            if rel[-2:] == ["pydoc_data", "topics.py"]:
                docs += _topics(path)
            elif path.endswith(".py"):
                tests = bool(TEST_DIRS & set(rel[:-1])) or rel[-1].startswith("test_")
                docs.append(Doc(1 if tests else 0, path))
    return docs


def _topics(path):
    """pydoc_data/topics.py -> one prose Doc per documentation topic: its text, not the Python
    literal."""
    try:
        tree = ast.parse(open(path, "rb").read())
        topics = next(ast.literal_eval(n.value)
                      for n in tree.body if isinstance(n, ast.Assign))  # {name: text}
    except (SyntaxError, ValueError, StopIteration):
        return [Doc(0, path)]  # not the file we know: plain code
    return [Doc(2, f"{path}#{name}", text.encode()) for name, text in sorted(topics.items())]


def user_documents(paths, domains):
    """(domain names or None, documents) of paths and domains {name: [files, directories (walked)
    or globs]}."""
    groups = {name: list(globs) for name, globs in (domains or {}).items()}
    if paths:
        groups.setdefault("other" if groups else None, []).extend(paths)
    if len(groups) > 255:
        raise ValueError(f"{len(groups)} domains; at most 255 fit the uint8 domain ids")
    docs = []
    for d, globs in enumerate(groups.values()):
        files = set()
        for p in globs:
            matches = glob.glob(p, recursive=True) if glob.has_magic(p) else [p]
            if not matches or not os.path.exists(matches[0]):
                raise ValueError(f"no such file or directory: {p}; "
                                 "pass existing files, directories or globs")
            files.update(f for m in matches for f in (_walk(m) if os.path.isdir(m) else [m]))
        docs += [Doc(d, f) for f in sorted(files)]
    return (list(groups) if domains else None), docs


def read(doc, size=1 << 16):
    """A document's bytes start .. stop-1 as uint8 arrays of at most size bytes, one at a time:
    reads of its text or of its file. b"abcde", size=2 -> [97, 98], [99, 100], [101]
    subtle: not np.memmap, whose pages count as this process's resident memory once touched, until
    it is dropped: one large document (a whole corpus in one input.txt) would be held whole."""
    with open(doc.path, "rb") if doc.text is None else io.BytesIO(doc.text) as f:
        stop = f.seek(0, os.SEEK_END) if doc.stop is None else doc.stop
        f.seek(doc.start)
        for k in range(doc.start, stop, size):  # subtle: read(n) allocates n bytes first: no more
            yield np.frombuffer(f.read(min(size, stop - k)), dtype=np.uint8)


def _read(doc, seen):
    """(reason to skip or None, n bytes) of a document. Skipped: "unreadable", "empty", "binary" (a
    NUL byte in its first 8 KB), "not UTF-8" (those 8 KB do not decode, a cut last character
    aside) and "duplicate" (its content's digest is in seen; a kept one's is added)."""
    try:
        chunks = read(doc)  # the first holds HEAD bytes, or the whole document
        first = next(chunks, np.zeros(0, dtype=np.uint8))
        head = first[:HEAD].tobytes()
        if len(first) == 0 or b"\0" in head:
            return ("binary" if len(first) else "empty"), 0
        try:
            codecs.getincrementaldecoder("utf-8")().decode(head, final=False)
        except UnicodeDecodeError:
            return "not UTF-8", 0
        n, digest = len(first), hashlib.sha256(first)
        for b in chunks:
            n += len(b)
            digest.update(b)
    except OSError:
        return "unreadable", 0
    if digest.digest() in seen:
        return "duplicate", n
    seen.add(digest.digest())  # this content is a duplicate from now on
    return None, n


def _in_corpus(d, cache):
    """True if directory d or one of its parents holds a prepared corpus (a train.bin); cache:
    {dir: bool}."""
    if d not in cache:
        parent = os.path.dirname(d)
        cache[d] = (os.path.isfile(os.path.join(d, "train.bin"))
                    or (parent != d and _in_corpus(parent, cache)))
    return cache[d]


# -----------------------------------------------------------------------------
# the command line


def main(argv=None):
    p = argparse.ArgumentParser(description="Text (bytes, EOT between documents, split by file) "
                                "-> train.bin, val.bin, meta.json; skips its output, binary files.")
    p.add_argument("paths", nargs="*", help="files, directories or globs (default: the standard "
                   "library's .py files in domains code, tests, prose)")
    p.add_argument("--installed", action="store_true", help="every installed .py file instead")
    p.add_argument("--domain", action="append", default=[], metavar="NAME=GLOB",
                   help="files matching GLOB form domain NAME (repeatable; paths then: 'other')")
    p.add_argument("--out_dir", help=f"new, or a corpus replaced whole (default: {DEFAULT_DIR}, "
                   f"or {INSTALLED_DIR} with --installed; needed with paths or --domain)")
    p.add_argument("--val_fraction", type=float, default=0.1, help="val's share of each domain")
    p.add_argument("--block_size", type=int, default=128, help="each split holds a window")
    p.add_argument("--seed", type=int, default=0, help="seed of the shuffle that splits files")
    args = p.parse_args(argv)
    try:
        # ["code=src/*.py", "docs=docs", "code=lib"] -> {"code": ["src/*.py", "lib"], "docs": ...}
        domains = {}
        for spec in args.domain:
            name, sep, pattern = spec.partition("=")
            if not (sep and name and pattern):
                raise ValueError(f"--domain {spec!r} is not NAME=GLOB; "
                                 "write e.g. --domain code='src/**/*.py'")
            domains.setdefault(name, []).append(pattern)
        out_dir = args.out_dir or (INSTALLED_DIR if args.installed else DEFAULT_DIR)
        prepare(args.paths, out_dir, args.val_fraction, args.block_size, args.seed,
                domains=domains, installed=args.installed)
    except (ValueError, OSError) as e:
        sys.exit(f"error: {e}")


if __name__ == "__main__":
    main()
