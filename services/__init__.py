"""Services built on the concept files, above them and below train.py: the curriculum index on disk
(index.py, on analyzer.py), a nanoGPT directory's scan recorded once (bins.py, on data.py), the
DeepSpeed JSON mapping and its checks (ds_config.py, on sampler.py and scheduler.py), what train.py
prints besides its log lines (report.py, on data.py). A concept file never imports from here;
helpers it may import sit in support/."""
