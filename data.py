"""
Text -> token stream (train.bin, val.bin, meta.json) -> fixed-length sample windows.

Follows nanoGPT's data/*/prepare.py (flat uint16 token files read through np.memmap) and gives
DeepSpeed Data Efficiency (arXiv 2212.03597) a fixed set of samples with stable ids for its
analyzer and sampler: sample i is

    sample_i = tokens[i*T : i*T + T + 1],  x = sample_i[:-1], y = sample_i[1:]

so windows share one boundary token and N = (n_tokens - 1) // T.

    python data.py  # the default corpus (support/prepare.py writes it)
    python data.py MY_TEXT --out_dir=data/mytext  # your own text, then --data_dir=data/mytext

But:
- the tokenizer is plain bytes (ids 0..255) plus one end-of-document id, so any text works with
  no download; nanoGPT-format train.bin / val.bin (e.g. GPT-2 BPE) are read as they are;
- what train.py reads is checked first (load_meta, in support/bins.py), in one line naming the fix.
"""

import os

import numpy as np

from support.bins import load_meta, n_tokens
from support import prepare
from support.prepare import corpus_dir  # noqa: F401  (temporary, until the corpus merge)
from support.prepare import EOT  # ids 0..255 are bytes; EOT = 256 sits between documents

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
# reading a prepared corpus back: checks and sample windows


class SampleWindows:
    """Sample i of a token file = tokens[i*T : i*T + T + 1]; N = (n_tokens - 1) // T.
    tokens = [0..9], T = 3 -> N = 3 samples: [0,1,2,3], [3,4,5,6], [6,7,8,9]"""

    def __init__(self, path, block_size):
        n = n_tokens(path)  # one line for a missing, empty or odd-length file
        self.path = path
        self.block_size = block_size
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


def load_splits(data_dir, block_size, vocab_size=None):
    """-> (train windows, val windows, meta) of a prepared data_dir, checked (see load_meta)."""
    meta = load_meta(data_dir, vocab_size)  # checks the largest token id against the vocabulary
    train = SampleWindows(os.path.join(data_dir, "train.bin"), block_size)
    val = SampleWindows(os.path.join(data_dir, "val.bin"), block_size)
    return train, val, meta


if __name__ == "__main__":  # preparing a corpus is support code: a learner reads the windows above
    prepare.main()
