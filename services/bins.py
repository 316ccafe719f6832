"""
A nanoGPT directory (train.bin and val.bin, no meta.json) of OpenWebText's size, read whole once:
its scan (data.scan_bins: counts, largest id, fingerprint, unigram entropy) is recorded in
scan.json beside its files, with what identifies them as git and make do, and read whole again
only when that changes:

    identity of a file = (size, mtime_ns, ctime_ns, inode)    (os.stat: no byte read)

    data.load_meta(data_dir, vocab_size, scan=recorded_scan)  # train.py's start

A read says why and how fast, with a line at least every 5 s when stdout is a pipe
(support/progress.py). Under torchrun one rank per machine reads, the others then find the record
(launch.on_each_filesystem).
"""

import json
import os
import time

import data
from support.files import atomic_write
from support.progress import Progress, say, si

SCAN_RECORD = "scan.json"  # beside a nanoGPT directory's train.bin and val.bin
IDENTITY = ("size", "mtime", "ctime", "inode")  # a file's, as file_identity lists it
SCAN_KEYS = {"train_tokens", "val_tokens", "max_token_id", "fingerprint", "unigram_entropy"}
# subtle: what this process hashed, by (directory, identity): one start reads a corpus once even
# where no record is written (files modified just now, a read-only directory)
_hashed = {}


def file_identity(data_dir):
    """{train.bin: [size, mtime_ns, ctime_ns, inode], val.bin: ...}: what git and make trust to say
    a file is unchanged. A write changes mtime and ctime; a copy over it, even one that restores
    the old mtime, changes ctime; a new file has a new inode."""
    ids = {}
    for name in ("train.bin", "val.bin"):
        path = os.path.join(data_dir, name)
        data.n_tokens(path)  # one line for a missing, empty or odd-length file
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


def recorded_scan(data_dir, racy_s=2.0):
    """data.scan_bins(data_dir), read whole only when a split's identity (file_identity) differs
    from the one recorded in data_dir/scan.json, with a line saying why and one with the rate; then
    recorded. subtle: a file modified less than racy_s before its hash is not recorded (git's
    "racily clean"): a second write within its mtime's resolution would leave the identity
    unchanged."""
    ids = file_identity(data_dir)
    key = (os.path.realpath(data_dir), json.dumps(ids))
    scan, why = _hashed.get(key), None
    if scan is None:
        scan, why = why_rescan(data_dir, ids)
    if scan is not None:
        return scan
    n = sum(size // 2 for size, *_ in ids.values())
    say(f"hashing {data_dir} ({n:,} tokens: {why})")
    t0 = time.time()
    with Progress(f"hashing {data_dir}", n) as bar:
        scan = data.scan_bins(data_dir, bar=bar)
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
