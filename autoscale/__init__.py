"""AutoScale (Kang et al., arXiv 2407.20177), a second paper beside the two this project follows:
the maths of data mixtures (mixture.py) and exact per-domain counts in every batch (domains.py,
which train.py uses). Its experiment end to end, which runs train.py, sits with the other
experiments: python -m experiments.autoscale."""
