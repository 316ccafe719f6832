"""
The token files of a prepared corpus, read back and checked: their length, largest id, fingerprint
and unigram entropy (scan_bins), a nanoGPT directory's meta (train.bin / val.bin, maybe a
meta.pkl), and load_meta, which checks whatever train.py is about to read (data.load_splits).

prepare.py records these numbers in meta.json when it writes a corpus. A nanoGPT directory has no
meta.json: its scan is recorded in scan.json beside its files, with what identifies them as git and
make do, and read whole again only when that changes (recorded_scan):

    identity of a file = (size, mtime_ns, ctime_ns, inode)    (os.stat: no byte read)
"""

import hashlib
import json
import os
import pickle
import time

import numpy as np

from support.files import atomic_write
from support.progress import Progress, say, si

SCAN_RECORD = "scan.json"  # beside a nanoGPT directory's train.bin and val.bin
IDENTITY = ("size", "mtime", "ctime", "inode")  # a file's, as file_identity lists it
SCAN_KEYS = {"train_tokens", "val_tokens", "max_token_id", "fingerprint", "unigram_entropy"}
# subtle: what this process hashed, by (directory, identity): one start reads a corpus once even
# where no record is written (files modified just now, a read-only directory)
_hashed = {}


def n_tokens(path):
    """Tokens in a uint16 token file; one line naming the file if it is missing, empty or of odd
    length."""
    if not os.path.isfile(path):
        raise ValueError(f"no such token file: {path}; "
                         "prepare the data with `python data.py` first")
    size = os.path.getsize(path)
    if size == 0 or size % 2:
        problem = "empty" if size == 0 else f"{size} bytes, an odd length"
        raise ValueError(f"{path} is {problem}: not a uint16 token file; "
                         "prepare it again (python data.py)")
    return size // 2


