"""Helpers below the concept files, which import none of them: launching and signals (launch.py),
checkpoints and the run directory's lock (checkpoint.py),
torch.compile with changing shapes (compiling.py), the flags' checks and the command-line machinery
(checks.py, cli.py), atomic writes (files.py), the
demos' text layout (demos.py). What builds on the concept files sits in services/."""
