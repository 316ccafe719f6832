"""
Text -> token stream (train.bin, val.bin, meta.json) -> fixed-length sample windows.

Follows nanoGPT's data/*/prepare.py (flat uint16 token files read through np.memmap) and
gives DeepSpeed Data Efficiency (arXiv 2212.03597) what its data analyzer and sampler need:
a fixed set of samples with stable ids. Sample i is the window

    sample_i = tokens[i*T : i*T + T + 1],  x = sample_i[:-1], y = sample_i[1:]

so windows do not overlap (they share one boundary token) and N = (n_tokens - 1) // T.

But:
- the tokenizer is plain bytes (ids 0..255) plus one end-of-document id, so any text works
  with no download; nanoGPT-format train.bin / val.bin (e.g. GPT-2 BPE) are read as they are;
- the default corpus is the running Python's standard library source, present on every
  machine (no network);
- samples are fixed windows with ids, not nanoGPT's random offsets, so a curriculum can
  score and admit them;
- every file is written atomically (temp file, then rename), meta.json last.
"""

import argparse
import glob
import json
import os
import sys
import sysconfig
import tempfile

import numpy as np
from tqdm import tqdm

EOT = 256  # end-of-document id, placed between documents
VOCAB_SIZE = 257  # 256 byte values + EOT
DEFAULT_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "stdlib")

# -----------------------------------------------------------------------------
# byte-level tokenizer


def encode(text):
    """str or bytes -> uint16 ids. encode("hi") -> [104, 105]"""
    b = text.encode("utf-8") if isinstance(text, str) else bytes(text)
    return np.frombuffer(b, dtype=np.uint8).astype(np.uint16)


def decode(ids):
    """ids -> str; EOT becomes a newline, invalid UTF-8 becomes U+FFFD."""
    ids = np.asarray(ids).ravel()
    b = bytes(np.where(ids == EOT, ord("\n"), ids).astype(np.uint8))
    return b.decode("utf-8", errors="replace")


# -----------------------------------------------------------------------------
# finding documents


def stdlib_files():
    """The standard library's .py files, without site-packages and the test suites."""
    root = sysconfig.get_paths()["stdlib"]
    out = []
    for d, dirs, files in os.walk(root):
        dirs[:] = sorted(x for x in dirs if x not in ("site-packages", "test", "tests", "__pycache__"))
        out += [os.path.join(d, f) for f in sorted(files) if f.endswith(".py")]
    return out


def find_files(paths):
    """Files, directories (walked, hidden entries skipped) and globs -> sorted unique files."""
    out = []
    for p in paths:
        matches = sorted(glob.glob(p, recursive=True)) if glob.has_magic(p) else [p]
        if not matches or not os.path.exists(matches[0]):
            raise ValueError(f"no such file or directory: {p}; pass existing files, directories or globs")
        for m in matches:
            if os.path.isdir(m):
                for d, dirs, files in os.walk(m):
                    dirs[:] = sorted(x for x in dirs if not x.startswith("."))
                    out += [os.path.join(d, f) for f in sorted(files) if not f.startswith(".")]
            else:
                out.append(m)
    return sorted(set(out))


# -----------------------------------------------------------------------------
# preparing train.bin / val.bin / meta.json


def atomic_write(path, write, mode="wb"):
    """Call write(f) on a fresh temporary file beside path, then rename it over path.

    Readers never see half a file, an existing file survives any failure of write (disk full,
    Ctrl-C), and two writers never share a temporary name (each gets its own from mkstemp).
    """
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(os.path.abspath(path)), prefix=os.path.basename(path) + ".", suffix=".tmp")
    try:
        with os.fdopen(fd, mode) as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())  # on disk before the rename makes it visible
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # subtle: mkstemp makes it private (0600); give it a plain file's mode
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


def prepare(paths=None, out_dir=DEFAULT_DIR, val_fraction=0.1, block_size=256, seed=0, verbose=True):
    """Tokenize documents into out_dir/{train.bin, val.bin, meta.json}; returns the meta dict.

    Documents are shuffled by a fixed-seed generator (so the split does not follow the
    directory order), joined with EOT, and the last val_fraction of the tokens is val.
    Nothing is written unless both splits hold at least one window of block_size + 1 tokens.
    """
    files = stdlib_files() if not paths else find_files(paths)
    if not files:
        raise ValueError("the corpus is empty: no files found; pass text files, directories or globs")
    order = np.random.default_rng(seed).permutation(len(files))  # deterministic shuffle
    parts = []
    for i in tqdm(order, desc="reading", unit="file", disable=None if verbose else True):  # bar on terminals only
        ids = encode(open(files[i], "rb").read())
        if len(ids):
            parts += [ids, np.array([EOT], dtype=np.uint16)]
    if not parts:
        raise ValueError("the corpus is empty: every file has 0 bytes; pass files with text in them")
    tokens = np.concatenate(parts[:-1])  # (n,) no EOT after the last document
    n_val = int(len(tokens) * val_fraction)
    train, val = tokens[: len(tokens) - n_val], tokens[len(tokens) - n_val :]
    need = block_size + 1
    if len(train) < need or len(val) < need:
        raise ValueError(
            f"corpus too short: {len(train)} train and {len(val)} val tokens, each split needs at "
            f"least block_size+1 = {need}; add more text or use a smaller --block_size"
        )
    os.makedirs(out_dir, exist_ok=True)
    meta_path = os.path.join(out_dir, "meta.json")
    if os.path.exists(meta_path):
        os.remove(meta_path)  # subtle: a missing meta.json marks the directory as unfinished
    for name, arr in (("train.bin", train), ("val.bin", val)):
        atomic_write(os.path.join(out_dir, name), lambda f, a=arr: a.tofile(f))
    meta = {"vocab_size": VOCAB_SIZE, "eot_id": EOT, "tokenizer": "bytes", "n_files": len(files),
            "train_tokens": int(len(train)), "val_tokens": int(len(val)), "val_fraction": val_fraction}
    write_meta(out_dir, meta)
    if verbose:
        print(f"wrote {out_dir}: {len(files)} files, {len(train):,} train and {len(val):,} val tokens")
    return meta


