"""
Files that readers never see half-written: a temporary file beside the target, renamed over it.

Used for checkpoints (checkpoint.py), the curriculum index and a corpus's hash record
(services/index.py) and the experiments' summary.json files (experiments/runs.py).
"""

import os
import tempfile


def atomic_write(path, write, mode="wb"):
    """write(f) on a fresh temporary file beside path (mkstemp: never shared), renamed over path.
    Readers never see half a file; an existing one survives any failure of write (disk full,
    Ctrl-C)."""
    d, name = os.path.split(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(dir=d, prefix=name + ".", suffix=".tmp")
    try:
        with os.fdopen(fd, mode) as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())  # on disk before the rename makes it visible
        umask = os.umask(0)
        os.umask(umask)
        # subtle: mkstemp makes it private (0600); give it a plain file's mode
        os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)
