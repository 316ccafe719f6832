"""What a learner never needs to open: launching and signals (launch.py), checkpoints and the run
directory's lock (checkpoint.py), the DeepSpeed JSON mapping and its checks (ds_config.py), finding
and writing corpora (corpus.py, prepare.py), the curriculum index's cache and worker pool
(index.py), the command-line machinery (cli.py) and atomic file writes (files.py)."""
