"""
Text -> token stream (train.bin, val.bin, meta.json) -> fixed-length sample windows.

Follows nanoGPT's data/*/prepare.py (flat uint16 token files read through np.memmap) and
gives DeepSpeed Data Efficiency (arXiv 2212.03597) what its data analyzer and sampler need:
a fixed set of samples with stable ids. Sample i is the window

    sample_i = tokens[i*T : i*T + T + 1],  x = sample_i[:-1], y = sample_i[1:]

so windows do not overlap (they share one boundary token) and N = (n_tokens - 1) // T.
Documents (a file each) are split whole: per domain, a seeded shuffle, and val takes the
shortest prefix of it holding val_fraction of the domain's bytes (never every document; a
domain of one document is cut by bytes instead, its last val_fraction going to val).
Each split is its domains in order, EOT between documents:

    train = [domain 0 docs, shuffled] EOT [domain 1 docs, shuffled] EOT ...   (val alike)
    domain of window i = domain of its middle token i*T + T//2  (its majority if it spans two)

But:
- the tokenizer is plain bytes (ids 0..255) plus one end-of-document id, so any text works
  with no download; nanoGPT-format train.bin / val.bin (e.g. GPT-2 BPE) are read as they are;
- the default corpus is the running Python's standard library in three domains: `code` (its
  .py files), `tests` (.py files under test/, tests/, idle_test/ or named test_*.py) and
  `prose` (pydoc_data/topics.py, the documentation topics, as text: one document per topic);
  `--installed` adds every installed package's .py files, in the same domains;
- the split is by document, not by token, and identical content is read once (content hash),
  so no text is in both splits;
- read, tokenized and written in chunks: memory grows with the number of files, not their
  bytes (one pass checks and hashes, a second writes);
- never read as input: the output directory, any directory holding a train.bin, and files
  that are not text (a NUL byte or invalid UTF-8 in their first 8 KB);
- the corpus is built in a hidden sibling directory and swapped in with renames, so out_dir
  changes all at once or not at all (its old index/ goes with the old data);
- no .idx of document boundaries as in DeepSpeed's data_sampling/indexed_dataset.py (Megatron's
  format): samples are fixed windows, and meta.json records only where each domain starts.
"""

import argparse
import ast
import codecs
import collections
import functools
import glob
import hashlib
import json
import math
import os
import shutil
import sys
import sysconfig
import tempfile

import numpy as np
from tqdm import tqdm

EOT = 256  # end-of-document id, placed between documents
VOCAB_SIZE = 257  # 256 byte values + EOT
HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_DIR = os.path.join(HERE, "data", "stdlib")
INSTALLED_DIR = os.path.join(HERE, "data", "installed")
PYTHON_DOMAINS = ["code", "tests", "prose"]  # domain ids 0, 1, 2 of the built-in corpora
TEST_DIRS = {"test", "tests", "idle_test"}
HEAD = 8192  # bytes checked for text: no NUL and valid UTF-8 (git's 8000-byte binary test, plus UTF-8)
CORPUS_ENTRIES = {"train.bin", "val.bin", "meta.json", "index"}  # what out_dir may hold before it is replaced

# text: bytes held in memory, or None to read path; bytes start .. stop-1 of it (stop None: to the end)
Doc = collections.namedtuple("Doc", "domain path text start stop", defaults=(None, 0, None))

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
# finding documents and their domains


def _walk(root, skip=()):
    """Files under a directory, sorted; hidden entries and directories named in skip are left out."""
    for d, dirs, files in os.walk(root):
        dirs[:] = sorted(x for x in dirs if not x.startswith(".") and x not in skip)
        yield from (os.path.join(d, f) for f in sorted(files) if not f.startswith("."))


