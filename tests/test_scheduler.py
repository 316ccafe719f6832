"""scheduler.py: DeepSpeed-verified fixtures, hand-derived worked examples, bad configs.

The per-step layer_tokens summed equal DeepSpeed's LayerToken count (the fixture's layer_tokens
cases): tests/test_exercises.py, exercise 13, on this reference."""

import json
import os

import pytest

from services import ds_config
import scheduler
from scheduler import CurriculumScheduler, RandomLTDScheduler

FIXTURES = os.path.join(os.path.dirname(__file__), "fixtures", "deepspeed_schedules.json")


def cl(lo, hi, kind, **sc):
    return dict(min_difficulty=lo, max_difficulty=hi, schedule_type=kind, schedule_config=sc)


def ltd(lo, hi, **sc):
    return {"min_value": lo, "max_value": hi, "schedule_config": sc}


@pytest.mark.parametrize("config, steps, values", [
    # min 80, max 2048, T 110000, step 8 (the paper's seqlen_truncate):
    # t=0: floor(80) = 80; t=55000: floor(0.5 * 1968 + 80) = 1064 -> 1064 - 1064 % 8 = 1064;
    # t=1000: floor(1000/110000 * 1968 + 80) = floor(97.89) = 97 -> 97 - 1 = 96; t >= 110000: 2048.
    (cl(80, 2048, "fixed_linear", total_curriculum_step=110000, difficulty_step=8),
     (0, 1000, 55000, 110000, 200000), [80, 96, 1064, 2048, 2048]),
    # min 1, max 100, T 110000, root 2, step 1 (the paper's vocabulary-rarity percentile):
    # t=27500: floor(sqrt(0.25) * 99 + 1) = floor(50.5) = 50; t=1100: floor(0.1 * 99 + 1) =
    # floor(10.9) = 10.
    (cl(1, 100, "fixed_root", total_curriculum_step=110000, difficulty_step=1, root_degree=2),
     (0, 1100, 27500, 110000, 10**6), [1, 10, 50, 100, 100]),
    # never below min: min 5, step 4: t=0 gives floor(5) = 5 -> 5 - 5 % 4 = 4 < min, clamped up to
    # ceil(5/4)*4 = 8
    (cl(5, 21, "fixed_linear", total_curriculum_step=16, difficulty_step=4),
     (0, 4, 8, 12, 16), [8, 8, 12, 16, 20]),
    # difficulty [8, 16, 32], max_step [10, 20]: t <= 10 -> 8, 10 < t <= 20 -> 16, later 32
    (cl(8, 32, "fixed_discrete", difficulty=[8, 16, 32], max_step=[10, 20]),
     (0, 10, 11, 20, 21, 10**6), [8, 8, 16, 16, 32, 32]),
    # schedule_type custom with schedule_config pacing: a PACING function by name (a JSON config can
    # name it; a callable cannot come from one). smoothstep, 1..101 over 100 steps: t=25 -> 16,
    # t=50 -> 51
    (cl(1, 101, "custom", pacing="smoothstep", total_curriculum_step=100, difficulty_step=1),
     (0, 25, 50, 100, 200), [1, 16, 51, 101, 101]),
    # the search for the step at max starts at t = 1: [100, 50] with max_step [1], max 100 is at max
    # on step 1, so every later step holds 100 (the schedule alone falls to 50 from t = 2)
    (cl(10, 100, "fixed_discrete", difficulty=[100, 50], max_step=[1]), (1, 2, 3), [100, 100, 100]),
])
def test_curriculum_worked_examples(config, steps, values):
    """Each value by hand (in the comment above its case), asked forward and, from a fresh
    scheduler, backward: the same values (no hidden state); a config a test accepts is one train.py
    accepts where it enters."""
    assert [CurriculumScheduler(config).get_difficulty(t) for t in steps] == values
    fresh = CurriculumScheduler(config)
    assert [fresh.get_difficulty(t) for t in reversed(steps)] == values[::-1]
    check_entry(config)


def test_random_ltd_mslg_worked_example():
    """min 128, max 2048, require 200000, seq_per_step 16 (the paper's GPT recipe):
    t=100000: floor(0.5 * 1920 + 128) = 1088 (a multiple of 16); t=1000: floor(137.6) = 137 -> 128.
    (Beyond require_steps: the frozen case of the same recipe, 250000 -> 2048.)
    min 12, seq_per_step 8: floor(12) = 12 -> 8 at t = 0, accepted where a config enters.
    """
    s = RandomLTDScheduler(ltd(128, 2048, require_steps=200000, seq_per_step=16))
    assert [s.get_value(t) for t in (0, 1000, 100000, 200000)] == [128, 128, 1088, 2048]
    check_ltd(ltd(12, 32, require_steps=5, seq_per_step=8))
    assert RandomLTDScheduler(ltd(12, 32, require_steps=5, seq_per_step=8)).get_value(0) == 8


