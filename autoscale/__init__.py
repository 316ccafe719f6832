"""AutoScale (Kang et al., arXiv 2407.20177), a second paper beside the two this project follows:
the maths of data mixtures (mixture.py), exact per-domain counts in every batch (domains.py), and
the procedure end to end with train.py (python -m autoscale.reproduce)."""
