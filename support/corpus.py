"""
Which documents make a corpus, and in which domains: user files, or the .py files of the running
Python.

data.py tokenizes what this file finds; DeepSpeed has no counterpart (Megatron's
preprocess_data.py, which it uses, reads one JSON-lines file). But:
- the default corpus is the running Python's standard library (found through sysconfig) in three
  domains: `code` (its .py files), `tests` (.py files under test/, tests/, idle_test/ or named
  test_*.py) and `prose` (pydoc_data/topics.py, the documentation topics, as text: one document
  per topic); `installed=True` adds every installed package's .py files, in the same domains;
- user files, directories and globs form one unnamed domain, or named ones (`--domain NAME=GLOB`),
  and then the positional paths form a last domain "other";
- never read as input: the output directory, any directory holding a train.bin, files that are
  not text (a NUL byte or invalid UTF-8 in their first 8 KB) and duplicates (a path seen before,
  or its content under another name);
- documents are split whole between train and val (split_documents), never by token (with few
  documents, one may be cut at a line end to keep val near its share; prepare says so), and read in
  chunks (hashed, then streamed into token files through one reused buffer by write_tokens): memory
  grows with the number of files, not their bytes.
"""

import ast
import codecs
import collections
import glob
import hashlib
import os
import sysconfig

import numpy as np
from tqdm import tqdm

PYTHON_DOMAINS = ["code", "tests", "prose"]  # domain ids 0, 1, 2 of the built-in corpora
TEST_DIRS = {"test", "tests", "idle_test"}
# bytes checked for text: no NUL and valid UTF-8 (git's 8000-byte binary test, plus UTF-8)
HEAD = 8192

# text: bytes held in memory, or None to read path; bytes start .. stop-1 of it
# (stop None: to the end)
Doc = collections.namedtuple("Doc", "domain path text start stop", defaults=(None, 0, None))


def documents(paths, domains, installed, out_dir, verbose=True):
    """-> (domain names or None, kept [(doc, n_bytes)], skipped {reason: files}): the running
    Python's .py files (no paths or domains, or installed=True) or the user's, each read once, the
    first of equal contents kept."""
    if installed and (paths or domains):
        raise ValueError("--installed reads the Python installation: "
                         "pass no paths or --domain with it")
    if installed or not (paths or domains):
        names = PYTHON_DOMAINS
        docs = python_documents(installed)
    else:
        names, docs = user_documents(paths, domains)
    out_real = os.path.join(os.path.realpath(out_dir), "")
    seen = set()
    cache = {}
    kept = []
    skipped = collections.Counter()
    disable = None if verbose else True  # bar on terminals only
    for doc in tqdm(docs, desc="scanning", unit="file", disable=disable):
        real = os.path.realpath(doc.path) if doc.text is None else doc.path
        reason = None
        if real.startswith(out_real):
            reason = "in the output directory"
        elif doc.text is None and _in_corpus(os.path.dirname(real), cache):
            reason = "in a prepared corpus"
        if reason is None:
            reason, n, digest = _read(doc)
            reason = reason or ("duplicate" if digest in seen else None)
        if reason:
            skipped[reason] += 1
        else:
            seen.add(digest)  # this content is a duplicate from now on
            kept.append((doc, n))
    why = ", ".join(f"{n} {reason}"
                    for reason, n in sorted(skipped.items(), key=lambda kv: (-kv[1], kv[0])))
    if verbose and skipped:
        print(f"skipped {sum(skipped.values())} files: {why}")
    if not kept:
        raise ValueError(f"the corpus is empty: no text in {len(docs)} files "
                         f"({why or 'none found'}); pass files with text in them")
    return names, kept, dict(skipped)


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
        if len(group) == 1:  # one document (nanoGPT's input.txt): train = its head, val = its tail
            doc, n = group[0]
            cut = n - int(n * val_fraction)
            train.append((doc._replace(stop=cut), cut))
            val += [(doc._replace(start=cut), n - cut)] if cut < n else []
            continue
        order = np.random.default_rng([seed, d]).permutation(len(group))  # deterministic shuffle
        group = [group[i] for i in order]
        target = val_fraction * sum(n for _, n in group)
        taken = 0
        n_val = 0
        # shortest prefix reaching the target, one document left
        while n_val < len(group) - 1 and taken < target:
            taken += group[n_val][1]
            n_val += 1
        doc, n = group[n_val - 1]
        # subtle: 2x leaves the standard library's split as it was (its prose: 15.8% for 10%)
        cut = line_end_after(doc, target - (taken - n)) if taken > 2 * target else None
        if cut is not None and cut < n:  # few documents: the last val one shared at a line end
            start = doc.start
            group[n_val - 1] = (doc._replace(stop=start + cut), cut)
            group.append((doc._replace(start=start + cut), n - cut))
            cuts.append((doc, cut, n - cut))
        val += group[:n_val]
        train += group[n_val:]
    return train, val, cuts


