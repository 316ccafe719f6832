"""
Pacing functions: the difficulty (or random-LTD kept length) allowed at each optimizer step.

Mirrors DeepSpeed Data Efficiency (arXiv 2212.03597) curriculum_scheduler.py
(deepspeed/runtime/data_pipeline/curriculum_scheduler.py) and the random-LTD kept-length
schedule (arXiv 2211.11586, deepspeed/runtime/data_pipeline/data_routing/scheduler.py),
configured by the same dicts, so a DeepSpeed user can paste a `curriculum_metrics` entry or a
`random_ltd_schedule`. With T = total_curriculum_step and k = root_degree (fixed_linear: k = 1):

    fixed_root:     d = floor(min + (max - min) * (t / T) ** (1 / k))
                    d -= d % difficulty_step
                    d = max(d, ceil(min / difficulty_step) * difficulty_step);  d = min(d, max)
    fixed_discrete: d = difficulty[i] for the first i with t <= max_step[i], else difficulty[-1]
    custom:         d = fn(t)
    random-LTD:     r = floor(min + (max - min) * t / require_steps);  r -= r % seq_per_step;  r = min(r, max)

But:
- pure functions of the step: no state to checkpoint, resume needs only the step;
- the lower clamp keeps d >= min (older DeepSpeed returned values below min_difficulty);
- configs are validated up front with one-line errors instead of failing mid-run.
"""

import math

SCHEDULE_TYPES = ("fixed_linear", "fixed_root", "fixed_discrete", "custom")


def _need(d, keys, where):
    missing = [k for k in keys if k not in d]
    if missing:
        raise ValueError(f"{where} is missing {', '.join(missing)}; "
                         f"add {'it' if len(missing) == 1 else 'them'} to the config")


def _root_schedule(t, lo, hi, total, step, degree):
    """The fixed_root formula, evaluated in DeepSpeed's order so values match it bit for bit.

    lo=1, hi=100, total=100, step=1, degree=2: t=25 -> floor(0.5 * 99 + 1) = 50
    """
    d = math.floor((float(t) / total) ** (1.0 / degree) * (hi - lo) + lo)  # floor(min + (max-min) * (t/T)^(1/k))
    d -= d % step  # round down to a multiple of difficulty_step
    d = max(d, math.ceil(lo / step) * step)  # never below min (rounded up to the step)
    return min(d, hi)


class CurriculumScheduler:
    """difficulty at step t from one DeepSpeed `curriculum_metrics` entry.

    Other keys of the entry (difficulty_type, clustering_type, index paths) are the caller's
    business and are ignored here. For schedule_type "custom", pass fn=callable(step).
    """

    def __init__(self, config, fn=None):
        _need(config, ("min_difficulty", "max_difficulty", "schedule_type"), "curriculum config")
        self.min, self.max, self.type = config["min_difficulty"], config["max_difficulty"], config["schedule_type"]
        self.sc, self.fn = config.get("schedule_config", {}), fn
        if self.type not in SCHEDULE_TYPES:
            raise ValueError(f"curriculum schedule_type {self.type!r} unknown; use one of {', '.join(SCHEDULE_TYPES)}")
        if self.min > self.max:
            raise ValueError(f"min_difficulty {self.min} > max_difficulty {self.max}; swap them")
        if self.type in ("fixed_linear", "fixed_root"):
            keys = (("total_curriculum_step", "difficulty_step")
                    + (("root_degree",) if self.type == "fixed_root" else ()))
            _need(self.sc, keys, f"{self.type} schedule_config")
            for k in keys:
                if self.sc[k] <= 0:
                    raise ValueError(f"{self.type} {k} is {self.sc[k]}; it must be positive")
        elif self.type == "fixed_discrete":
            _need(self.sc, ("difficulty", "max_step"), "fixed_discrete schedule_config")
            diff, steps = self.sc["difficulty"], self.sc["max_step"]
            if len(steps) != len(diff) - 1:
                raise ValueError(f"fixed_discrete needs len(max_step) == len(difficulty) - 1, "
                                 f"got {len(steps)} and {len(diff)}; give one max_step per difficulty but the last")
            if any(a >= b for a, b in zip(steps, steps[1:])):
                raise ValueError(f"fixed_discrete max_step {steps} must be increasing; sort it")
        elif not callable(fn):
            raise ValueError("schedule_type 'custom' needs a callable: "
                             "CurriculumScheduler(config, fn=lambda step: ...)")

    def get_difficulty(self, step):
        if self.type == "custom":
            return self.fn(step)
        if self.type == "fixed_discrete":
            diff, steps = self.sc["difficulty"], self.sc["max_step"]
            for d, last in zip(diff, steps):  # the first stage whose max_step has not passed
                if step <= last:
                    return d
            return diff[-1]
        degree = self.sc["root_degree"] if self.type == "fixed_root" else 1
        return _root_schedule(step, self.min, self.max,
                              self.sc["total_curriculum_step"], self.sc["difficulty_step"], degree)


class RandomLTDScheduler:
    """random-LTD kept length r at step t from a DeepSpeed `random_ltd_schedule` dict (MSLG).

    min 128, max 2048, require_steps 200000, seq_per_step 16: t=100000 -> floor(1088) - 0 = 1088
    """

    def __init__(self, config):
        _need(config, ("min_value", "max_value", "schedule_config"), "random_ltd_schedule")
        self.min, self.max, self.sc = config["min_value"], config["max_value"], config["schedule_config"]
        self.type = config.get("schedule_type", "fixed_linear")
        if self.type not in ("fixed_linear", "fixed_root"):
            raise ValueError(f"random_ltd schedule_type {self.type!r} unknown; use fixed_linear or fixed_root")
        if self.min > self.max or self.min <= 0:
            raise ValueError(f"random_ltd min_value {self.min} must be in 1..max_value {self.max}; fix min_value")
        keys = ("require_steps", "seq_per_step") + (("root_degree",) if self.type == "fixed_root" else ())
        _need(self.sc, keys, "random_ltd schedule_config")
        for k in keys:
            if self.sc[k] <= 0:
                raise ValueError(f"random_ltd {k} is {self.sc[k]}; it must be positive")
        if self.min < self.sc["seq_per_step"]:  # subtle: r -= r % seq_per_step would make the first kept length 0
            raise ValueError(f"random_ltd min_value {self.min} < seq_per_step {self.sc['seq_per_step']} "
                             f"gives a kept length of 0; raise min_value to a multiple of seq_per_step")

    def get_value(self, step):
        degree = self.sc["root_degree"] if self.type == "fixed_root" else 1
        r = math.floor((float(step) / self.sc["require_steps"]) ** (1.0 / degree) * (self.max - self.min) + self.min)
        r -= r % self.sc["seq_per_step"]  # grow in multiples of seq_per_step
        return min(r, self.max)