def find_files(paths):
    """Files, directories (walked, hidden entries skipped) and globs -> sorted unique files."""
    out = []
    for p in paths:
        matches = sorted(glob.glob(p, recursive=True)) if glob.has_magic(p) else [p]
        if not matches or not os.path.exists(matches[0]):
            raise ValueError(f"no such file or directory: {p}; pass existing files, directories or globs")
        for m in matches:
            out += list(_walk(m)) if os.path.isdir(m) else [m]
    return sorted(set(out))


def python_documents(installed=False):
    """Documents of the running Python in PYTHON_DOMAINS: the standard library's .py files, or with installed=True
    every .py file under sysconfig's stdlib, platstdlib, purelib and platlib (packages only through the last two)."""
    keys = ("stdlib", "platstdlib", "purelib", "platlib") if installed else ("stdlib",)
    roots, docs = dict.fromkeys(sysconfig.get_paths()[k] for k in keys), []  # unique roots, in order
    for root in roots:
        for path in _walk(root, skip=("__pycache__", "site-packages", "dist-packages")):  # packages: purelib, platlib
            rel = os.path.relpath(path, root).split(os.sep)
            if not path.endswith(".py"):
                continue
            if rel[-2:] == ["pydoc_data", "topics.py"]:
                docs += _topics(path)
            else:
                tests = bool(TEST_DIRS & set(rel[:-1])) or rel[-1].startswith("test_")
                docs.append(Doc(1 if tests else 0, path, None))
    return docs


def _topics(path):
    """pydoc_data/topics.py -> one prose Doc per documentation topic: its text, not the Python literal."""
    try:
        tree = ast.parse(open(path, "rb").read())
        topics = next(ast.literal_eval(n.value) for n in tree.body if isinstance(n, ast.Assign))  # {name: text}
    except (SyntaxError, ValueError, StopIteration):
        return [Doc(0, path, None)]  # not the file we know: plain code
    return [Doc(2, f"{path}#{name}", text.encode()) for name, text in sorted(topics.items())]


def user_documents(paths, domains):
    """(domain names or None, documents) for user files: `paths` alone have no domain; with domains
    {name: [files, directories or globs]}, positional paths form a last domain named "other"."""
    groups = {name: list(globs) for name, globs in (domains or {}).items()}
    if paths:
        groups.setdefault("other" if groups else None, []).extend(paths)
    if len(groups) > 255:
        raise ValueError(f"{len(groups)} domains; at most 255 fit the uint8 domain ids")
    docs = [Doc(d, f, None) for d, globs in enumerate(groups.values()) for f in find_files(globs)]
    return (list(groups) if domains else None), docs


# -----------------------------------------------------------------------------
# reading: skip what is not input text, drop duplicate content, split by document


def _chunks(doc, buf):
    """A document's bytes start .. stop-1, len(buf) at a time, as memoryviews of doc.text or of buf (reused: copy
    to keep). subtle: one buffer for every read keeps memory flat; fresh chunks of varying sizes fragment the heap."""
    if doc.text is not None:
        text = memoryview(doc.text)[doc.start : doc.stop]
        yield from (text[i : i + len(buf)] for i in range(0, len(text), len(buf)))
        return
    with open(doc.path, "rb", buffering=0) as f:
        f.seek(doc.start)
        left = math.inf if doc.stop is None else doc.stop - doc.start
        while left > 0 and (n := f.readinto(buf[: min(len(buf), left)])):
            left -= n
            yield buf[:n]


def _not_text(head):
    """"binary" if head has a NUL byte, "not UTF-8" if it does not decode, else None (a cut last character is fine)."""
    if b"\0" in head:
        return "binary"
    try:
        codecs.getincrementaldecoder("utf-8")().decode(head, final=False)
    except UnicodeDecodeError:
        return "not UTF-8"
    return None


def _in_corpus(d, cache):
    """True if directory d or one of its parents holds a prepared corpus (a train.bin); cache: {dir: bool}."""
    if d not in cache:
        parent = os.path.dirname(d)
        cache[d] = os.path.isfile(os.path.join(d, "train.bin")) or (parent != d and _in_corpus(parent, cache))
    return cache[d]