def line_end_after(doc, need):
    """The offset just past the first newline at or after byte `need` of doc, or None.
    b"ab\ncd\nef", need 3 -> 6."""
    offset = 0
    for b in read(doc):
        ends = np.flatnonzero(b[max(0, int(need) - offset) :] == ord("\n"))
        if len(ends):
            return offset + max(0, int(need) - offset) + int(ends[0]) + 1
        offset += len(b)
    return None


def write_tokens(f, docs, n_domains, eot, chunk_size):
    """Stream documents into f as uint16 byte-level ids, eot between documents -> tokens per domain
    (an eot counts to the document before it). subtle: one reused buffer keeps memory flat; fresh
    arrays fragment the heap."""
    domain_tokens = [0] * n_domains
    buf = np.empty(chunk_size, dtype=np.uint16)
    for i, (doc, n) in enumerate(docs):
        if i:
            f.write(np.uint16(eot).tobytes())  # between documents, none after the last
            domain_tokens[docs[i - 1][0].domain] += 1
        for b in read(doc, chunk_size):  # (at most chunk_size,) uint8
            ids = buf[: len(b)]
            ids[:] = b  # token id = byte value
            f.write(ids)
        domain_tokens[doc.domain] += n
    return domain_tokens


# -----------------------------------------------------------------------------
# finding documents and their domains


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


def parse_domains(specs):
    """["code=src/*.py", "docs=docs", "code=lib"]
    -> {"code": ["src/*.py", "lib"], "docs": ["docs"]}"""
    out = {}
    for spec in specs:
        name, sep, pattern = spec.partition("=")
        if not (sep and name and pattern):
            raise ValueError(f"--domain {spec!r} is not NAME=GLOB; "
                             "write e.g. --domain code='src/**/*.py'")
        out.setdefault(name, []).append(pattern)
    return out


# -----------------------------------------------------------------------------
# reading: skip what is not input text, and content read before


def read(doc, size=1 << 16):
    """A document's bytes start .. stop-1 as uint8 arrays of at most size bytes, one at a time:
    slices of its text or reads of its file. b"abcde", size=2 -> [97, 98], [99, 100], [101]
    subtle: not np.memmap, whose pages count as this process's resident memory once touched, until
    it is dropped: one large document (a whole corpus in one input.txt) would be held whole."""
    if doc.text is not None:
        b = np.frombuffer(doc.text, dtype=np.uint8)[doc.start : doc.stop]
        yield from (b[k : k + size] for k in range(0, len(b), size))
        return
    with open(doc.path, "rb") as f:
        stop = os.fstat(f.fileno()).st_size if doc.stop is None else doc.stop
        f.seek(doc.start)
        for k in range(doc.start, stop, size):  # subtle: read(n) allocates n bytes first: no more
            yield np.frombuffer(f.read(min(size, stop - k)), dtype=np.uint8)


def _read(doc):
    """(reason to skip or None, n bytes, content digest) of a document. Skipped: "unreadable",
    "empty", "binary" (a NUL byte in its first 8 KB) and "not UTF-8" (those 8 KB do not decode, a
    cut last character aside)."""
    try:
        chunks = read(doc)  # the first holds HEAD bytes, or the whole document
        first = next(chunks, np.zeros(0, dtype=np.uint8))
        head = first[:HEAD].tobytes()
        if len(first) == 0 or b"\0" in head:
            return ("binary" if len(first) else "empty"), len(first), None
        try:
            codecs.getincrementaldecoder("utf-8")().decode(head, final=False)
        except UnicodeDecodeError:
            return "not UTF-8", len(first), None
        n = len(first)
        digest = hashlib.sha256(first)
        for b in chunks:
            n += len(b)
            digest.update(b)
    except OSError:
        return "unreadable", 0, None
    return None, n, digest.digest()


def _in_corpus(d, cache):
    """True if directory d or one of its parents holds a prepared corpus (a train.bin); cache:
    {dir: bool}."""
    if d not in cache:
        parent = os.path.dirname(d)
        cache[d] = (os.path.isfile(os.path.join(d, "train.bin"))
                    or (parent != d and _in_corpus(parent, cache)))
    return cache[d]
