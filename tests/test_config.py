"""train.py's settings (TrainConfig, parse_args) and services/ds_config.py: the command line,
value checks, schedule defaults from the budget, the DeepSpeed config mapping."""

import json
import os
import re
from dataclasses import fields

import pytest

import scheduler
import train
from services import ds_config
from support import launch
from services.ds_config import data_efficiency
from train import parse_args

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def ds_example():
    return json.load(open(os.path.join(ROOT, "examples", "ds_config_cl_ltd.json")))


def test_every_option_has_help(capsys):
    assert all(f.metadata["help"] for f in fields(train.TrainConfig))
    with pytest.raises(SystemExit) as e:
        train.parse_args(["--help"])
    out = capsys.readouterr().out
    assert e.value.code == 0 and "--n_layer" in out and "transformer blocks" in out
    assert "ds_config_cl_ltd.json" in out  # the usage lines


def test_every_option_parses_as_the_type_it_declares():
    """--cl_min=0.5 was refused ("invalid int value") because the parser took the type from the
    default's value (1), not the field's annotation (float)."""
    sample = {int: ("7", 7), float: ("0.5", 0.5), bool: ("false", False)}
    for f in fields(train.TrainConfig):
        if f.type is str:
            text = want = (f.metadata["choices"] or ("x",))[-1]
        else:
            text, want = sample[f.type]
        cfg = launch.parse(train.TrainConfig, [f"--{f.name}={text}"], "train.py")
        got = getattr(cfg, f.name)
        assert got == want and type(got) is f.type, f.name
    cfg = parse_args(["--cl_metric=vocab_rarity", "--cl_min=0.5", "--cl_difficulty_type=value"])
    assert data_efficiency(cfg, 16, [])[0]["vocab_rarity"]["min_difficulty"] == 0.5


@pytest.mark.parametrize("args, want", [
    (["--batch_size=0"], "--batch_size=0 must be at least 1"),
    (["--batch_size=-2"], "--batch_size=-2 must be at least 1"),
    (["--global_batch_size=-8"], "--global_batch_size=-8 must not be negative"),
    (["--eval_interval=0"], "--eval_interval=0 must be at least 1"),
    (["--log_interval=0"], "--log_interval=0 must be at least 1"),
    (["--eval_samples=0"], "--eval_samples=0 must be at least 1"),
    (["--n_head=3"], "--n_head=3 does not divide --n_embd=128"),
    (["--dtype=fp8"], "--dtype: invalid choice: 'fp8'"),
    (["--device=tpu"], "--device=tpu unknown; use auto, cpu, cuda or cuda:N"),
    (["--ltd_layers=a,b"], "--ltd_layers=a,b must be comma-separated integers"),
    (["--max_iters=0", "--max_tokens=0"], "would train without end"),
    (["--seqlen=shrink"], "--seqlen: invalid choice: 'shrink'"),
    (["--learning_rate=0"], "--learning_rate=0.0 must be positive"),
    (["--dropout=1"], "--dropout=1.0 must be below 1"),
    (["--cl_metric=vocab_rarity", "--cl_schedule=fixed_discrete"],
     "needs --cl_discrete_difficulty"),
    (["--cl_metric=vocab_rarity", "--cl_schedule=custom"],
     f"--cl_schedule=custom needs --cl_pacing=NAME, one of {', '.join(scheduler.PACING)}"),
    (["--nope=1"], "unknown option: --nope=1; see train.py --help"),
    (["--batch_size=abc"], "--batch_size: invalid int value: 'abc'"),
    # where the random-LTD layers and the config are read (ds_config.data_efficiency)
    (["--random_ltd", "--n_layer=2"], "--n_layer=3 or more"),
    # layer 5 of 4 layers: the fix was "3 or more"
    (["--random_ltd", "--ltd_layers=5"],
     "(got [5]); use --n_layer=6 or more, or list them with --ltd_layers"),
    (["--random_ltd", "--ltd_layers=-1"], "(got [-1]); list them with --ltd_layers"),
    (["--random_ltd", "--ltd_layers=1,7"], "inside 0..3 (got [7])"),
    (["--config=TMP/bad.json"], "is not a readable JSON file (Expecting property name"),
    (["--config=TMP/list.json"], "must hold a JSON object"),
    # where it is opened, before any work
    (["--config=TMP"],
     "is not a readable JSON file ([Errno 21] Is a directory: 'TMP'); pass a DeepSpeed JSON"),
])
def test_bad_values_are_one_line_errors(tmp_path, args, want):
    (tmp_path / "bad.json").write_text("{not json")
    (tmp_path / "list.json").write_text("[1, 2]")
    with pytest.raises(ValueError, match=re.escape(want.replace("TMP", str(tmp_path)))) as e:
        data_efficiency(parse_args([a.replace("TMP", str(tmp_path)) for a in args]), 16, [])
    assert "\n" not in str(e.value)