def write_meta(out_dir, meta):
    atomic_write(os.path.join(out_dir, "meta.json"), lambda f: json.dump(meta, f, indent=1), mode="w")


def load_meta(data_dir, vocab_size=None):
    """meta.json of data_dir. A nanoGPT directory (train.bin, val.bin, no meta.json) needs vocab_size."""
    path = os.path.join(data_dir, "meta.json")
    if os.path.exists(path):
        with open(path) as f:
            return json.load(f)
    if not os.path.exists(os.path.join(data_dir, "train.bin")):
        raise ValueError(f"no train.bin in {data_dir}; run `python data.py --out_dir {data_dir} FILES...` first")
    if vocab_size is None:
        raise ValueError(f"{data_dir} has train.bin but no meta.json; pass its vocabulary size, e.g. --vocab_size=50257 for GPT-2 BPE")
    return {"vocab_size": int(vocab_size), "eot_id": None, "tokenizer": "external"}


# -----------------------------------------------------------------------------
# fixed-length sample windows, shared by the analyzer, the sampler and training


class SampleWindows:
    """Sample i of a token file = tokens[i*T : i*T + T + 1]; N = (n_tokens - 1) // T.

    tokens = [0..9], T = 3 -> N = 3 samples: [0,1,2,3], [3,4,5,6], [6,7,8,9]
    """

    def __init__(self, path, block_size):
        if not os.path.exists(path):
            raise ValueError(f"no such token file: {path}; prepare the data with `python data.py` first")
        self.path, self.block_size = path, block_size
        self.data = np.memmap(path, dtype=np.uint16, mode="r")  # never the whole corpus in RAM
        if len(self.data) < block_size + 1:
            raise ValueError(f"{path} has {len(self.data)} tokens, fewer than block_size+1 = {block_size + 1}; use a smaller --block_size or more text")

    def __len__(self):
        return (len(self.data) - 1) // self.block_size

    def get(self, ids):
        """Sample ids (B,) -> int64 tokens (B, T+1)."""
        T = self.block_size
        offsets = np.asarray(ids, dtype=np.int64)[:, None] * T + np.arange(T + 1)  # (B, T+1)
        return self.data[offsets].astype(np.int64)

    def get_range(self, start, stop):
        """Samples start..stop-1 as one contiguous read: (stop-start, T+1) int64."""
        T = self.block_size
        flat = self.data[start * T : stop * T + 1]  # uint16 view of the memmap, no copy yet
        return np.lib.stride_tricks.sliding_window_view(flat, T + 1)[::T].astype(np.int64)  # subtle: one copy, contiguous (3x faster to index)


# -----------------------------------------------------------------------------


def main(argv=None):
    p = argparse.ArgumentParser(description="Tokenize text into train.bin / val.bin / meta.json (byte-level, EOT between documents).")
    p.add_argument("paths", nargs="*", help="files, directories or globs (default: the Python standard library's .py files); a directory holding nanoGPT train.bin/val.bin is used as it is")
    p.add_argument("--out_dir", default=DEFAULT_DIR, help="where to write (default: %(default)s)")
    p.add_argument("--val_fraction", type=float, default=0.1, help="last fraction of tokens kept for validation")
    p.add_argument("--block_size", type=int, default=256, help="each split must hold at least one window of this length + 1")
    p.add_argument("--vocab_size", type=int, default=None, help="for a nanoGPT directory without meta.json: its vocabulary size")
    args = p.parse_args(argv)
    try:
        if len(args.paths) == 1 and os.path.isfile(os.path.join(args.paths[0], "train.bin")):
            d = args.paths[0]  # nanoGPT format: keep the .bin files, add meta.json
            meta = load_meta(d, args.vocab_size)
            SampleWindows(os.path.join(d, "train.bin"), args.block_size)
            SampleWindows(os.path.join(d, "val.bin"), args.block_size)
            if not os.path.exists(os.path.join(d, "meta.json")):
                write_meta(d, meta)
            print(f"{d} is in nanoGPT format: vocab_size {meta['vocab_size']}; train with --data_dir={d}")
        else:
            if not 0 < args.val_fraction < 1:
                raise ValueError(f"--val_fraction={args.val_fraction} must be between 0 and 1")
            prepare(args.paths, args.out_dir, args.val_fraction, args.block_size)
    except (ValueError, OSError) as e:
        sys.exit(f"error: {e}")


if __name__ == "__main__":
    main()
