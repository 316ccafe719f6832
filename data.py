"""
Text -> token stream (train.bin, val.bin, meta.json) -> fixed-length sample windows.

Follows nanoGPT's data/*/prepare.py (flat uint16 token files read through np.memmap) and gives DeepSpeed Data
Efficiency (arXiv 2212.03597) a fixed set of samples with stable ids for its analyzer and sampler: sample i is

    sample_i = tokens[i*T : i*T + T + 1],  x = sample_i[:-1], y = sample_i[1:]

so windows share one boundary token and N = (n_tokens - 1) // T. Documents (corpus.py finds them, in domains)
are split whole (corpus.split_documents); each split is its domains in order, EOT between documents:

    train = [domain 0 docs, shuffled] EOT [domain 1 docs, shuffled] EOT ...   (val alike)
    domain of window i = domain of its middle token i*T + T//2  (its majority if it spans two)

But:
- the tokenizer is plain bytes (ids 0..255) plus one end-of-document id, so any text works with no download;
  nanoGPT-format train.bin / val.bin (e.g. GPT-2 BPE) are read as they are;
- written in chunks through one reused buffer: memory grows with the number of files, not with their bytes;
- the corpus is built in a hidden sibling directory and swapped in with two renames: out_dir changes all at once;
- no .idx of document boundaries (DeepSpeed's indexed_dataset.py): meta.json records where each domain starts.
"""

import argparse
import glob
import hashlib
import json
import os
import pickle
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
    return bytes(np.where(ids == EOT, ord("\n"), ids).astype(np.uint8)).decode("utf-8", errors="replace")


# -----------------------------------------------------------------------------
# prepare: write the token files in a hidden directory, swap it in


def _clean_up(out_dir):
    """Delete what failed or killed runs left beside out_dir (.NAME.tmp-*), except an old corpus left without
    out_dir (killed between the swap's renames): it becomes out_dir again. subtle: one prepare per out_dir at a time."""
    parent, base = os.path.split(out_dir)
    for p in sorted(glob.glob(os.path.join(glob.escape(parent), glob.escape(f".{base}.tmp-") + "*"))):
        if p.endswith(".old") and not os.path.exists(out_dir):
            os.rename(p, out_dir)  # the previous corpus comes back
        else:
            shutil.rmtree(p, ignore_errors=True)


def prepare(paths=None, out_dir=DEFAULT_DIR, val_fraction=0.1, block_size=128, seed=0, verbose=True,
            domains=None, installed=False, chunk_size=1 << 20):
    """Tokenize documents into out_dir/{train.bin, val.bin, meta.json} -> meta. paths: files, directories, globs
    (None: the standard library; installed=True: the whole installation); domains: {name: [files, dirs, globs]}.
    out_dir is replaced whole, only if it holds nothing but a corpus, and only if both splits hold
    a window; user files (paths or domains) never replace the default or installed corpus."""
    out_dir = os.path.realpath(out_dir)  # subtle: a symlinked out_dir is replaced where it points
    ours = {os.path.realpath(DEFAULT_DIR): "default", os.path.realpath(INSTALLED_DIR): "installed"}
    if (paths or domains) and not installed and out_dir in ours:  # else train.py trains on them
        raise ValueError(f"{out_dir} is the {ours[out_dir]} corpus's place, not for your files; "
                         f"pass --out_dir=data/NAME (then train.py --data_dir=data/NAME)")
    _clean_up(out_dir)  # first: a killed run may have left out_dir missing, its corpus beside it
    extra = set(os.listdir(out_dir)) - CORPUS_ENTRIES if os.path.isdir(out_dir) else set()
    if os.path.exists(out_dir) and (extra or not os.path.isdir(out_dir)):
        raise ValueError(f"{out_dir} holds more than a corpus ({', '.join(sorted(extra)[:3]) or 'it is a file'}) and "
                         f"would be replaced whole; pass a new or corpus-only --out_dir")
    if not 0 < val_fraction < 1:
        raise ValueError(f"val_fraction={val_fraction} must be between 0 and 1")
    names, kept, skipped = corpus.documents(paths, domains, installed, out_dir, verbose)
    train, val = corpus.split_documents(kept, len(names or [None]), val_fraction, seed)
    n_train, n_val = (sum(n for _, n in s) + max(len(s) - 1, 0) for s in (train, val))  # bytes + EOTs
    if min(n_train, n_val) < block_size + 1:
        raise ValueError(f"corpus too short: {n_train} train and {n_val} val tokens (val takes whole files), each "
                         f"split needs block_size+1 = {block_size + 1}; add text or use a smaller --block_size")
    tmp = os.path.join(os.path.dirname(out_dir), f".{os.path.basename(out_dir)}.tmp-{os.getpid()}")  # hidden
    os.makedirs(tmp)  # subtle: not mkdtemp, whose 0700 would become out_dir's mode; this one follows the umask
    try:  # plain writes: nothing reads tmp, and a failure deletes it whole
        domain_tokens = {}
        for split, docs in (("train", train), ("val", val)):
            with open(os.path.join(tmp, f"{split}.bin"), "wb") as f:
                domain_tokens[split] = corpus.write_tokens(f, docs, len(names or [None]), EOT, chunk_size)
        source = "installed" if installed else "files" if paths or domains else "stdlib"
        meta = {"vocab_size": VOCAB_SIZE, "eot_id": EOT, "tokenizer": "bytes",
                **scan_bins(tmp, chunk=chunk_size), "source": source, "n_documents": len(kept),
                "val_fraction": val_fraction, "seed": seed, "skipped": skipped}
        if names:  # domain d of a split holds its tokens offsets[d] .. offsets[d+1]-1
            meta.update(domains=names, domain_tokens=domain_tokens,
                        domain_offsets={s: np.cumsum([0] + n).tolist() for s, n in domain_tokens.items()})
        with open(os.path.join(tmp, "meta.json"), "w") as f:
            json.dump(meta, f, indent=1)
        if os.path.exists(out_dir):
            os.rename(out_dir, tmp + ".old")  # subtle: killed before the next rename, _clean_up renames it back
        os.rename(tmp, out_dir)
    finally:
        _clean_up(out_dir)  # the old corpus, or a failed build (and out_dir back if the second rename failed)
    if verbose:
        print(f"wrote {out_dir}: {len(kept)} documents, {meta['train_tokens']:,} train, {meta['val_tokens']:,} val")
        for d, name in enumerate(names or []):
            print(f"  domain {d} {name}: {domain_tokens['train'][d]:,} train, {domain_tokens['val'][d]:,} val tokens")
    return meta