def scan_bins(data_dir, vocab_size=1 << 16, chunk=1 << 20, verbose=False):
    """-> {train_tokens, val_tokens, max_token_id, fingerprint, unigram_entropy} of data_dir's token
    files, ids < vocab_size, in one pass per split of chunk-token reads (memory stays flat).
    fingerprint = a hash of both splits' content hashes (so the split point counts too);
    unigram_entropy = -sum_u p(u) ln p(u) over the train split (nats): the loss of a model that
    ignores context. train [5, 5, 7, 7] -> p = [0.5, 0.5] -> ln 2 = 0.6931."""
    meta = {"max_token_id": 0}
    h = hashlib.sha256()
    # one line for a missing, empty or odd-length file
    total = sum(n_tokens(os.path.join(data_dir, f"{s}.bin")) for s in ("train", "val"))
    bar = Progress(f"hashing {data_dir}", total, verbose=verbose)
    buf = np.empty(chunk, dtype=np.uint16)  # subtle: one reused buffer, and read(), not np.memmap:
    for split in ("train", "val"):  # a mapping's pages count as this process's memory once touched
        path = os.path.join(data_dir, f"{split}.bin")
        # one line for a missing, empty or odd-length file
        meta[f"{split}_tokens"] = n_tokens(path)
        counts = np.zeros(1 << 16, dtype=np.int64)
        split_hash = hashlib.sha256()
        with open(path, "rb") as f:
            while n_bytes := f.readinto(buf):
                tokens = buf[: n_bytes // 2]
                ids = np.bincount(tokens)  # (largest id in the chunk + 1,)
                counts[: len(ids)] += ids
                split_hash.update(tokens)  # the same digest as hashing the whole file at once
                bar.update(len(tokens))
        top = int(np.flatnonzero(counts)[-1])
        if top >= vocab_size:
            raise ValueError(f"{path} holds token id {top}, not below vocab_size {vocab_size}; "
                             "pass the tokenizer's vocabulary size "
                             f"(at least --vocab_size={top + 1})")
        meta["max_token_id"] = max(meta["max_token_id"], top)
        h.update(split_hash.digest())
        if split == "train":
            p = counts[counts > 0] / counts.sum()  # p(u) of the ids that occur
            meta["unigram_entropy"] = float(-(p * np.log(p)).sum())  # H = -sum_u p(u) ln p(u)
    bar.close()
    return {**meta, "fingerprint": h.hexdigest()[:32]}  # 128 bits are plenty


def file_identity(data_dir):
    """{train.bin: [size, mtime_ns, ctime_ns, inode], val.bin: ...}: what git and make trust to say
    a file is unchanged. A write changes mtime and ctime; a copy over it, even one that restores
    the old mtime, changes ctime; a new file has a new inode."""
    ids = {}
    for name in ("train.bin", "val.bin"):
        path = os.path.join(data_dir, name)
        n_tokens(path)  # one line for a missing, empty or odd-length file
        st = os.stat(path)
        ids[name] = [st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino]
    return ids


def why_rescan(data_dir, ids):
    """-> (the scan recorded for files of identity ids, None) or (None, why it cannot be used)."""
    path = os.path.join(data_dir, SCAN_RECORD)
    try:
        with open(path) as f:
            record = json.load(f)
        files, scan = record["files"], record["scan"]
    except FileNotFoundError:
        return None, "no record of them yet"
    except (OSError, ValueError, KeyError, TypeError) as e:
        return None, f"{SCAN_RECORD} is unreadable ({e.__class__.__name__})"
    if not (isinstance(files, dict) and isinstance(scan, dict) and SCAN_KEYS <= scan.keys()):
        return None, f"{SCAN_RECORD} is unreadable (not a record of scan_bins)"
    for name, now in ids.items():
        was = files.get(name)
        if was != now:
            was = was if isinstance(was, list) and len(was) == len(now) else [None] * len(now)
            changed = [k for k, a, b in zip(IDENTITY, was, now) if a != b]
            return None, f"{name}'s {', '.join(changed)} changed since {SCAN_RECORD}"
    return scan, None


def recorded_scan(data_dir, vocab_size, racy_s=2.0):
    """scan_bins(data_dir, vocab_size), read whole only when a split's identity (file_identity)
    differs from the one recorded in data_dir/scan.json, with a line saying why and one with the
    rate; then recorded. subtle: a file modified less than racy_s before its hash is not recorded
    (git's "racily clean"): a second write within its mtime's resolution would leave the identity
    unchanged."""
    ids = file_identity(data_dir)
    key = (os.path.realpath(data_dir), json.dumps(ids))
    scan, why = _hashed.get(key), None
    if scan is None:
        scan, why = why_rescan(data_dir, ids)
    if scan is not None:
        top = scan["max_token_id"]
        if top >= vocab_size:
            raise ValueError(f"{data_dir} holds token id {top} ({SCAN_RECORD}'s max_token_id), "
                             f"not below vocab_size {vocab_size}; pass the tokenizer's vocabulary "
                             f"size (at least --vocab_size={top + 1})")
        return scan
    n = sum(size // 2 for size, *_ in ids.values())
    say(f"hashing {data_dir} ({n:,} tokens: {why})")
    t0 = time.time()
    scan = scan_bins(data_dir, vocab_size, verbose=True)  # names a file with an id >= vocab_size
    dt = time.time() - t0
    _hashed[key] = scan
    say(f"hashed {n:,} tokens in {dt:.1f} s ({si(n / max(dt, 1e-9))} tokens/s)")
    newest = max(mtime for _, mtime, *_ in ids.values())
    if file_identity(data_dir) == ids and newest < (t0 - racy_s) * 1e9:  # unchanged while read
        path = os.path.join(data_dir, SCAN_RECORD)
        try:
            atomic_write(path, lambda f: json.dump({"files": ids, "scan": scan}, f), "w")
        except OSError as e:
            say(f"note: cannot write {path} ({e.strerror or e}): the next start reads "
                f"{data_dir} whole again")
    return scan


def nanogpt_meta(data_dir, vocab_size=None):
    """meta of a directory holding nanoGPT's train.bin and val.bin (uint16 ids, all below the
    vocabulary size): from its meta.pkl if it has one (vocab_size; itos decodes a char-level
    sample), else vocab_size."""
    meta = {"vocab_size": vocab_size, "eot_id": None, "tokenizer": "external"}
    path = os.path.join(data_dir, "meta.pkl")
    if os.path.exists(path):
        with open(path, "rb") as f:
            pkl = _PlainUnpickler(f).load()
        if vocab_size not in (None, pkl["vocab_size"]):
            raise ValueError(f"--vocab_size={vocab_size} but {path} says {pkl['vocab_size']}; "
                             "drop the flag")
        meta["vocab_size"] = pkl["vocab_size"]
        if "itos" in pkl:  # {id: str} of nanoGPT's char-level datasets
            meta["itos"] = [pkl["itos"][i] for i in range(pkl["vocab_size"])]
    if meta["vocab_size"] is None:
        raise ValueError(f"{data_dir} holds nanoGPT's train.bin/val.bin "
                         "but no meta.json nor meta.pkl; "
                         "pass its tokenizer's --vocab_size (e.g. 50257 for GPT-2 BPE)")
    return {**meta, **recorded_scan(data_dir, meta["vocab_size"])}  # read whole when changed


class _PlainUnpickler(pickle.Unpickler):
    """nanoGPT's meta.pkl holds only dicts, strings and numbers: refuse anything that would run
    code."""

    def find_class(self, module, name):
        raise ValueError(f"meta.pkl refers to {module}.{name}, not plain data; it is not read")


def load_meta(data_dir, vocab_size=None):
    """meta.json of data_dir, checked: both token files hold its counts, its largest id is below
    vocab_size (if given) and its own. A nanoGPT directory (no meta.json) is read whole for its
    largest id and fingerprint on first use and whenever its files change (nanogpt_meta)."""
    if not os.path.isdir(data_dir):
        what = "is not a directory" if os.path.exists(data_dir) else "does not exist"
        raise ValueError(f"--data_dir={data_dir} {what}; prepare your text with python data.py "
                         "FILES --out_dir=data/NAME, then pass --data_dir=data/NAME")
    path = os.path.join(data_dir, "meta.json")
    if not os.path.exists(os.path.join(data_dir, "train.bin")):
        raise ValueError(f"{data_dir} holds no train.bin: it is not a prepared corpus; "
                         f"prepare it with python data.py {data_dir} --out_dir=data/NAME, "
                         "then pass --data_dir=data/NAME")
    if not os.path.exists(path):
        return nanogpt_meta(data_dir, vocab_size)  # counts and ids checked as it is read
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
        raise ValueError(f"{data_dir} holds token id {top} (meta.json max_token_id), "
                         f"not below the vocabulary size {V}; pass the tokenizer's vocabulary "
                         f"size (at least --vocab_size={top + 1})")
    return meta
