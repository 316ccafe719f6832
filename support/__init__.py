"""Helpers below the concept files, which import none of them: launching and signals (launch.py),
checkpoints and the run directory's lock (checkpoint.py), atomic writes (files.py). What builds on
the concept files sits in services/ (the index build's worker pool and progress lines among it)."""