def atomic_write(path, write, mode="wb"):
    """write(f) on a fresh temporary file beside path (mkstemp: never shared), renamed over path -> write's result.
    Readers never see half a file; an existing one survives any failure of write (disk full, Ctrl-C)."""
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


def scan_bins(data_dir, vocab_size=1 << 16, chunk=1 << 20):
    """-> {train_tokens, val_tokens, max_token_id, fingerprint, unigram_entropy} of data_dir's token
    files, ids < vocab_size, in one pass per split of chunk-token reads (memory stays flat).
    fingerprint = a hash of both splits' content hashes (so the split point counts too);
    unigram_entropy = -sum_u p(u) ln p(u) over the train split (nats): the loss of a model that
    ignores context. train [5, 5, 7, 7] -> p = [0.5, 0.5] -> ln 2 = 0.6931."""
    meta, h = {"max_token_id": 0}, hashlib.sha256()
    buf = np.empty(chunk, dtype=np.uint16)  # subtle: one reused buffer, and read(), not np.memmap:
    for split in ("train", "val"):  # a mapping's pages count as this process's memory once touched
        path = os.path.join(data_dir, f"{split}.bin")
        meta[f"{split}_tokens"] = _n_tokens(path)  # one line for a missing, empty or odd-length file
        counts, split_hash = np.zeros(1 << 16, dtype=np.int64), hashlib.sha256()
        with open(path, "rb") as f:
            while n_bytes := f.readinto(buf):
                tokens = buf[: n_bytes // 2]
                ids = np.bincount(tokens)  # (largest id in the chunk + 1,)
                counts[: len(ids)] += ids
                split_hash.update(tokens)  # the same digest as hashing the whole file at once
        top = int(np.flatnonzero(counts)[-1])
        if top >= vocab_size:
            raise ValueError(f"{path} holds token id {top}, not below vocab_size {vocab_size}; pass the "
                             f"tokenizer's vocabulary size (at least --vocab_size={top + 1})")
        meta["max_token_id"] = max(meta["max_token_id"], top)
        h.update(split_hash.digest())
        if split == "train":
            p = counts[counts > 0] / counts.sum()  # p(u) of the ids that occur
            meta["unigram_entropy"] = float(-(p * np.log(p)).sum())  # H = -sum_u p(u) ln p(u)
    return {**meta, "fingerprint": h.hexdigest()[:32]}  # 128 bits are plenty


def nanogpt_meta(data_dir, vocab_size=None):
    """meta of a directory holding nanoGPT's train.bin and val.bin (uint16 ids, all below the vocabulary
    size): from its meta.pkl if it has one (vocab_size; itos decodes a char-level sample), else vocab_size."""
    meta = {"vocab_size": vocab_size, "eot_id": None, "tokenizer": "external"}
    path = os.path.join(data_dir, "meta.pkl")
    if os.path.exists(path):
        with open(path, "rb") as f:
            pkl = _PlainUnpickler(f).load()
        if vocab_size not in (None, pkl["vocab_size"]):
            raise ValueError(f"--vocab_size={vocab_size} but {path} says {pkl['vocab_size']}; drop the flag")
        meta["vocab_size"] = pkl["vocab_size"]
        if "itos" in pkl:  # {id: str} of nanoGPT's char-level datasets
            meta["itos"] = [pkl["itos"][i] for i in range(pkl["vocab_size"])]
    if meta["vocab_size"] is None:
        raise ValueError(f"{data_dir} holds nanoGPT's train.bin/val.bin but no meta.json nor meta.pkl; pass its "
                         "tokenizer's --vocab_size (e.g. 50257 for GPT-2 BPE)")
    return {**meta, **scan_bins(data_dir, meta["vocab_size"])}


class _PlainUnpickler(pickle.Unpickler):
    """nanoGPT's meta.pkl holds only dicts, strings and numbers: refuse anything that would run code."""

    def find_class(self, module, name):
        raise ValueError(f"meta.pkl refers to {module}.{name}, not plain data; it is not read")


def load_meta(data_dir, vocab_size=None):
    """meta.json of data_dir, checked: both token files hold its counts, its largest id is below vocab_size (if
    given) and its own. A nanoGPT directory (no meta.json) is read whole for its largest id (nanogpt_meta)."""
    if not os.path.isdir(data_dir):
        what = "is not a directory" if os.path.exists(data_dir) else "does not exist"
        raise ValueError(f"--data_dir={data_dir} {what}; prepare your text with python data.py FILES "
                         "--out_dir=data/NAME, then pass --data_dir=data/NAME")
    path = os.path.join(data_dir, "meta.json")
    if not os.path.exists(os.path.join(data_dir, "train.bin")):
        raise ValueError(f"{data_dir} holds no train.bin: it is not a prepared corpus; prepare it with python "
                         f"data.py {data_dir} --out_dir=data/NAME, then pass --data_dir=data/NAME")
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


class SampleWindows:
    """Sample i of a token file = tokens[i*T : i*T + T + 1]; N = (n_tokens - 1) // T.
    tokens = [0..9], T = 3 -> N = 3 samples: [0,1,2,3], [3,4,5,6], [6,7,8,9]"""

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


def corpus_dir(data_dir="", prepare_default=True):
    """data_dir, or "" for the default corpus (the standard library), which is prepared here on first use.
    The one place that prepares the default corpus: train.py, the experiments and bench.py call it."""
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
    p = argparse.ArgumentParser(description="Tokenize text (bytes, EOT between documents, split by file) into "
                                "train.bin / val.bin / meta.json; never reads its output or binary files.")
    p.add_argument("paths", nargs="*", help="files, directories or globs (default: the standard library's .py files "
                   "in domains code, tests, prose), or one nanoGPT directory holding train.bin/val.bin")
    p.add_argument("--installed", action="store_true", help="every .py file of this installation (data/installed)")
    p.add_argument("--domain", action="append", default=[], metavar="NAME=GLOB", help="files matching GLOB form "
                   "domain NAME (repeatable); positional paths then form domain 'other'")
    p.add_argument("--out_dir", help="new, or holding only a corpus: it is replaced whole (needed "
                   f"with paths or --domain; without them: {DEFAULT_DIR}, or {INSTALLED_DIR} "
                   "with --installed)")
    p.add_argument("--val_fraction", type=float, default=0.1, help="share of each domain's bytes held out")
    p.add_argument("--block_size", type=int, default=128, help="checks that each split holds one window (prepare)")
    p.add_argument("--seed", type=int, default=0, help="seed of the shuffle that splits files")
    p.add_argument("--vocab_size", type=int, help="for a nanoGPT directory: its tokenizer's vocabulary size")
    args = p.parse_args(argv)
    try:
        if len(args.paths) == 1 and os.path.isfile(os.path.join(args.paths[0], "train.bin")):
            d = args.paths[0]  # nanoGPT format: keep the .bin files, write meta.json (counts, max id, fingerprint)
            if args.out_dir:
                raise ValueError(f"{d} is a nanoGPT directory: train.py reads it where it is (--data_dir={d}), "
                                 "and this only writes its meta.json there; drop --out_dir")
            meta = nanogpt_meta(d, args.vocab_size)  # train.py checks --block_size against it
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
