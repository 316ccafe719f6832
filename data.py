"""
Text -> token stream (train.bin, val.bin, meta.json) -> fixed-length sample windows.

Follows nanoGPT's data/*/prepare.py (flat uint16 token files read through np.memmap) and gives DeepSpeed Data
Efficiency (arXiv 2212.03597) what its data analyzer and sampler need: a fixed set of samples with stable ids.
Sample i is the window

    sample_i = tokens[i*T : i*T + T + 1],  x = sample_i[:-1], y = sample_i[1:]

so windows do not overlap (they share one boundary token) and N = (n_tokens - 1) // T. The documents (corpus.py
finds them, in domains) are split whole: per domain, a seeded shuffle, and val takes the shortest prefix of it
holding val_fraction of the domain's bytes (never every document; a domain of one document is cut by bytes
instead, its last val_fraction going to val). Each split is its domains in order, EOT between documents:

    train = [domain 0 docs, shuffled] EOT [domain 1 docs, shuffled] EOT ...   (val alike)
    domain of window i = domain of its middle token i*T + T//2  (its majority if it spans two)

But:
- the tokenizer is plain bytes (ids 0..255) plus one end-of-document id, so any text works with no download;
  nanoGPT-format train.bin / val.bin (e.g. GPT-2 BPE) are read as they are;
- the split is by document, not by token, and identical content is read once, so no text is in both splits;
- written in chunks through one reused buffer: memory grows with the number of files, not with their bytes;
- the corpus is built in a hidden sibling directory and swapped in with two renames, so out_dir changes all at
  once or not at all (its old index/ goes with the old data);
- no .idx of document boundaries as in DeepSpeed's data_sampling/indexed_dataset.py (Megatron's format): samples
  are fixed windows, and meta.json records only where each domain starts.
"""

import argparse
import functools
import glob
import hashlib
import json
import os
import shutil
import sys
import tempfile

import numpy as np

import corpus

EOT = 256  # end-of-document id, placed between documents
VOCAB_SIZE = 257  # 256 byte values + EOT
HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_DIR = os.path.join(HERE, "data", "stdlib")
INSTALLED_DIR = os.path.join(HERE, "data", "installed")
CORPUS_ENTRIES = {"train.bin", "val.bin", "meta.json", "index"}  # what out_dir may hold before it is replaced

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
# prepare: split by document, write the token files in a hidden directory, swap it in


def split_documents(kept, n_domains, val_fraction, seed):
    """Per domain, a seeded shuffle; val = its shortest prefix holding val_fraction of the domain's bytes, never all
    of it; a domain of one document is cut by bytes instead (its last val_fraction is val). Splits ordered by domain.
    Bytes [5, 3, 2] after the shuffle, val_fraction 0.3 -> val [5], train [3, 2]; [1000] -> val [100], train [900]."""
    train, val = [], []
    for d in range(n_domains):
        group = [k for k in kept if k[0].domain == d]
        if len(group) == 1:  # one document (nanoGPT's input.txt): train = its head, val = its tail
            (doc, n), cut = group[0], group[0][1] - int(group[0][1] * val_fraction)
            train.append((doc._replace(stop=cut), cut))
            val += [(doc._replace(start=cut), n - cut)] if cut < n else []
            continue
        group = [group[i] for i in np.random.default_rng([seed, d]).permutation(len(group))]  # deterministic shuffle
        target, taken, n_val = val_fraction * sum(n for _, n in group), 0, 0
        while n_val < len(group) - 1 and taken < target:  # shortest prefix reaching the target, one document left
            taken += group[n_val][1]
            n_val += 1
        val += group[:n_val]
        train += group[n_val:]
    return train, val


