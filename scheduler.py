"""
Pacing functions: the difficulty (or random-LTD kept length) allowed at each optimizer step.

Mirrors DeepSpeed Data Efficiency (arXiv 2212.03597) curriculum_scheduler.py
(deepspeed/runtime/data_pipeline/curriculum_scheduler.py) and the random-LTD kept-length
schedule (arXiv 2211.11586, deepspeed/runtime/data_pipeline/data_routing/scheduler.py),
configured by the same dicts, so a DeepSpeed user can paste a `curriculum_metrics` entry or a
`random_ltd_schedule`. With T = total_curriculum_step and k = root_degree (fixed_linear: k = 1):

    fixed_root:     d = floor(min + (max - min) * (t / T) ** (1 / k))
                    d -= d % difficulty_step
                    d = max(d, ceil(min / difficulty_step) * difficulty_step)
                    d = min(d, max)
    fixed_discrete: d = difficulty[i] for the first i with t <= max_step[i], else difficulty[-1]
    custom:         a shape of PACING named by schedule_config["pacing"] (--cl_schedule=custom
                    --cl_pacing=NAME): d = floor(min + (max - min) * shape(min(t / T, 1))),
                    then rounded and clamped as fixed_root; or d = fn(t), any callable passed in
    all:            once d reaches max it stays
                    (DeepSpeed's update_difficulty, what its sampler asks)
    random-LTD:     r = floor(min + (max - min) * (t / require_steps) ** (1 / k))
                    r -= r % seq_per_step
                    r = min(r, max)

But:
- functions of the step: nothing to checkpoint, resume needs only the step (the step where a
  falling schedule reached max is found again, and remembered);
- the lower clamp keeps d >= min (older DeepSpeed returned values below min_difficulty);
- the dicts are checked once, where they enter (services/ds_config.py): here are only the
  formulas.
"""

import math


def root_schedule(t, lo, hi, total, step, degree):
    """The fixed_root formula, evaluated in DeepSpeed's order so values match it bit for bit.

    lo=1, hi=100, total=100, step=1, degree=2: t=25 -> floor(0.5 * 99 + 1) = 50
    """
    # floor(min + (max - min) * (t / T) ** (1 / k))
    d = math.floor((float(t) / total) ** (1.0 / degree) * (hi - lo) + lo)
    return quantize(d, lo, hi, step)


def quantize(d, lo, hi, step):
    """d rounded down to a multiple of difficulty_step, then clamped: never below min (rounded up
    to the step), never above max. d=57, lo=1, hi=100, step=10 -> 50; d=3 -> 10; d=104 -> 100"""
    d -= d % step  # round down to a multiple of difficulty_step
    d = max(d, math.ceil(lo / step) * step)  # never below min (rounded up to the step)
    return min(d, hi)


def smoothstep(x):
    """Slow, then fast, then slow again: 3x^2 - 2x^3 of x = t / T in [0, 1].

    x=0.25 -> 0.15625, so 1..101 over 100 steps gives t=25 -> floor(1 + 100 * 0.15625) = 16.
    """
    return 3 * x**2 - 2 * x**3


# custom pacings by name (schedule_type "custom", schedule_config "pacing"): each is only its
# shape, fn(x) -> how far from min to max (0..1) at x = t / total_curriculum_step (0..1); the
# scheduler scales, floors, rounds to difficulty_step and clamps it, as fixed_root. Add yours.
# subtle: hold-at-max applies to them too: a falling or cyclic fn stays at max_difficulty from the
# first step it reaches it; a cycle meant to repeat must peak below max_difficulty.
PACING = {"smoothstep": smoothstep}

# the schedule_config keys each schedule_type reads (custom: a PACING name, unless fn is given)
NEEDS = {"fixed_linear": ("total_curriculum_step", "difficulty_step"),
         "fixed_discrete": ("difficulty", "max_step"),
         "fixed_root": ("total_curriculum_step", "difficulty_step", "root_degree"),
         "custom": ("pacing", "total_curriculum_step", "difficulty_step")}  # a PACING name