def _read(doc, buf):
    """(reason to skip or None, bytes, content digest) of one document, read once, chunk by chunk."""
    h, n = hashlib.sha256(), 0
    try:
        for chunk in _chunks(doc, buf):
            reason = _not_text(bytes(chunk[:HEAD])) if n == 0 else None  # the first 8 KB decide
            if reason:
                return reason, n, None
            h.update(chunk)
            n += len(chunk)
    except OSError:
        return "unreadable", n, None
    return ("empty" if n == 0 else None), n, h.digest()


def scan(docs, out_dir, chunk_size=1 << 20, verbose=True):
    """Read every document once -> (kept [(doc, n_bytes)], skipped Counter {reason: files}). First of equals wins."""
    out_real, seen, cache = os.path.join(os.path.realpath(out_dir), ""), set(), {}
    kept, skipped, buf = [], collections.Counter(), memoryview(bytearray(chunk_size))
    for doc in tqdm(docs, desc="scanning", unit="file", disable=None if verbose else True):  # bar on terminals only
        real = os.path.realpath(doc.path) if doc.text is None else doc.path
        reason = ("in the output directory" if real.startswith(out_real) else
                  "in a prepared corpus" if doc.text is None and _in_corpus(os.path.dirname(real), cache) else
                  "duplicate" if real in seen else None)
        if reason is None:
            reason, n, digest = _read(doc, buf)
            reason = reason or ("duplicate" if digest in seen else None)  # same content under another name
        if reason:
            skipped[reason] += 1
        else:
            seen.update((real, digest))  # this path and this content are duplicates from now on
            kept.append((doc, n))
    return kept, skipped


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


# -----------------------------------------------------------------------------
# writing train.bin / val.bin / meta.json, all or nothing


def atomic_write(path, write, mode="wb"):
    """Call write(f) on a fresh temporary file beside path, then rename it over path; returns what write returned.

    Readers never see half a file, an existing file survives any failure of write (disk full,
    Ctrl-C), and two writers never share a temporary name (each gets its own from mkstemp).
    """
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


def write_tokens(f, docs, n_domains, chunk_size, bar):
    """Stream documents into f as uint16 ids, EOT between documents -> {tokens per domain, max id, content hash}.
    An EOT counts to the domain of the document before it."""
    domain_tokens, top, h = [0] * n_domains, 0, hashlib.sha256()
    buf, ids_buf = memoryview(bytearray(chunk_size)), np.empty(chunk_size, dtype=np.uint16)  # reused for every chunk
    sep = np.array([EOT], dtype=np.uint16)
    for i, (doc, _) in enumerate(docs):
        if i:
            f.write(sep)  # EOT between documents, none after the last
            h.update(sep)
            domain_tokens[docs[i - 1][0].domain] += 1
            top = EOT
        for chunk in _chunks(doc, buf):
            ids = ids_buf[: len(chunk)]
            ids[:] = np.frombuffer(chunk, dtype=np.uint8)  # token id = byte value
            f.write(ids)
            h.update(ids)
            domain_tokens[doc.domain] += len(ids)
            top = max(top, int(ids.max()))
            bar.update(len(chunk))
    return {"domain_tokens": domain_tokens, "max": top, "digest": h.digest()}


def _fingerprint(train_digest, val_digest):
    """One hex string for a corpus: a hash of the two splits' content hashes (so the split point counts too)."""
    return hashlib.sha256(train_digest + val_digest).hexdigest()[:32]  # 128 bits are plenty