def test_schedule_lengths_follow_the_budget_in_its_unit():
    """40% / 60% of the run's dense steps, whether --max_iters or --max_tokens ends the run
    (G=16, T=128)."""
    flags = ["--cl_metric=vocab_rarity", "--seqlen=truncate", "--random_ltd"]
    tokens = f"--max_tokens={500 * 16 * 128}"  # 500 steps; with --max_iters, whichever ends first
    for budget, cl, ltd in ((["--max_iters=1000"], 400, 600), (["--max_iters=0", tokens], 200, 300),
                            (["--max_iters=100", tokens], 40, 60),
                            (["--max_iters=900", tokens], 200, 300)):
        m, got = data_efficiency(parse_args(flags + budget), 16, [])
        assert m["vocab_rarity"]["schedule_config"]["total_curriculum_step"] == cl
        assert m["seqlen_truncate"]["schedule_config"]["total_curriculum_step"] == cl
        assert got.config["schedule_config"]["require_steps"] == ltd


# --cl_schedule=fixed_discrete and custom from flags: tests/test_demos.py (the scheduler demo's
# fixed_discrete column) and tests/test_train.py (a custom pacing's d(t) on resume)


def test_a_custom_schedule_in_json_names_a_pacing_function(tmp_path):
    """A JSON schedule_type custom was "unknown"."""
    ds = ds_example()
    metrics = ds["data_efficiency"]["data_sampling"]["curriculum_learning"]["curriculum_metrics"]
    name = next(n for n in metrics if not n.startswith("seqlen"))
    metrics[name].update(schedule_type="custom",
                         schedule_config={"pacing": "smoothstep", "total_curriculum_step": 9,
                                          "difficulty_step": 1})
    got = data_efficiency(parse_args([f"--config={write(tmp_path, ds)}"]), 16, [])[0]
    assert got["vocab_rarity"]["schedule_config"]["pacing"] == "smoothstep"


def test_ltd_layers_checked_once_and_the_default_left_to_the_model():
    assert data_efficiency(parse_args(["--random_ltd", "--n_layer=6"]), 16, [])[1].layers == []
    cfg = parse_args(["--random_ltd", "--n_layer=6", "--ltd_layers=4,2"])
    assert data_efficiency(cfg, 16, [])[1].layers == [2, 4]  # sorted, once


def write(tmp_path, ds):
    path = tmp_path / "ds.json"
    path.write_text(json.dumps(ds))
    return str(path)


def test_deepspeed_example_maps_to_our_settings(tmp_path):
    cfg = parse_args([f"--config={write(tmp_path, ds_example())}"])
    metrics, ltd = data_efficiency(cfg, 16, notes := [])
    assert set(metrics) == {"vocab_rarity", "seqlen_truncate"}
    assert notes == ["from --config: global_batch_size 16, batch_size 16",
                     "not applied here (they change training in DeepSpeed): data_efficiency.seed "
                     "(--seed seeds the sampler)",
                     "DeepSpeed index/cluster paths in --config are ignored; "
                     "this run uses analyzer.py's index"]
    assert metrics["vocab_rarity"]["schedule_config"]["total_curriculum_step"] == 600
    assert ltd.layers == [1, 2] and ltd.config["min_value"] == 32


MEGATRON = os.path.join(ROOT, "tests", "fixtures", "ds_config_megatron_gpt_1.3B_cl_ltd.json")


def test_megatron_deepspeeds_gpt_config_as_its_script_writes_it_is_read_unchanged():
    """examples_deepspeed/data_efficiency/gpt/pretrain/ds_pretrain_gpt_1.3B_dense_base_script.sh
    (CL voc + seqlen_truncate, random-LTD 128 -> 2048, 64 GPUs) fills its 2-metric template into
    this file: metric voc, fixed_root for the length, fp16 with its loss-scale keys, ZeRO,
    logging."""
    cfg = parse_args([f"--config={MEGATRON}", "--n_layer=24", "--block_size=2048"])
    metrics, ltd = data_efficiency(cfg, 512, notes := [])
    assert (cfg.dtype, cfg.global_batch_size, cfg.batch_size, cfg.grad_clip) == (
        "float16", 512, 8, 1.0)
    assert set(metrics) == {"vocab_rarity", "seqlen_truncate"}
    assert metrics["seqlen_truncate"]["schedule_config"] == {"total_curriculum_step": 110000,
                                                             "difficulty_step": 8, "root_degree": 1}
    assert ltd.layers == list(range(1, 23))
    assert notes[-2] == ("not applied here (they change training in DeepSpeed): "
                         "fp16.loss_scale_window; fp16.hysteresis; fp16.min_loss_scale; "
                         "fp16.initial_scale_power; data_efficiency.seed (--seed seeds the "
                         "sampler)")
    assert notes[-1].startswith("DeepSpeed index/cluster paths in --config are ignored")