class CurriculumScheduler:
    """Difficulty at step t from one DeepSpeed `curriculum_metrics` entry.

    Other keys of the entry (difficulty_type, index paths) are the sampler's business. For
    schedule_type "custom", name a PACING function in schedule_config["pacing"] (checkpointed by
    name), or pass fn=callable(step) (or put it in the entry as "get_difficulty").
    """

    def __init__(self, config, fn=None):
        self.config = config
        self.schedule_config = config.get("schedule_config", {})
        self.fn = fn or config.get("get_difficulty")
        # steps searched for the max (a cache: see below)
        self._searched = 0
        self._held = None
        kind = config.get("schedule_type")
        missing = [k for k in NEEDS.get(kind, ()) if k not in self.schedule_config]
        if missing and not self.fn:  # subtle: lifted alone, a bare KeyError would come later
            raise ValueError(f"{kind} schedule_config is missing {', '.join(missing)}; add "
                             f"{'it' if len(missing) == 1 else 'them'} (as DeepSpeed's entry has)")
        named = self.schedule_config.get("pacing") in PACING
        assert config["schedule_type"] != "custom" or callable(self.fn) or named, (
            "a custom schedule needs a PACING name or fn=callable(step)"
        )

    def get_difficulty(self, step):
        """d at step t >= 1, the step DeepSpeed's sampler asks for; once d reaches max_difficulty it
        stays there (DeepSpeed's update_difficulty), even where the schedule itself falls again.

        fixed_discrete difficulty [10, 100, 50], max_step [2, 4], max 100: t = 1..6 -> 10, 10, 100,
        100, 100, 100 (the schedule alone: ..., 50, 50).
        """
        lo = self.config.get("min_difficulty")
        hi = self.config.get("max_difficulty")
        falls = self.config["schedule_type"] in ("fixed_discrete", "custom")  # the others never do
        if falls and hi is not None:  # subtle: a custom schedule from Python may have no max
            if lo is not None and lo >= hi:
                return lo  # subtle: DeepSpeed starts at min and never updates a value at max
            held = self._first_step_at_max(step, hi)
            if held is not None:
                step = held
        return self._schedule(step)

    def _schedule(self, step):
        """The pacing function itself (DeepSpeed's get_difficulty)."""
        kind = self.config["schedule_type"]
        if kind == "custom" and self.fn:
            return self.fn(step)
        if kind == "custom":  # a named shape of PACING, scaled and rounded as fixed_root
            sc = self.schedule_config
            lo, hi = self.config["min_difficulty"], self.config["max_difficulty"]
            shape = PACING[sc["pacing"]](min(step / sc["total_curriculum_step"], 1.0))
            return quantize(math.floor(shape * (hi - lo) + lo), lo, hi, sc["difficulty_step"])
        if kind == "fixed_discrete":
            stages = self.schedule_config
            for d, last in zip(stages["difficulty"], stages["max_step"]):  # the first not yet over
                if step <= last:
                    return d
            return stages["difficulty"][-1]
        root = self.schedule_config
        degree = root["root_degree"] if kind == "fixed_root" else 1
        return root_schedule(step, self.config["min_difficulty"], self.config["max_difficulty"],
                             root["total_curriculum_step"], root["difficulty_step"], degree)

    def _first_step_at_max(self, step, hi):
        """The first step in 1..step whose difficulty reaches max_difficulty hi, or None.

        subtle: DeepSpeed keeps its current difficulty as state and updates it at steps 1, 2, ...
        only while it is below max; this finds the step it stopped at. The search is remembered,
        so asking for t = 1, 2, 3, ... costs one evaluation of the schedule each.
        """
        while self._searched < step and self._held is None:
            self._searched += 1
            if self._schedule(self._searched) >= hi:
                self._held = self._searched
        if self._held is not None and self._held <= step:
            return self._held
        return None