def _alive(pid):
    """Whether process pid exists (signal 0 asks without sending anything)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # it exists, as another user's
    return True


def _clean_leftovers(out_dir):
    """Delete the build directories of dead prepare runs beside out_dir (.NAME.tmp-PID-*); a backup (.old) that a kill
    between the two renames of _swap_in left without out_dir becomes out_dir again."""
    parent, base = os.path.split(os.path.abspath(out_dir))
    prefix = f".{base}.tmp-"
    for p in sorted(glob.glob(os.path.join(glob.escape(parent), glob.escape(prefix) + "*"))):
        pid = os.path.basename(p)[len(prefix) :].split("-")[0]
        if pid.isdigit() and _alive(int(pid)):
            continue  # another prepare at work
        if p.endswith(".old") and not os.path.exists(out_dir):
            os.rename(p, out_dir)  # the previous corpus comes back
        else:
            shutil.rmtree(p, ignore_errors=True)


def _swap_in(tmp, out_dir):
    """Replace out_dir by the finished directory tmp (its sibling) with two renames; the old one is deleted after."""
    if os.path.exists(out_dir):
        os.rename(out_dir, tmp + ".old")  # subtle: a kill before the next rename is undone by _clean_leftovers
        try:
            os.rename(tmp, out_dir)
        except OSError:
            os.rename(tmp + ".old", out_dir)  # the old corpus stays
            raise
        shutil.rmtree(tmp + ".old", ignore_errors=True)
    else:
        os.rename(tmp, out_dir)


def prepare(paths=None, out_dir=DEFAULT_DIR, val_fraction=0.1, block_size=128, seed=0, verbose=True,
            domains=None, installed=False, chunk_size=1 << 20):
    """Tokenize documents into out_dir/{train.bin, val.bin, meta.json}; returns the meta dict.

    paths: files, directories, globs (None: the standard library; installed=True: the whole installation);
    domains: {name: [files, directories, globs]}. Nothing is written unless both splits hold a window of
    block_size + 1 tokens; out_dir is replaced whole, and only if it holds nothing but a corpus.
    """
    out_dir = os.path.realpath(out_dir)  # subtle: a symlinked out_dir is replaced where it points
    _clean_leftovers(out_dir)  # first: a kill between two renames may have left out_dir missing
    _check_arguments(out_dir, val_fraction, paths or domains, installed)
    if installed or not (paths or domains):
        names, docs = PYTHON_DOMAINS, python_documents(installed)
    else:
        names, docs = user_documents(paths, domains)
    kept, skipped = scan(docs, out_dir, chunk_size, verbose)
    why = ", ".join(f"{n} {reason}" for reason, n in sorted(skipped.items(), key=lambda kv: (-kv[1], kv[0])))
    if verbose and skipped:
        print(f"skipped {sum(skipped.values())} files: {why}")
    if not kept:
        raise ValueError(f"the corpus is empty: no text in {len(docs)} files ({why or 'none found'}); "
                         f"pass files with text in them")
    train, val = split_documents(kept, len(names or [None]), val_fraction, seed)
    n_train, n_val = (sum(n for _, n in s) + max(len(s) - 1, 0) for s in (train, val))  # bytes + EOTs
    if min(n_train, n_val) < block_size + 1:
        raise ValueError(f"corpus too short: {n_train} train and {n_val} val tokens (val takes whole files), each "
                         f"split needs block_size+1 = {block_size + 1}; add text or use a smaller --block_size")
    parent, base = os.path.split(os.path.abspath(out_dir))
    os.makedirs(parent, exist_ok=True)
    tmp = tempfile.mkdtemp(dir=parent, prefix=f".{base}.tmp-{os.getpid()}-")  # hidden: never read as input
    try:
        meta = _build(tmp, train, val, names, chunk_size, verbose)
        source = "installed" if installed else "files" if paths or domains else "stdlib"
        meta.update(n_documents=len(kept), val_fraction=val_fraction, seed=seed, skipped=dict(skipped), source=source)
        write_meta(tmp, meta)
        _swap_in(tmp, out_dir)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)  # a failed build leaves nothing behind
    if verbose:
        print(f"wrote {out_dir}: {len(kept)} documents, {meta['train_tokens']:,} train, "
              f"{meta['val_tokens']:,} val tokens")
        for d, name in enumerate(names or []):
            print(f"  domain {d} {name}: {meta['domain_tokens']['train'][d]:,} train, "
                  f"{meta['domain_tokens']['val'][d]:,} val tokens")
    return meta


def _check_arguments(out_dir, val_fraction, user_files, installed):
    if not 0 < val_fraction < 1:
        raise ValueError(f"val_fraction={val_fraction} must be between 0 and 1")
    if installed and user_files:
        raise ValueError("--installed reads the Python installation: pass no paths or --domain with it")
    extra = set(os.listdir(out_dir)) - CORPUS_ENTRIES if os.path.isdir(out_dir) else set()
    if os.path.exists(out_dir) and (extra or not os.path.isdir(out_dir)):
        raise ValueError(f"{out_dir} holds more than a corpus ({', '.join(sorted(extra)[:3]) or 'it is a file'}) and "
                         f"would be replaced whole; pass a new or corpus-only --out_dir")


def _build(tmp, train, val, names, chunk_size, verbose):
    """Write tmp/train.bin and tmp/val.bin -> meta: token counts, domains, max id and fingerprint."""
    total = sum(n for _, n in train + val)
    bar = tqdm(total=total, desc="writing", unit="B", unit_scale=True, disable=None if verbose else True)
    out, n_domains = {}, len(names or [None])
    for split, docs in (("train", train), ("val", val)):
        write = functools.partial(write_tokens, docs=docs, n_domains=n_domains, chunk_size=chunk_size, bar=bar)
        out[split] = atomic_write(os.path.join(tmp, f"{split}.bin"), write)
    bar.close()
    meta = {"vocab_size": VOCAB_SIZE, "eot_id": EOT, "tokenizer": "bytes",
            "train_tokens": sum(out["train"]["domain_tokens"]), "val_tokens": sum(out["val"]["domain_tokens"]),
            "max_token_id": max(out["train"]["max"], out["val"]["max"]),
            "fingerprint": _fingerprint(out["train"]["digest"], out["val"]["digest"])}
    if names:
        meta["domains"] = names
        meta["domain_tokens"] = {s: out[s]["domain_tokens"] for s in out}
        # domain d of a split holds its tokens offsets[d] .. offsets[d+1]-1
        meta["domain_offsets"] = {s: np.cumsum([0] + out[s]["domain_tokens"]).tolist() for s in out}
    return meta


# -----------------------------------------------------------------------------
# reading a prepared corpus back: meta, checks, fingerprint


def write_meta(out_dir, meta):
    atomic_write(os.path.join(out_dir, "meta.json"), lambda f: json.dump(meta, f, indent=1), mode="w")


def _read_meta(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ValueError(f"{path} is not valid JSON ({e}); prepare the corpus again (python data.py)") from None


def _n_tokens(path):
    """Tokens in a uint16 token file; one line naming the file if it is missing, empty or of odd length."""
    if not os.path.isfile(path):
        raise ValueError(f"no such token file: {path}; prepare the data with `python data.py` first")
    size = os.path.getsize(path)
    if size == 0 or size % 2:
        raise ValueError(f"{path} is {'empty' if size == 0 else f'{size} bytes, an odd length'}: not a uint16 "
                         f"token file; prepare it again (python data.py)")
    return size // 2


def scan_bins(data_dir, chunk_size=1 << 20):
    """{split: (tokens, max id, content digest)} of data_dir's train.bin and val.bin, read chunk by chunk."""
    out = {}
    for split in ("train", "val"):
        path = os.path.join(data_dir, f"{split}.bin")
        n, top, h = _n_tokens(path), 0, hashlib.sha256()
        with open(path, "rb") as f:
            while chunk := f.read(chunk_size & ~1):  # an even number of bytes: whole tokens
                h.update(chunk)
                top = max(top, int(np.frombuffer(chunk, dtype=np.uint16).max()))
        out[split] = (n, top, h.digest())
    return out