def test_equals_deepspeed_values():
    """Values frozen from DeepSpeed 0.19.8 itself (see
    tests/fixtures/make_deepspeed_schedules.py)."""
    fixtures = json.load(open(FIXTURES))
    assert len(fixtures["curriculum"]) >= 3 and len(fixtures["random_ltd"]) >= 1
    for case in fixtures["curriculum"]:
        s = CurriculumScheduler(case["config"])
        assert [s.get_difficulty(t) for t in case["steps"]] == case["values"], case["name"]
    for case in fixtures["random_ltd"]:
        s = RandomLTDScheduler(case["config"])
        assert [s.get_value(t) for t in case["steps"]] == case["values"], case["name"]


def test_difficulty_holds_at_max_as_deepspeeds_update_difficulty():
    """DeepSpeed's sampler asks update_difficulty(t) at t = 1, 2, ...: once the difficulty reaches
    max_difficulty it stays, even where the schedule falls again (frozen from DeepSpeed 0.19.8).
    [10, 100, 50] with max_step [2, 4], max 100: 10, 10, 100, 100, 100, ... (not 50 from t = 5)."""
    cases = json.load(open(FIXTURES))["update_difficulty"]
    assert len(cases) >= 4
    for case in cases:
        fn = (lambda t, table=case["table"]: table[t]) if case["table"] else None
        s = CurriculumScheduler(case["config"], fn=fn)
        want = case["values"]
        steps = range(1, len(want) + 1)
        assert [s.get_difficulty(t) for t in steps] == want, case["name"]
        fresh = CurriculumScheduler(case["config"], fn=fn)  # asked out of order: the same values
        assert [fresh.get_difficulty(t) for t in reversed(steps)] == want[::-1], case["name"]


def check_entry(entry):
    """What train.py does to a curriculum_metrics entry before scheduler.py reads it (config.py,
    the boundary)."""
    ds_config.check_schema({"m": entry}, {"*": ds_config.ENTRY})
    ds_config.check_curriculum("m", {"difficulty_type": "value", **entry}, 10**6, known=["m"])


def check_ltd(schedule, block_size=32):
    ds_config.check_schema({"random_ltd_schedule": schedule}, ds_config.LTD)
    ds_config.check_random_ltd({"random_ltd_schedule": schedule}, 4, block_size)


# (min_value above max_value, and a custom pacing unknown: test_train.py's bad inputs)
@pytest.mark.parametrize("config_, want", [
    (ltd(8, 32, require_steps=5), "missing seq_per_step"),
    (ltd(4, 32, require_steps=5, seq_per_step=8),
     "min_value 4 < seq_per_step 8 gives a kept length of 0"),
    (ltd(8, 64, require_steps=5, seq_per_step=8),
     "max_value 64 must lie in 1..block_size 32; set --block_size=64"),
    (cl(1, 10, "cosine", total_curriculum_step=5, difficulty_step=1),
     "schedule_type 'cosine' unknown"),
    (cl(10, 1, "fixed_linear", total_curriculum_step=5, difficulty_step=1),
     "min_difficulty 10 > max_difficulty 1"),
    (cl(1, 10, "fixed_discrete", difficulty=[1, 5, 10], max_step=[3]),
     "len(max_step) == len(difficulty) - 1"),
    (cl(1, 10, "fixed_discrete", difficulty=[1, 5, 10], max_step=[5, 3]), "must be increasing"),
    (cl(1, 10, "fixed_root", total_curriculum_step=5, difficulty_step=1), "missing root_degree"),
    (cl(1, 10, "fixed_linear", total_curriculum_step=0, difficulty_step=1),
     "total_curriculum_step in schedule_config is 0; it must be"),
    (cl(1, 10, "custom"),
     "custom schedule_config is missing pacing, total_curriculum_step, difficulty_step"),
])
def test_bad_schedule_config_is_one_line_at_the_boundary(config_, want):
    with pytest.raises(ValueError) as e:
        (check_ltd if "min_value" in config_ else check_entry)(config_)
    assert want in str(e.value) and "\n" not in str(e.value)


def test_a_cyclic_custom_pacing_holds_at_max_from_its_first_peak(monkeypatch):
    """Where a falling or cyclic function meets hold-at-max: max from its first peak on."""
    # t % 3 / 2 over 100 steps
    monkeypatch.setitem(scheduler.PACING, "saw", lambda x: round(100 * x) % 3 / 2)
    entry = cl(0, 10, "custom", pacing="saw", total_curriculum_step=100, difficulty_step=1)
    s = CurriculumScheduler(entry)
    # alone: 5, 10, 0, 5, 10, 0
    assert [s.get_difficulty(t) for t in range(1, 7)] == [5, 10, 10, 10, 10, 10]
