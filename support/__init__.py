"""What a learner never needs to open: launching and signals (launch.py), checkpoints and the run
directory's lock (checkpoint.py), the DeepSpeed JSON mapping and its checks (ds_config.py), finding,
writing and reading back corpora (corpus.py, prepare.py, bins.py), the curriculum index's cache and
worker pool (index.py), torch.compile with changing shapes (compiling.py), what train.py prints
besides its log lines (report.py), the command-line machinery (cli.py), atomic writes (files.py),
progress lines without a terminal (progress.py), the layout of the concept files' demos (demos.py)."""