def nanogpt_meta(data_dir, vocab_size, meta=None):
    """meta (or a new one) updated from data_dir's nanoGPT-format .bin files: token counts, max id, fingerprint.
    Refuses token ids >= vocab_size, naming the file."""
    meta = {"eot_id": None, "tokenizer": "external", **(meta or {}), "vocab_size": int(vocab_size)}
    bins = scan_bins(data_dir)
    for split, (n, top, _) in bins.items():
        if top >= vocab_size:
            raise ValueError(f"{os.path.join(data_dir, split + '.bin')} holds token id {top}, not below vocab_size "
                             f"{vocab_size}; pass the tokenizer's vocabulary size (at least --vocab_size={top + 1})")
        meta[f"{split}_tokens"] = n
    meta["max_token_id"] = max(top for _, top, _ in bins.values())
    meta["fingerprint"] = _fingerprint(bins["train"][2], bins["val"][2])
    return meta


def load_meta(data_dir, vocab_size=None):
    """meta.json of data_dir, checked against its token files: both exist, hold the recorded token counts, and the
    largest token id is below vocab_size (if given) and meta's own. A nanoGPT directory (train.bin, val.bin, no
    meta.json) needs vocab_size and is read once to find its largest id."""
    path = os.path.join(data_dir, "meta.json")
    if os.path.exists(path):
        meta = _read_meta(path)
    elif not os.path.exists(os.path.join(data_dir, "train.bin")):
        raise ValueError(f"no train.bin in {data_dir}; run `python data.py --out_dir {data_dir} FILES...` first")
    elif vocab_size is None:
        raise ValueError(f"{data_dir} has train.bin but no meta.json; pass its vocabulary size, "
                         f"e.g. --vocab_size=50257 for GPT-2 BPE")
    else:
        meta = nanogpt_meta(data_dir, vocab_size)
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
    when the token files were written; reads meta.json and checks the files' sizes. Older corpora are hashed now."""
    meta = load_meta(data_dir) if os.path.exists(os.path.join(data_dir, "meta.json")) else {}
    if "fingerprint" in meta:
        return meta["fingerprint"]
    bins = scan_bins(data_dir)
    return _fingerprint(bins["train"][2], bins["val"][2])


