"""Train with your functions: every exercise you implemented in exercises/*.py replaces the
reference's, then train.py runs with the flags you give.

    python -m exercises.train --max_iters=50 --cl_metric=vocab_rarity --seqlen=truncate --random_ltd
    python -m exercises.train --compare --max_iters=50 ...   # beside the reference, step by step

A function still raising NotImplementedError (a stub) is skipped: the reference's runs there. Yours
replaces the reference's in its module and everywhere it was imported by name (train.py's
layer_tokens, the analyzer's METRICS table); a method replaces the reference class's. The calls of
yours are counted, and the end of the run says which ran and which these flags never call.

The run goes to out-exercises/, replaced on each run (so the command can be run again, and never
blocks a plain `python train.py`), unless you pass --out_dir. When any of your analyzer functions
runs, the curriculum index is built afresh by them (in one process, so their calls count), in a
temporary folder, unless --index_dir is given (give it under torchrun: each rank would make one).
--compare: exercises/compare.py.
"""

import os
import shutil
import sys
import tempfile

from exercises import EXERCISES
from exercises.swaps import LearnerError, Patch, Watch, learner_swaps, ran, stubs_line

RUN_DIR = "out-exercises"  # the runner's own --out_dir, replaced on each run


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    if "--compare" in argv:
        from exercises import compare

        sys.exit(compare.main([a for a in argv if a != "--compare"]))
    try:
        swaps = learner_swaps()
    except LearnerError as e:
        sys.exit(f"exercises.train: {e}")
    import train  # every concept module, imported as train.py imports them

    watch, patch = Watch(), Patch()
    watch.install(train, swaps, patch)
    print("exercises.train: yours:", ", ".join(f"{n} {name}" for n, name, _, _ in swaps) or "none")
    print("exercises.train: the reference's (still stubs):", stubs_line(swaps))
    if not any(a.startswith("--out_dir") for a in argv):
        if "--resume" not in argv and int(os.environ.get("RANK", 0)) == 0:  # its writer
            shutil.rmtree(RUN_DIR, ignore_errors=True)
        argv.append(f"--out_dir={RUN_DIR}")
        print(f"exercises.train: run directory {RUN_DIR} (replaced on each run)")
    index_dir = None
    analyzer_names = {name for _, concept, name in EXERCISES if concept == "analyzer"}
    yours = {name for _, name, _, _ in swaps}
    if yours & analyzer_names and not any(a.startswith("--index_dir") for a in argv):
        index_dir = tempfile.mkdtemp(prefix="index_mine_")
        argv.append(f"--index_dir={index_dir}")
        print(f"exercises.train: your analyzer builds the curriculum index in {index_dir}")
    try:
        train.main(argv)
    except LearnerError as e:
        sys.exit(f"exercises.train: {e}")
    finally:
        patch.undo()
        if index_dir:
            shutil.rmtree(index_dir, ignore_errors=True)
    print(f"exercises.train: {ran(swaps, watch.calls)}")


if __name__ == "__main__":
    main()