def test_published_gpt3_recipe_config_maps_to_our_settings():
    """The GPT-3 1.3B recipe's data_efficiency section (as DeepSpeed's examples publish it) is
    read unchanged."""
    path = os.path.join(ROOT, "tests", "fixtures", "ds_config_gpt3_1.3b_cl_ltd.json")
    cfg = parse_args([f"--config={path}", "--n_layer=24", "--global_batch_size=512",
                      "--batch_size=8", "--block_size=2048"])
    metrics, ltd = data_efficiency(cfg, 512, notes := [])
    assert set(metrics) == {"vocab_rarity", "seqlen_truncate"} and len(notes) == 3
    assert metrics["vocab_rarity"] == {
        "difficulty_type": "percentile", "min_difficulty": 1, "max_difficulty": 100,
        "schedule_type": "fixed_root", "schedule_config": {"total_curriculum_step": 110000,
                                                           "difficulty_step": 1, "root_degree": 2}}
    assert ltd.layers == list(range(1, 23)) and ltd.config["min_value"] == 128


def real_deepspeed_config():
    """A training config as DeepSpeed users write them, around the example's data_efficiency."""
    ds = ds_example()
    ds.update(optimizer={"type": "Adam", "params": {"lr": 6e-4, "betas": [0.9, 0.95], "eps": 1e-6,
                                                    "weight_decay": 0.01, "amsgrad": True}},
              scheduler={"type": "WarmupCosineLR", "params": {
                  "total_num_steps": 900, "warmup_num_steps": 30, "cos_min_ratio": 0.1}},
              gradient_clipping=0.5, bf16={"enabled": True}, fp16={"enabled": False},
              communication_data_type="fp32", zero_optimization={"stage": 1},
              progressive_layer_drop={"enabled": True, "theta": 0.5, "gamma": 0.001},
              steps_per_print=10, wall_clock_breakdown=False)
    return ds


def test_a_real_deepspeed_config_sets_our_flags_names_the_rest_and_an_explicit_dtype_wins(tmp_path):
    """optimizer, scheduler, clipping and precision become flags (LR 2e-3, clipping 1.0 and float32
    were kept before); every documented top-level key is accepted; what changes training in
    DeepSpeed but not here is named in one note. --dtype=float32 with a config that enables bf16
    was refused as a conflict (the user had to edit the JSON to try a GPU recipe on a CPU): it wins,
    with a note."""
    path = write(tmp_path, real_deepspeed_config())
    cfg = parse_args([f"--config={path}"])
    assert (cfg.learning_rate, cfg.beta1, cfg.beta2, cfg.eps, cfg.weight_decay) == \
        (6e-4, 0.9, 0.95, 1e-6, 0.01)
    assert (cfg.grad_clip, cfg.dtype, cfg.warmup_iters, cfg.lr_decay_iters) == \
        (0.5, "bfloat16", 30, 900)
    assert cfg.min_lr == pytest.approx(6e-5) and (cfg.batch_size, cfg.global_batch_size) == (16, 16)
    assert ds_config.precision_key(cfg) == "bf16.enabled"
    data_efficiency(cfg, 16, notes := [])
    assert notes[0] == ("from --config: global_batch_size 16, batch_size 16, grad_clip 0.5, dtype "
                        "bfloat16, learning_rate 0.0006, eps 1e-06, weight_decay 0.01, beta1 0.9, "
                        "beta2 0.95, warmup_iters 30, lr_decay_iters 900, min_lr 6e-05")
    assert notes[1].startswith("scheduler WarmupCosineLR: warmup here is linear")
    assert notes[2] == ("not applied here (they change training in DeepSpeed): "
                        "communication_data_type; progressive_layer_drop; "
                        "optimizer.params.amsgrad; data_efficiency.seed (--seed seeds the sampler)")
    cfg = parse_args([f"--config={path}", "--dtype=float32"])
    data_efficiency(cfg, 16, notes := [])
    assert cfg.dtype == "float32"
    assert notes[0] == "--dtype=float32 wins over --config's bf16.enabled"
    assert "dtype" not in notes[1] and ds_config.precision_key(cfg) == ""