# -----------------------------------------------------------------------------
# fixed-length sample windows, shared by the analyzer, the sampler and training


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
        offsets = _read_meta(meta_path).get("domain_offsets", {}).get(split) if os.path.exists(meta_path) else None
        if offsets is None:
            return None
        middle = np.arange(len(self), dtype=np.int64) * self.block_size + self.block_size // 2  # (N,)
        return (np.searchsorted(offsets, middle, side="right") - 1).astype(np.uint8)  # o[d] <= middle < o[d+1]



def corpus_dir(data_dir="", prepare_default=True):
    """data_dir, or "" for the default corpus (the standard library), which is prepared here on first use.

    The one place that prepares the default corpus: train.py, reproduce.py, mixture.py and bench.py call it.
    """
    if data_dir:
        return data_dir
    if prepare_default and not os.path.exists(os.path.join(DEFAULT_DIR, "meta.json")):
        print("preparing the default corpus (the Python standard library's .py files) ...", flush=True)
        prepare(out_dir=DEFAULT_DIR)
    return DEFAULT_DIR


def load_splits(data_dir, block_size, vocab_size=None):
    """-> (train windows, val windows, meta) of a prepared data_dir, checked (see load_meta)."""
    meta = load_meta(data_dir, vocab_size)  # checks the largest token id against the vocabulary
    train, val = (SampleWindows(os.path.join(data_dir, f"{split}.bin"), block_size) for split in ("train", "val"))
    return train, val, meta


# -----------------------------------------------------------------------------