class RandomLTDScheduler:
    """random-LTD kept length r at step t from a DeepSpeed `random_ltd_schedule` dict (MSLG).

    min 128, max 2048, require_steps 200000, seq_per_step 16: t=100000 -> floor(1088) - 0 = 1088
    """

    def __init__(self, config, layers=None):
        self.config = config
        self.layers = layers  # DeepSpeed's random_ltd_layer_id; None or []: model.py's default
        self.schedule_config = config["schedule_config"]
        self.min = config["min_value"]
        self.max = config["max_value"]
        self.degree = 1  # fixed_linear
        if config.get("schedule_type") == "fixed_root":
            self.degree = self.schedule_config["root_degree"]

    def get_value(self, step):
        # floor(min + (max - min) * (t / require_steps) ** (1 / k))
        r = math.floor((float(step) / self.schedule_config["require_steps"]) ** (1.0 / self.degree)
                       * (self.max - self.min) + self.min)
        r -= r % self.schedule_config["seq_per_step"]  # grow in multiples of seq_per_step
        return min(r, self.max)


# -----------------------------------------------------------------------------
# demo: python scheduler.py prints d(t) and r(t) over the steps of train.py's default run


def demo(max_iters=1500, steps=(1, 25, 50, 100, 150, 200, 300, 400, 500, 600, 750, 900, 1500)):
    """d(t) of each schedule type, the sequence-length curriculum's and random-LTD's r(t) as
    train.py's flags set them for a run of max_iters steps (ds_config.from_flags: difficulty
    1..100 over 40% of it, root degree 2; --seqlen: 16..128 tokens over 40%, in steps of 8; kept
    length 32..128 over 60%); the fixed_discrete stages are an example."""
    T = int(0.4 * max_iters)  # total_curriculum_step
    root = {"total_curriculum_step": T, "difficulty_step": 1, "root_degree": 2}
    discrete = {"difficulty": [10, 50, 100], "max_step": [T // 3, 2 * T // 3]}
    kinds = {"fixed_linear": root, "fixed_root": root, "fixed_discrete": discrete}
    curricula = {kind: CurriculumScheduler({"difficulty_type": "percentile", "min_difficulty": 1,
                                            "max_difficulty": 100, "schedule_type": kind,
                                            "schedule_config": sc}) for kind, sc in kinds.items()}
    curricula["seqlen(t)"] = CurriculumScheduler({  # --seqlen=truncate or reshape: a length
        "difficulty_type": "value", "min_difficulty": 16, "max_difficulty": 128,
        "schedule_type": "fixed_linear", "schedule_config": {**root, "difficulty_step": 8}})
    ltd = RandomLTDScheduler({"min_value": 32, "max_value": 128, "schedule_type": "fixed_linear",
                              "schedule_config": {"require_steps": int(0.6 * max_iters),
                                                  "seq_per_step": 8}})
    rows = [[t, *(c.get_difficulty(t) for c in curricula.values()), ltd.get_value(t)]
            for t in steps]
    print(f"d(t): percentile of max_difficulty 100 (d admits the easiest d% of the windows), "
          f"1..100 over total_curriculum_step {T}\n      (fixed_root: root_degree 2; "
          f"fixed_discrete: {discrete['difficulty']} until steps {discrete['max_step']})\n"
          f"seqlen(t): the sequence-length curriculum in tokens (--seqlen), fixed_linear 16..128 "
          f"in steps of 8 over {T}\nr(t): random-LTD kept length in tokens, 32..128 of T = 128 "
          f"over require_steps {int(0.6 * max_iters)}, seq_per_step 8")
    cells = [["step t", *curricula, "r(t)"]] + [[f"{v:,}" for v in row] for row in rows]
    widths = [max(len(row[j]) for row in cells) for j in range(len(cells[0]))]
    for row in cells:  # right-aligned columns
        print("  ".join(c.rjust(w) for c, w in zip(row, widths)))
    print("the batch of step t uses d(t+1) (DeepSpeed's sampler); random-LTD uses r(t)")
    print("rebuild fixed_root yourself: exercise 4 in exercises/scheduler.py, then\n"
          "    python -m pytest tests/test_exercises.py --mine -k ex04")


if __name__ == "__main__":
    demo()