@pytest.mark.parametrize("flags, want", [
    (["--learning_rate=1e-3"], "--config sets optimizer.params.lr 0.0006 but --learning_rate=0.001 "
                               "was given; drop the flag or change the config"),
    (["--warmup_iters=5"],
     "--config sets scheduler.params.warmup_num_steps 30 but --warmup_iters=5"),
])
def test_a_flag_that_disagrees_with_the_config_is_one_line(tmp_path, flags, want):
    path = write(tmp_path, real_deepspeed_config())
    with pytest.raises(ValueError, match=re.escape(want)):
        parse_args([f"--config={path}", *flags])
    assert parse_args([f"--config={path}", "--learning_rate=6e-4"]).learning_rate == 6e-4  # agrees


def de(ds, *keys):
    """ds's data_efficiency section, or the one at keys below it."""
    for k in ("data_efficiency", *keys):
        ds = ds[k]
    return ds


RL, CL, CM = ("data_routing", "random_ltd"), ("data_sampling", "curriculum_learning"), \
    ("data_sampling", "curriculum_learning", "curriculum_metrics")


@pytest.mark.parametrize("edit, want", [
    (lambda d: de(d, *RL).update(total_layer_num=24), "set --n_layer=24"),
    (lambda d: d.update(train_batch_size=512), "--config sets train_batch_size 512 but "
                                               "--global_batch_size=16 was given; drop the flag"),
    (lambda d: de(d, *CM).update(perplexity=de(d, *CM)["vocabularyrarity"]),
     "unknown curriculum metric 'perplexity'"),
    (lambda d: de(d).update(surprise=1), "unknown key 'surprise'"),
    (lambda d: de(d, *RL).pop("random_ltd_schedule"), "random_ltd is missing random_ltd_schedule"),
    (lambda d: de(d, *CL).update(curriculum_metrics=[1, 2]),
     "curriculum_metrics in curriculum_learning must be an object"),
    (lambda d: de(d, *CM, "vocabularyrarity").update(min_difficulty="1"),
     'min_difficulty in vocabularyrarity must be a number, got "1"'),
    (lambda d: d.update(data_efficiency="yes"),
     "data_efficiency in the top level must be an object"),
    (lambda d: de(d).update(enabled="true"), "enabled in data_efficiency must be true or false"),
    # enabled without its schedule, it trained dense and exited 0 (an empty dict is falsy)
    (lambda d: de(d, "data_routing").update(random_ltd={"enabled": True}),
     "random_ltd is missing random_ltd_schedule; add it"),
    (lambda d: de(d, *CL).pop("curriculum_metrics"),
     "--config enables curriculum_learning but has no curriculum_metrics"),
    (lambda d: de(d, "data_sampling").update(dynamic_batching={"enabled": True}),
     "enables data_sampling.dynamic_batching, which this project does not implement"),
    (lambda d: d.update(curriculum_learning={"enabled": True, "curriculum_type": "seqlen"}),
     "legacy top-level curriculum_learning; move it to data_efficiency.data_sampling"),
    (lambda d: d.update(optimizer={"type": "Lamb", "params": {"lr": 1e-3}}),
     "optimizer 'Lamb' is not AdamW"),
    (lambda d: d.update(fp16={"enabled": True}, bf16={"enabled": True}),
     "--config enables both fp16 and bf16; keep one"),
    (lambda d: d.update(gradient_accumulation_steps=4),
     "--config has gradient_accumulation_steps 4 but this run accumulates 1"),
])
def test_deepspeed_config_mistakes_are_one_line_errors(tmp_path, edit, want):
    ds = ds_example()
    edit(ds)
    path = write(tmp_path, ds)
    with pytest.raises(ValueError, match=re.escape(want)) as e:
        cfg = parse_args([f"--config={path}", "--n_layer=4", "--global_batch_size=16"])
        data_efficiency(cfg, 16, [], accum=1)
    assert "\n" not in str(e.value)


def test_a_disabled_data_efficiency_is_said():
    ds = ds_example()
    ds["data_efficiency"]["enabled"] = False
    assert ds_config.from_deepspeed(ds, parse_args([]), notes := []) == ({}, None)
    assert notes == ["data_efficiency.enabled is not true: its enabled sections are off, "
                     "as in DeepSpeed"]
