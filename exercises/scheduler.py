"""Exercise 4: the fixed_root / fixed_linear pacing function (the solution: scheduler.py).

With T = total, k = degree (fixed_linear: k = 1), in DeepSpeed's order:

    d = floor(min + (max - min) * (t / T) ** (1 / k))
    d -= d % difficulty_step
    d = max(d, ceil(min / difficulty_step) * difficulty_step)
    d = min(d, max)

Replace the `raise NotImplementedError` with your code, then run
    python -m pytest tests/test_exercises.py --mine -k root_schedule
"""

import math  # noqa: F401  (for your code)


def root_schedule(t, lo, hi, total, step, degree):
    """The fixed_root formula, evaluated in DeepSpeed's order so values match it bit for bit.

    lo=1, hi=100, total=100, step=1, degree=2: t=25 -> floor(0.5 * 99 + 1) = 50
    """
    raise NotImplementedError("exercise 4 root_schedule")
