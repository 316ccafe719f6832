"""Exercise 4: the fixed_root / fixed_linear pacing function (the solution: scheduler.py).

Replace the `raise NotImplementedError` with your code, then run
    python -m pytest tests/test_exercises.py --mine -k root_schedule
The how is in exercises/README.md's folded hints; the tests show DeepSpeed's value where yours
differs.
"""

import math  # noqa: F401  (for your code)


def root_schedule(t, lo, hi, total, step, degree):
    """The fixed_root formula, evaluated in DeepSpeed's order so values match it bit for bit.

    lo=1, hi=100, total=100, step=1, degree=2: t=25 -> floor(0.5 * 99 + 1) = 50
    """
    raise NotImplementedError("exercise 4 root_schedule")