def write_tokens(f, docs, n_domains, chunk_size):
    """Stream documents into f as uint16 ids, EOT between documents -> tokens per domain (an EOT counts to the
    domain of the document before it). subtle: one reused buffer keeps memory flat; fresh arrays fragment the heap."""
    domain_tokens, buf = [0] * n_domains, np.empty(chunk_size, dtype=np.uint16)
    for i, (doc, n) in enumerate(docs):
        if i:
            f.write(np.uint16(EOT).tobytes())  # EOT between documents, none after the last
            domain_tokens[docs[i - 1][0].domain] += 1
        b = corpus.read(doc)  # (n,) uint8
        for k in range(0, n, chunk_size):
            ids = buf[: min(chunk_size, n - k)]
            ids[:] = b[k : k + len(ids)]  # token id = byte value
            f.write(ids)
        domain_tokens[doc.domain] += n
    return domain_tokens


def _clean_up(out_dir):
    """Delete what failed or killed runs left beside out_dir (build directories .NAME.tmp-*, old corpora
    .NAME.tmp-*.old), except that an old corpus left without out_dir (killed between the swap's two renames)
    becomes out_dir again. subtle: so one prepare per out_dir at a time; a second deletes the first's build."""
    parent, base = os.path.split(out_dir)
    for p in sorted(glob.glob(os.path.join(glob.escape(parent), glob.escape(f".{base}.tmp-") + "*"))):
        if p.endswith(".old") and not os.path.exists(out_dir):
            os.rename(p, out_dir)  # the previous corpus comes back
        else:
            shutil.rmtree(p, ignore_errors=True)


def prepare(paths=None, out_dir=DEFAULT_DIR, val_fraction=0.1, block_size=128, seed=0, verbose=True,
            domains=None, installed=False, chunk_size=1 << 20):
    """Tokenize documents into out_dir/{train.bin, val.bin, meta.json}; returns the meta dict.

    paths: files, directories, globs (None: the standard library; installed=True: the whole installation);
    domains: {name: [files, directories, globs]}. Nothing is written unless both splits hold a window of
    block_size + 1 tokens; out_dir is replaced whole, and only if it holds nothing but a corpus.
    """
    out_dir = os.path.realpath(out_dir)  # subtle: a symlinked out_dir is replaced where it points
    _clean_up(out_dir)  # first: a killed run may have left out_dir missing, its corpus beside it
    extra = set(os.listdir(out_dir)) - CORPUS_ENTRIES if os.path.isdir(out_dir) else set()
    if os.path.exists(out_dir) and (extra or not os.path.isdir(out_dir)):
        raise ValueError(f"{out_dir} holds more than a corpus ({', '.join(sorted(extra)[:3]) or 'it is a file'}) and "
                         f"would be replaced whole; pass a new or corpus-only --out_dir")
    if not 0 < val_fraction < 1:
        raise ValueError(f"val_fraction={val_fraction} must be between 0 and 1")
    names, kept, skipped = corpus.documents(paths, domains, installed, out_dir, verbose)
    train, val = split_documents(kept, len(names or [None]), val_fraction, seed)
    n_train, n_val = (sum(n for _, n in s) + max(len(s) - 1, 0) for s in (train, val))  # bytes + EOTs
    if min(n_train, n_val) < block_size + 1:
        raise ValueError(f"corpus too short: {n_train} train and {n_val} val tokens (val takes whole files), each "
                         f"split needs block_size+1 = {block_size + 1}; add text or use a smaller --block_size")
    os.makedirs(os.path.dirname(out_dir), exist_ok=True)
    tmp = tempfile.mkdtemp(dir=os.path.dirname(out_dir), prefix=f".{os.path.basename(out_dir)}.tmp-")  # hidden
    try:  # plain writes: nothing reads tmp, and a failure deletes it whole
        domain_tokens = {}
        for split, docs in (("train", train), ("val", val)):
            with open(os.path.join(tmp, f"{split}.bin"), "wb") as f:
                domain_tokens[split] = write_tokens(f, docs, len(names or [None]), chunk_size)
        source = "installed" if installed else "files" if paths or domains else "stdlib"
        meta = {"vocab_size": VOCAB_SIZE, "eot_id": EOT, "tokenizer": "bytes", **scan_bins(tmp), "source": source,
                "n_documents": len(kept), "val_fraction": val_fraction, "seed": seed, "skipped": skipped}
        if names:  # domain d of a split holds its tokens offsets[d] .. offsets[d+1]-1
            offsets = {s: np.cumsum([0] + n).tolist() for s, n in domain_tokens.items()}
            meta.update(domains=names, domain_tokens=domain_tokens, domain_offsets=offsets)
        with open(os.path.join(tmp, "meta.json"), "w") as f:
            json.dump(meta, f, indent=1)
        if os.path.exists(out_dir):
            os.rename(out_dir, tmp + ".old")  # subtle: killed before the next rename, _clean_up renames it back
        os.rename(tmp, out_dir)
    finally:
        _clean_up(out_dir)  # the old corpus, or a failed build (and out_dir back if the second rename failed)
    if verbose:
        print(f"wrote {out_dir}: {len(kept)} documents, {meta['train_tokens']:,} train, "
              f"{meta['val_tokens']:,} val tokens")
        for d, name in enumerate(names or []):
            print(f"  domain {d} {name}: {domain_tokens['train'][d]:,} train, {domain_tokens['val'][d]:,} val tokens")
    return meta


