"""
Prepare a corpus: documents (corpus.py finds them, in domains) -> train.bin, val.bin, meta.json.

    python data.py                                # the standard library's .py files -> data/stdlib
    python data.py --installed                    # every installed .py file -> data/installed
    python data.py MY_TEXT --out_dir=data/mytext  # your files, directories or globs
    python data.py --domain code='src/**/*.py' --domain docs=docs --out_dir=data/mine

Documents are split whole between train and val (corpus.split_documents; with few documents one
may be cut at a line end, with a note); each split is its domains in order, EOT between documents:

    train = [domain 0 docs, shuffled] EOT [domain 1 docs, shuffled] EOT ...   (val alike)

But:
- written in chunks through one reused buffer: memory does not grow with the input's bytes;
- the corpus is built in a hidden sibling directory and swapped in with two renames: out_dir
  changes all at once, and a killed run leaves the old corpus whole;
- no .idx of document boundaries (DeepSpeed's indexed_dataset.py): meta.json records where each
  domain starts.
"""

import argparse
import glob
import json
import os
import shutil
import sys

import numpy as np

from support import corpus
from support.bins import nanogpt_meta, scan_bins
from support.files import atomic_write

EOT = 256  # the end-of-document id written between documents; the others are the bytes 0..255
VOCAB_SIZE = 257  # 256 byte values + EOT
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # the repository
DEFAULT_DIR = os.path.join(ROOT, "data", "stdlib")
INSTALLED_DIR = os.path.join(ROOT, "data", "installed")
# what out_dir may hold before it is replaced
CORPUS_ENTRIES = {"train.bin", "val.bin", "meta.json", "index", "scan.json"}


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
    names, kept, skipped = corpus.documents(paths, domains, installed, out_dir, verbose)
    train, val, cuts = corpus.split_documents(kept, len(names or [None]), val_fraction, seed)
    # bytes + EOTs
    n_train, n_val = (sum(n for _, n in s) + max(len(s) - 1, 0) for s in (train, val))
    if min(n_train, n_val) < block_size + 1:
        raise ValueError(f"corpus too short: {n_train} train and {n_val} val tokens "
                         "(val takes whole files), each split needs "
                         f"block_size+1 = {block_size + 1}; "
                         "add text or use a smaller --block_size")
    tmp_name = f".{os.path.basename(out_dir)}.tmp-{os.getpid()}"  # hidden
    tmp = os.path.join(os.path.dirname(out_dir), tmp_name)
    # subtle: not mkdtemp, whose 0700 would become out_dir's mode; this one follows the umask
    os.makedirs(tmp)
    try:  # plain writes: nothing reads tmp, and a failure deletes it whole
        domain_tokens = {}
        n_domains = len(names or [None])
        for split, docs in (("train", train), ("val", val)):
            with open(os.path.join(tmp, f"{split}.bin"), "wb") as f:
                domain_tokens[split] = corpus.write_tokens(f, docs, n_domains, EOT, chunk_size)
        if installed:
            source = "installed"
        elif paths or domains:
            source = "files"
        else:
            source = "stdlib"
        meta = {"vocab_size": VOCAB_SIZE, "eot_id": EOT, "tokenizer": "bytes",
                **scan_bins(tmp, chunk=chunk_size), "source": source, "n_documents": len(kept),
                "val_fraction": val_fraction, "seed": seed, "skipped": skipped}
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
        _print_written(out_dir, meta, names, domain_tokens, cuts)
    return meta


def _print_written(out_dir, meta, names, domain_tokens, cuts):
    """What prepare wrote: documents and tokens per split and domain, and each document it cut."""
    print(f"wrote {out_dir}: {meta['n_documents']} documents, "
          f"{meta['train_tokens']:,} train, {meta['val_tokens']:,} val")
    for d, name in enumerate(names or []):
        print(f"  domain {d} {name}: "
              f"{domain_tokens['train'][d]:,} train, {domain_tokens['val'][d]:,} val tokens")
    for doc, to_val, to_train in cuts:
        print(f"note: few documents: whole files would put far more than --val_fraction="
              f"{meta['val_fraction']:g} in val, so {doc.path} is cut at a line end: its first "
              f"{to_val:,} bytes in val, the other {to_train:,} in train (more files avoid it)")


def corpus_dir(data_dir="", prepare_default=True):
    """data_dir, or "" for the default corpus (the standard library), which is prepared here on
    first use. The one place that prepares the default corpus: train.py, the experiments and
    bench.py call it."""
    if (not data_dir and prepare_default
            and not os.path.exists(os.path.join(DEFAULT_DIR, "meta.json"))):
        print("preparing the default corpus (the Python standard library's .py files) ...",
              flush=True)
        prepare(out_dir=DEFAULT_DIR)
    return data_dir or DEFAULT_DIR


def main(argv=None):
    p = argparse.ArgumentParser(description="Tokenize text (bytes, EOT between documents, "
                                "split by file) into train.bin / val.bin / meta.json; "
                                "never reads its output or binary files.")
    p.add_argument("paths", nargs="*",
                   help="files, directories or globs "
                   "(default: the standard library's .py files in domains code, tests, prose), "
                   "or one nanoGPT directory holding train.bin/val.bin")
    p.add_argument("--installed", action="store_true",
                   help="every .py file of this installation (data/installed)")
    p.add_argument("--domain", action="append", default=[], metavar="NAME=GLOB",
                   help="files matching GLOB form domain NAME (repeatable); "
                   "positional paths then form domain 'other'")
    p.add_argument("--out_dir",
                   help="new, or holding only a corpus: it is replaced whole "
                   f"(needed with paths or --domain; without them: {DEFAULT_DIR}, "
                   f"or {INSTALLED_DIR} with --installed)")
    p.add_argument("--val_fraction", type=float, default=0.1,
                   help="share of each domain's bytes held out")
    p.add_argument("--block_size", type=int, default=128,
                   help="checks that each split holds one window (prepare)")
    p.add_argument("--seed", type=int, default=0, help="seed of the shuffle that splits files")
    p.add_argument("--vocab_size", type=int,
                   help="for a nanoGPT directory: its tokenizer's vocabulary size")
    args = p.parse_args(argv)
    try:
        if len(args.paths) == 1 and os.path.isfile(os.path.join(args.paths[0], "train.bin")):
            # nanoGPT format: keep the .bin files, write meta.json (counts, max id, fingerprint)
            d = args.paths[0]
            if args.out_dir:
                raise ValueError(f"{d} is a nanoGPT directory: "
                                 f"train.py reads it where it is (--data_dir={d}), "
                                 "and this only writes its meta.json there; drop --out_dir")
            meta = nanogpt_meta(d, args.vocab_size)  # train.py checks --block_size against it
            meta_path = os.path.join(d, "meta.json")
            atomic_write(meta_path, lambda f: json.dump(meta, f, indent=1), mode="w")
            print(f"{d} is in nanoGPT format, largest token id {meta['max_token_id']}; "
                  f"train with --data_dir={d}")
        else:
            out_dir = args.out_dir or (INSTALLED_DIR if args.installed else DEFAULT_DIR)
            prepare(args.paths, out_dir, args.val_fraction, args.block_size, args.seed,
                    domains=corpus.parse_domains(args.domain), installed=args.installed)
    except (ValueError, OSError) as e:
        sys.exit(f"error: {e}")


if __name__ == "__main__":
    main()