def parse_domains(specs):
    """["code=src/*.py", "docs=docs", "code=lib"] -> {"code": ["src/*.py", "lib"], "docs": ["docs"]}"""
    out = {}
    for spec in specs:
        name, sep, pattern = spec.partition("=")
        if not (sep and name and pattern):
            raise ValueError(f"--domain {spec!r} is not NAME=GLOB; write e.g. --domain code='src/**/*.py'")
        out.setdefault(name, []).append(pattern)
    return out


def main(argv=None):
    p = argparse.ArgumentParser(description="Tokenize text into train.bin / val.bin / meta.json: byte-level, EOT "
                                "between documents, split by file. With no paths: the Python standard library. Never "
                                "read: the output directory, any directory holding a train.bin, and files with a NUL "
                                "byte or invalid UTF-8 in their first 8 KB (one line says how many were skipped).")
    p.add_argument("paths", nargs="*", help="files, directories or globs (default: the standard library's .py files "
                   "in domains code, tests, prose); one directory holding nanoGPT train.bin/val.bin is used as it is")
    p.add_argument("--installed", action="store_true", help="every .py file of this Python installation (standard "
                   "library and installed packages, tests included), deduplicated by content, in domains code, "
                   "tests, prose; --out_dir defaults to data/installed")
    p.add_argument("--domain", action="append", default=[], metavar="NAME=GLOB", help="files matching GLOB (a file, "
                   "directory or glob; repeat NAME for more) form domain NAME (a file in two goes to the first); "
                   "positional paths then form domain 'other'. Example: --domain code='src/**/*.py' --domain docs=docs")
    p.add_argument("--out_dir", default=None, help=f"where to write; replaced whole, so it must be new or hold only a "
                   f"corpus (default: {DEFAULT_DIR}, or {INSTALLED_DIR} with --installed)")
    p.add_argument("--val_fraction", type=float, default=0.1, help="share of each domain's bytes held out for "
                   "validation, in whole files (default: %(default)s)")
    p.add_argument("--block_size", type=int, default=128, help="only checks that each split holds one window of "
                   "block_size + 1 tokens; train.py sets the one it trains with (default: %(default)s, as train.py)")
    p.add_argument("--seed", type=int, default=0, help="seed of the shuffle that splits files (default: %(default)s)")
    p.add_argument("--vocab_size", type=int, default=None, help="for a nanoGPT directory: its tokenizer's vocabulary "
                   "size, recorded in meta.json (every token id must be below it)")
    args = p.parse_args(argv)
    try:
        if len(args.paths) == 1 and os.path.isfile(os.path.join(args.paths[0], "train.bin")):
            d = args.paths[0]  # nanoGPT format: keep the .bin files, (re)write meta.json (counts, max id, fingerprint)
            old = _read_meta(os.path.join(d, "meta.json")) if os.path.exists(os.path.join(d, "meta.json")) else {}
            vocab_size = args.vocab_size or old.get("vocab_size")  # --vocab_size wins over a recorded one
            if vocab_size is None:
                raise ValueError(f"{d} has train.bin but no vocabulary size; pass --vocab_size (50257 for GPT-2 BPE)")
            meta = nanogpt_meta(d, vocab_size, old)
            for split in ("train", "val"):
                SampleWindows(os.path.join(d, f"{split}.bin"), args.block_size)
            write_meta(d, meta)
            print(f"{d} is in nanoGPT format: vocab_size {meta['vocab_size']}, largest token id "
                  f"{meta['max_token_id']}; train with --data_dir={d}")
        else:
            out_dir = args.out_dir or (INSTALLED_DIR if args.installed else DEFAULT_DIR)
            prepare(args.paths, out_dir, args.val_fraction, args.block_size, args.seed,
                    domains=parse_domains(args.domain), installed=args.installed)
    except (ValueError, OSError) as e:
        sys.exit(f"error: {e}")


if __name__ == "__main__":
    main()