def atomic_write(path, write, mode="wb"):
    """Call write(f) on a fresh temporary file beside path, then rename it over path; returns what write returned.
    Readers never see half a file, an existing file survives any failure of write (disk full, Ctrl-C), and two
    writers never share a temporary name (each gets its own from mkstemp)."""
    d, name = os.path.split(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(dir=d, prefix=name + ".", suffix=".tmp")
    try:
        with os.fdopen(fd, mode) as f:
            result = write(f)
            f.flush()
            os.fsync(f.fileno())  # on disk before the rename makes it visible
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # subtle: mkstemp makes it private (0600); give it a plain file's mode
        os.replace(tmp, path)
        return result
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


# -----------------------------------------------------------------------------
# reading a prepared corpus back: checks, fingerprint, sample windows


def _n_tokens(path):
    """Tokens in a uint16 token file; one line naming the file if it is missing, empty or of odd length."""
    if not os.path.isfile(path):
        raise ValueError(f"no such token file: {path}; prepare the data with `python data.py` first")
    size = os.path.getsize(path)
    if size == 0 or size % 2:
        raise ValueError(f"{path} is {'empty' if size == 0 else f'{size} bytes, an odd length'}: not a uint16 "
                         f"token file; prepare it again (python data.py)")
    return size // 2


def scan_bins(data_dir, vocab_size=1 << 16):
    """-> {train_tokens, val_tokens, max_token_id, fingerprint} of data_dir's train.bin and val.bin, read through
    np.memmap. fingerprint = a hash of both splits' content hashes (so the split point counts too). Refuses a
    token id >= vocab_size, naming the file."""
    meta, h = {"max_token_id": 0}, hashlib.sha256()
    for split in ("train", "val"):
        path = os.path.join(data_dir, f"{split}.bin")
        meta[f"{split}_tokens"] = _n_tokens(path)  # one line for a missing, empty or odd-length file
        tokens = np.memmap(path, dtype=np.uint16, mode="r")
        top = int(tokens.max())
        if top >= vocab_size:
            raise ValueError(f"{path} holds token id {top}, not below vocab_size {vocab_size}; pass the "
                             f"tokenizer's vocabulary size (at least --vocab_size={top + 1})")
        meta["max_token_id"] = max(meta["max_token_id"], top)
        h.update(hashlib.sha256(tokens).digest())
    return {**meta, "fingerprint": h.hexdigest()[:32]}  # 128 bits are plenty


def nanogpt_meta(data_dir, vocab_size):
    """meta of a directory holding nanoGPT's train.bin and val.bin (uint16 ids, all below vocab_size)."""
    return {"vocab_size": int(vocab_size), "eot_id": None, "tokenizer": "external", **scan_bins(data_dir, vocab_size)}


def load_meta(data_dir, vocab_size=None):
    """meta.json of data_dir, checked against its token files: both exist, hold the recorded token counts, and the
    largest token id is below vocab_size (if given) and meta's own. A nanoGPT directory (train.bin, val.bin, no
    meta.json) needs vocab_size and is read once to find its largest id."""
    path = os.path.join(data_dir, "meta.json")
    if not os.path.exists(path) and vocab_size is None:
        raise ValueError(f"no meta.json in {data_dir}: prepare it (python data.py --out_dir {data_dir} FILES...), or "
                         f"for nanoGPT's train.bin/val.bin pass --vocab_size (e.g. 50257 for GPT-2 BPE)")
    if not os.path.exists(path):
        return nanogpt_meta(data_dir, vocab_size)  # counts and ids checked as it is read
    try:
        meta = json.load(open(path))
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ValueError(f"{path} is not valid JSON ({e}); prepare the corpus again (python data.py)") from None
    for split in ("train", "val"):
        n = _n_tokens(os.path.join(data_dir, f"{split}.bin"))
        if meta.get(f"{split}_tokens", n) != n:
            raise ValueError(f"{os.path.join(data_dir, split + '.bin')} holds {n:,} tokens but {path} records "
                             f"{meta[split + '_tokens']:,}: the files changed after it; prepare the corpus again")
    top, V = meta.get("max_token_id"), min(v for v in (meta["vocab_size"], vocab_size) if v)
    if top is not None and top >= V:
        raise ValueError(f"{data_dir} holds token id {top} (meta.json max_token_id), not below the vocabulary size "
                         f"{V}; pass the tokenizer's vocabulary size (at least --vocab_size={top + 1})")
    return meta


def fingerprint(data_dir):
    """The corpus's content hash, for checkpoints to refuse a resume on other data: meta["fingerprint"], recorded
    when the token files were written (meta.json is checked against their sizes); a nanoGPT directory is hashed."""
    meta = load_meta(data_dir) if os.path.exists(os.path.join(data_dir, "meta.json")) else {}
    return meta.get("fingerprint") or scan_bins(data_dir)["fingerprint"]


class SampleWindows:
    """Sample i of a token file = tokens[i*T : i*T + T + 1]; N = (n_tokens - 1) // T.

    tokens = [0..9], T = 3 -> N = 3 samples: [0,1,2,3], [3,4,5,6], [6,7,8,9]
    """

    def __init__(self, path, block_size):
        n = _n_tokens(path)  # one line for a missing, empty or odd-length file
        self.path, self.block_size = path, block_size
        if n < block_size + 1:
            raise ValueError(f"{path} has {n} tokens, fewer than block_size+1 = {block_size + 1}; "
                             f"use a smaller --block_size or more text")
        self.data = np.memmap(path, dtype=np.uint16, mode="r")  # never the whole corpus in RAM

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
        return np.lib.stride_tricks.sliding_window_view(flat, T + 1)[::T].astype(np.int64)  # one contiguous copy

    @functools.cached_property
    def domains(self):
        """(N,) uint8 domain id of every window (meta.json's domain_offsets for this split), or None without domains.
        Window i's domain is its middle token's, i*T + T//2: the domain holding most of it if it spans two.
        domain_offsets [0, 40, 100], T = 16 -> middles 8, 24, 40, 56, 72, 88 -> domains [0, 0, 1, 1, 1, 1]"""
        meta_path = os.path.join(os.path.dirname(self.path), "meta.json")
        split = os.path.basename(self.path).removesuffix(".bin")
        offsets = json.load(open(meta_path)).get("domain_offsets", {}).get(split) if os.path.exists(meta_path) else None
        if offsets is None:
            return None
        middle = np.arange(len(self), dtype=np.int64) * self.block_size + self.block_size // 2  # (N,)
        return (np.searchsorted(offsets, middle, side="right") - 1).astype(np.uint8)  # o[d] <= middle < o[d+1]


def corpus_dir(data_dir="", prepare_default=True):
    """data_dir, or "" for the default corpus (the standard library), which is prepared here on first use.
    The one place that prepares the default corpus: train.py, reproduce.py, mixture.py and bench.py call it."""
    if not data_dir and prepare_default and not os.path.exists(os.path.join(DEFAULT_DIR, "meta.json")):
        print("preparing the default corpus (the Python standard library's .py files) ...", flush=True)
        prepare(out_dir=DEFAULT_DIR)
    return data_dir or DEFAULT_DIR


def load_splits(data_dir, block_size, vocab_size=None):
    """-> (train windows, val windows, meta) of a prepared data_dir, checked (see load_meta)."""
    meta = load_meta(data_dir, vocab_size)  # checks the largest token id against the vocabulary
    train, val = (SampleWindows(os.path.join(data_dir, f"{split}.bin"), block_size) for split in ("train", "val"))
    return train, val, meta


# -----------------------------------------------------------------------------


def main(argv=None):
    p = argparse.ArgumentParser(description="Tokenize text into train.bin / val.bin / meta.json: byte-level, EOT "
                                "between documents, split by file. Never read: the output directory, any directory "
                                "holding a train.bin, files with a NUL byte or invalid UTF-8 in their first 8 KB.")
    p.add_argument("paths", nargs="*", help="files, directories or globs (default: the standard library's .py files "
                   "in domains code, tests, prose); one directory holding nanoGPT train.bin/val.bin is used as it is")
    p.add_argument("--installed", action="store_true", help="every .py file of this Python installation, in domains "
                   "code, tests, prose (--out_dir defaults to data/installed)")
    p.add_argument("--domain", action="append", default=[], metavar="NAME=GLOB", help="files matching GLOB form "
                   "domain NAME (repeat it for more); positional paths then form domain 'other'")
    p.add_argument("--out_dir", help=f"replaced whole: new, or holding only a corpus (default: {DEFAULT_DIR})")
    p.add_argument("--val_fraction", type=float, default=0.1, help="share of each domain's bytes held out")
    p.add_argument("--block_size", type=int, default=128, help="checks that each split holds one window")
    p.add_argument("--seed", type=int, default=0, help="seed of the shuffle that splits files")
    p.add_argument("--vocab_size", type=int, help="for a nanoGPT directory: its tokenizer's vocabulary size")
    args = p.parse_args(argv)
    try:
        if len(args.paths) == 1 and os.path.isfile(os.path.join(args.paths[0], "train.bin")):
            d = args.paths[0]  # nanoGPT format: keep the .bin files, write meta.json (counts, max id, fingerprint)
            if args.vocab_size is None:
                raise ValueError(f"{d} holds train.bin: pass its tokenizer's --vocab_size (50257 for GPT-2 BPE)")
            meta = nanogpt_meta(d, args.vocab_size)
            for split in ("train", "val"):
                SampleWindows(os.path.join(d, f"{split}.bin"), args.block_size)
            atomic_write(os.path.join(d, "meta.json"), lambda f: json.dump(meta, f, indent=1), mode="w")
            print(f"{d} is in nanoGPT format, largest token id {meta['max_token_id']}; train with --data_dir={d}")
        else:
            out_dir = args.out_dir or (INSTALLED_DIR if args.installed else DEFAULT_DIR)
            prepare(args.paths, out_dir, args.val_fraction, args.block_size, args.seed,
                    domains=corpus.parse_domains(args.domain), installed=args.installed)
    except (ValueError, OSError) as e:
        sys.exit(f"error: {e}")


if __name__ == "__main__":
    main()
