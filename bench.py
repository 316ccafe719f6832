"""
Benchmarks that print ratios measured side by side in one run, as tables.

    python bench.py analyzer   # our analyzer vs DeepSpeed's DataAnalyzer (when importable)
    python bench.py sampler    # our sampler vs DeepSpeed's DeepSpeedDataSampler (when importable)
    python bench.py ltd        # random-LTD step time vs the FLOP ratio (efficiency)
    python bench.py dense      # our dense training step vs nanoGPT's model (--nanogpt=path/to/model.py)

Speed targets live here, never in timed test assertions.
"""

import argparse
import json
import os
import shutil
import statistics
import tempfile
import time

# -----------------------------------------------------------------------------
# shared: threads, interleaved rounds, DeepSpeed set-up


def pin_threads(n):
    """Fix torch's intra-op threads (two threads on two busy cores can be 4x slower than one); returns n."""
    import torch

    torch.set_num_threads(n)
    return n


def interleaved(cases, rounds, warmup=1, sync=lambda: None):
    """{name: fn} -> {name: [seconds of each round]}, rounds interleaved (a, b, a, b, ...) so that
    drift in machine load hits every case alike; `warmup` untimed rounds first; `sync` before each clock read."""
    times = {name: [] for name in cases}
    for i in range(warmup + rounds):
        for name, fn in cases.items():
            sync()
            t0 = time.perf_counter()
            fn()
            sync()
            if i >= warmup:
                times[name].append(time.perf_counter() - t0)
    return times


def med_range(ts, scale=1.0):
    """'median (min-max)' of a list of timings, each multiplied by scale."""
    return f"{statistics.median(ts) * scale:.4g} ({min(ts) * scale:.4g}-{max(ts) * scale:.4g})"


def _timed(fn):
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def deepspeed_init(port):
    """Import DeepSpeed and start the one-process Gloo group its data pipeline needs; None if not installed."""
    try:
        import deepspeed
        import deepspeed.comm.torch
    except ImportError as e:
        print(f"DeepSpeed is not importable ({e.__class__.__name__}: {e}): only our rows are printed")
        return None
    for k, v in (("MASTER_ADDR", "127.0.0.1"), ("MASTER_PORT", str(port)), ("RANK", "0"), ("LOCAL_RANK", "0"), ("WORLD_SIZE", "1")):
        os.environ.setdefault(k, v)
    deepspeed.comm.torch.build_shm_op = lambda: None  # its CPU shared-memory op crashes here; plain Gloo is enough
    deepspeed.init_distributed(dist_backend="gloo")  # DataAnalyzer and DeepSpeedDataSampler synchronize with barriers
    return deepspeed


# -----------------------------------------------------------------------------
# analyzer


def _corpus(data_dir):
    """The default corpus (prepared on first use) unless --data_dir names another."""
    import data

    if not os.path.exists(os.path.join(data_dir, "meta.json")):
        data.prepare(out_dir=data_dir, verbose=False)
    return data_dir


def bench_analyzer(args):
    """vocab_rarity over the same samples: our analyzer vs DeepSpeed's DataAnalyzer (map + reduce)."""
    import numpy as np

    import analyzer
    import data

    p = argparse.ArgumentParser(prog="bench.py analyzer")
    p.add_argument("--data_dir", default=data.DEFAULT_DIR)
    p.add_argument("--block_size", type=int, default=128)
    p.add_argument("--num_samples", type=int, default=50000, help="analyze the first this many samples (DeepSpeed is slow)")
    p.add_argument("--num_workers", type=int, default=1)
    p.add_argument("--repeat", type=int, default=5, help="best of this many runs, for each analyzer")
    a = p.parse_args(args)
    src = data.SampleWindows(os.path.join(_corpus(a.data_dir), "train.bin"), a.block_size)
    n = min(a.num_samples, len(src))
    work = tempfile.mkdtemp(prefix="bench_analyzer_")
    bin_path = os.path.join(work, "train.bin")  # the same first n samples, for both analyzers
    np.asarray(src.data[: n * a.block_size + 1]).tofile(bin_path)
    shutil.copy(os.path.join(a.data_dir, "meta.json"), work)
    tokens = n * (a.block_size + 1)
    rows = []
    t = min(_timed(lambda: analyzer.build_index(bin_path, a.block_size, ["vocab_rarity"], os.path.join(work, "ours"), a.num_workers,
                                                verbose=False))[0] for _ in range(a.repeat))
    ours = analyzer.load_index(os.path.join(work, "ours"), "vocab_rarity")
    rows.append((f"ours, counts + rarity + sort ({a.num_workers} worker)", t))
    if deepspeed_init(29533):
        import torch
        from deepspeed.runtime.data_pipeline.data_sampling.data_analyzer import DataAnalyzer
        from deepspeed.runtime.data_pipeline.data_sampling.indexed_dataset import MMapIndexedDataset

        windows = data.SampleWindows(bin_path, a.block_size)
        V = json.load(open(os.path.join(work, "meta.json")))["vocab_size"]

        class Windows(torch.utils.data.Dataset):
            def __len__(self):
                return n

            def __getitem__(self, i):
                return torch.from_numpy(windows.get([i])[0])

        def deepspeed_run(out):
            # as Megatron-DeepSpeed's analyze_data does it: pass 1 counts tokens, pass 2 scores samples
            DataAnalyzer(Windows(), batch_size=1000, metric_names=["total_vocab_freq"],
                         metric_functions=[lambda b: torch.bincount(b.flatten(), minlength=V)],
                         metric_types=["accumulate_value_over_samples"], metric_dtypes=[torch.int64], save_path=out).run_map_reduce()
            freq_file = MMapIndexedDataset(os.path.join(out, "total_vocab_freq", "total_vocab_freq_metric_value"), skip_warmup=True)
            counts = np.maximum(np.array(freq_file[0], dtype=np.float64), 1)  # subtle: copy while the mmap is open
            neg_log_p = torch.from_numpy(-np.log(counts / counts.sum()))
            DataAnalyzer(Windows(), batch_size=1000, metric_names=["vocab_rarity"],
                         metric_functions=[lambda b: neg_log_p[b].sum(1).to(torch.int64)],  # DeepSpeed keeps ints
                         metric_types=["single_value_per_sample"], metric_dtypes=[torch.int64], save_path=out).run_map_reduce()

        t = min(_timed(lambda: deepspeed_run(os.path.join(work, f"ds{i}")))[0] for i in range(a.repeat))
        rows.append(("DeepSpeed DataAnalyzer, 2 passes (1 thread)", t))
        ds_file = MMapIndexedDataset(os.path.join(work, "ds0", "vocab_rarity", "vocab_rarity_sample_to_metric"), skip_warmup=True)
        ds_values = np.array([ds_file[i][0] for i in range(n)])
        same = np.mean(ds_values == np.asarray(ours["sample_to_metric"]).astype(np.int64))  # DeepSpeed truncates to int
        off = np.abs(ds_values - np.asarray(ours["sample_to_metric"])).max()
        rows.append((f"same metric: {100 * same:.2f}% of DeepSpeed's int values equal int(ours), all within {off:.2f} "
                     "(its pass 1 counts each window's shared boundary token twice)", None))
    print(f"analyzer: vocab_rarity over {n:,} samples of {a.block_size}+1 tokens ({tokens:,} tokens), torch {__import__('torch').__version__}")
    print(f"{'':44} {'seconds':>9} {'tokens/s':>12} {'ours is':>9}")
    for name, t in rows:
        if t is None:
            print(name)
            continue
        print(f"{name:44} {t:>9.3f} {tokens / t:>12,.0f} {t / rows[0][1]:>8.1f}x")
    assert len(ours["sample_to_metric"]) == n
    shutil.rmtree(work)


# -----------------------------------------------------------------------------
# sampler


def bench_sampler(args):
    """ms per global batch at N samples: our sampler vs DeepSpeedDataSampler, steady state and at a pool change."""
    import numpy as np

    from sampler import CurriculumSampler

    p = argparse.ArgumentParser(prog="bench.py sampler")
    p.add_argument("--num_samples", type=int, default=1_000_000)
    p.add_argument("--global_batch_size", type=int, default=512)
    p.add_argument("--steps", type=int, default=2000, help="timed batches per case")
    a = p.parse_args(args)
    N, G = a.num_samples, a.global_batch_size
    metric = np.random.default_rng(0).random(N)  # a random difficulty metric
    index_to_sample = np.argsort(metric, kind="stable")
    index_to_metric = metric[index_to_sample]

    def ours(percentile):
        cur = [{"name": "m", "difficulty_type": "percentile", "get_difficulty": percentile,
                "index_to_sample": index_to_sample, "index_to_metric": index_to_metric}]
        return CurriculumSampler(N, G, seed=0, curricula=cur if percentile else [])

    def per_batch(draw, steps):
        draw()  # the first call builds the pool
        t, _ = _timed(lambda: [draw() for _ in range(steps)])
        return 1000 * t / steps

    rows = [("ours, dense (no curriculum)", per_batch(ours(None).next_global_batch, a.steps)),
            ("ours, percentile 50 (steady pool)", per_batch(ours(lambda t: 50).next_global_batch, a.steps)),
            ("ours, percentile rising 1 point per step", per_batch(ours(lambda t: min(100, 1 + t)).next_global_batch, 99))]
    ds_rows = []
    if deepspeed_init(29534):
        import deepspeed
        import torch
        from deepspeed.runtime.data_pipeline.data_sampling.data_sampler import DeepSpeedDataSampler
        from deepspeed.runtime.data_pipeline.data_sampling.utils import close_mmap_dataset_builder, create_mmap_dataset_builder

        work = tempfile.mkdtemp(prefix="bench_sampler_")
        path = os.path.join(work, "m_index_to_sample_percentile_merged")  # DeepSpeed's layout: 100 rows of sorted ids
        builder = create_mmap_dataset_builder(path, np.int64)
        for chunk in np.array_split(index_to_sample, 100):
            builder.add_item(torch.from_numpy(chunk.astype(np.int64)))
        close_mmap_dataset_builder(builder, path)

        def deepspeed_sampler(schedule):
            entry = {"index_to_sample_path": path, "index_to_metric_path": path, "difficulty_type": "percentile",
                     "clustering_type": "schedule_based", "min_difficulty": 1, "max_difficulty": 100, **schedule}
            config = {"seed": 0, "data_sampling": {"num_epochs": 1, "curriculum_learning": {
                "enabled": True, "data_cluster_path": os.path.join(work, f"clusters{len(os.listdir(work))}"), "curriculum_metrics": {"m": entry}}}}
            return DeepSpeedDataSampler(config, N, G, 0, 1, deepspeed.comm.get_world_group(), 1, 0)

        steady = {"min_difficulty": 50, "schedule_type": "fixed_linear",  # stays at 50 for ~1e7 steps
                  "schedule_config": {"total_curriculum_step": 10**9, "difficulty_step": 1}}
        rising = {"schedule_type": "fixed_linear", "schedule_config": {"total_curriculum_step": 99, "difficulty_step": 1}}
        ds_rows.append(("DeepSpeedDataSampler, percentile 50 (steady)", per_batch(deepspeed_sampler(steady).get_next_global_batch, a.steps // 4)))
        ds_rows.append(("DeepSpeedDataSampler, percentile rising 1 point per step", per_batch(deepspeed_sampler(rising).get_next_global_batch, 98)))
        shutil.rmtree(work)
    print(f"sampler: {N:,} samples, global batch {G}, ms per global batch (mean over the timed batches)")
    print(f"{'':58} {'ms/batch':>9} {'vs ours':>9}")
    for name, ms in rows:
        print(f"{name:58} {ms:>9.4f}")
    for (name, ms), ref in zip(ds_rows, (rows[1][1], rows[2][1])):
        print(name if ms is None else f"{name:58} {ms:>9.4f} {ms / ref:>8.2f}x")


# -----------------------------------------------------------------------------
# random-LTD


def bench_ltd(args):
    """Training-step time (forward + backward) with random-LTD at several kept ratios vs the FLOPs it saves.

    efficiency = (1 - t_ltd / t_dense) / (1 - flops_ltd / flops_dense): 1.0 means the wall clock
    falls exactly as much as the counted FLOPs; the paper got about 0.77 on GPUs. Eager rows, and
    torch.compile'd rows (default on CUDA). Defaults: GPT-2 small on CUDA (bf16), a small model on CPU.
    Returns {r: (time ratio, FLOP ratio)} of the first mode.
    """
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    from model import GPT, GPTConfig, compile_model

    cuda = torch.cuda.is_available()
    shape = (12, 12, 768, 1024, 16, 50304) if cuda else (12, 6, 384, 512, 4, 257)  # L, heads, C, T, B, vocab
    p = argparse.ArgumentParser(prog="bench.py ltd")
    for name, default in zip(("n_layer", "n_head", "n_embd", "block_size", "batch_size", "vocab_size"), shape):
        p.add_argument(f"--{name}", type=int, default=default)
    p.add_argument("--ratios", default="0.75,0.5,0.25", help="kept ratios r/T to measure")
    p.add_argument("--iters", type=int, default=6, help="timed rounds, interleaved (median and range are reported)")
    p.add_argument("--modes", default="eager,compiled" if cuda else "eager", help="eager and/or compiled")
    p.add_argument("--threads", type=int, default=torch.get_num_threads() if cuda else 1, help="torch intra-op threads")
    a = p.parse_args(args)
    device, threads = "cuda" if cuda else "cpu", pin_threads(a.threads)
    torch.manual_seed(0)
    T = a.block_size
    config = GPTConfig(block_size=T, vocab_size=a.vocab_size, n_layer=a.n_layer, n_head=a.n_head, n_embd=a.n_embd)
    model = GPT(config).to(device)
    x = torch.randint(0, a.vocab_size, (a.batch_size, T + 1), device=device)
    ctx = torch.autocast("cuda", dtype=torch.bfloat16) if cuda else torch.autocast("cpu", enabled=False)
    gen = torch.Generator(device=device).manual_seed(0)
    keeps = [T] + [max(1, int(T * float(r))) for r in a.ratios.split(",")]  # T = dense
    # (dense, LTD) nets per mode; compiled as train.py does: a dense run static, an LTD run with symbolic shapes
    modes = {m: (compile_model(model, False), compile_model(model, True)) if m == "compiled" else (model, model)
             for m in a.modes.split(",")}

    def step(nets, keep):
        ltd_idx = model.sample_ltd_indices(a.batch_size, T, keep, gen)  # drawn outside the compiled forward
        with ctx:
            _, loss = nets[keep < T](x[:, :-1], x[:, 1:], ltd_idx=ltd_idx)
        loss.backward()
        model.zero_grad(set_to_none=True)

    flops = {}
    for keep in keeps:
        with FlopCounterMode(display=False) as fc:
            step((model, model), keep)
        flops[keep] = fc.get_total_flops()
    cases = {(m, k): (lambda m=m, k=k: step(modes[m], k)) for m in modes for k in keeps}
    times = interleaved(cases, a.iters, warmup=2, sync=torch.cuda.synchronize if cuda else lambda: None)
    med = {c: statistics.median(t) for c, t in times.items()}
    where = torch.cuda.get_device_name() + " bf16" if cuda else "cpu fp32"
    print(f"random-LTD, {a.n_layer} layers (dropping {len(model.ltd_layers)}), n_embd {a.n_embd}, T {T}, "
          f"batch {a.batch_size}, vocab {a.vocab_size}, {where}, torch {torch.__version__}, {threads} threads, "
          f"{a.iters} interleaved rounds: median (min-max)")
    print(f"{'mode':>8} {'kept r/T':>8} {'r':>5} {'ms/step':>22} {'time ratio':>10} {'FLOP ratio':>10} "
          f"{'efficiency':>10}")
    for m, k in cases:
        tr, fr = med[m, k] / med[m, T], flops[k] / flops[T]
        eff = (1 - tr) / (1 - fr) if k < T else float("nan")
        print(f"{m:>8} {k / T:>8.2f} {k:>5} {med_range(times[m, k], 1000):>22} {tr:>10.3f} {fr:>10.3f} {eff:>10.2f}")
    for m in modes:
        print(f"{m}: dense step {flops[T] / med[m, T] / 1e12:.2f} TFLOP/s achieved (counted matmul + attention FLOPs)")
    first = next(iter(modes))
    return {k: (med[first, k] / med[first, T], flops[k] / flops[T]) for k in keeps}  # r -> (time ratio, FLOP ratio)


# -----------------------------------------------------------------------------
# dense training step: ours vs nanoGPT's model at the same config


def bench_dense(args):
    """Tokens/s of a full training step (forward, backward, clip, AdamW) for our GPT and, given its
    model.py, nanoGPT's GPT: same config, same batches, same optimizer settings, rounds interleaved."""
    import importlib.util

    import torch

    from model import GPT, GPTConfig

    p = argparse.ArgumentParser(prog="bench.py dense")
    p.add_argument("--nanogpt", default="", help="path to karpathy/nanoGPT's model.py (not shipped here)")
    p.add_argument("--n_layer", type=int, default=4)
    p.add_argument("--n_head", type=int, default=4)
    p.add_argument("--n_embd", type=int, default=128)
    p.add_argument("--block_size", type=int, default=128)
    p.add_argument("--batch_size", type=int, default=16)
    p.add_argument("--iters", type=int, default=30, help="timed steps per model (median is reported)")
    a = p.parse_args(args)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    shape = dict(block_size=a.block_size, vocab_size=257, n_layer=a.n_layer, n_head=a.n_head, n_embd=a.n_embd, dropout=0.0, bias=False)
    models = {"ours (model.py)": GPT(GPTConfig(**shape))}
    if a.nanogpt:
        spec = importlib.util.spec_from_file_location("nanogpt_model", a.nanogpt)
        ref = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(ref)
        models["nanoGPT (" + a.nanogpt + ")"] = ref.GPT(ref.GPTConfig(**shape))
    gen = torch.Generator().manual_seed(0)
    batches = [torch.randint(0, 257, (a.batch_size, a.block_size + 1), generator=gen).to(device) for _ in range(4)]
    batches = [(b[:, :-1].contiguous(), b[:, 1:].contiguous()) for b in batches]  # as nanoGPT's get_batch makes them
    steps = {}
    for name, model in models.items():
        model.to(device).train()
        opt = model.configure_optimizers(0.1, 1e-3, (0.9, 0.99), device.split(":")[0])

        def step(xy, model=model, opt=opt):
            _, loss = model(*xy)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            opt.zero_grad(set_to_none=True)
            return loss

        steps[name] = step
    ctx = torch.autocast("cuda", dtype=torch.bfloat16) if device == "cuda" else torch.autocast("cpu", enabled=False)
    times = {name: [] for name in models}
    with ctx:
        for i in range(3 + a.iters):  # 3 warmup rounds, then interleaved timed rounds
            for name, step in steps.items():
                if device == "cuda":
                    torch.cuda.synchronize()
                t, _ = _timed(lambda: step(batches[i % len(batches)]).item())
                if i >= 3:
                    times[name].append(t)
    tokens = a.batch_size * a.block_size
    med = {name: sorted(t)[len(t) // 2] for name, t in times.items()}
    print(f"dense training step: {a.n_layer} layers, n_embd {a.n_embd}, T {a.block_size}, batch {a.batch_size}, {device}, "
          f"torch {torch.__version__}, {torch.get_num_threads()} threads, median of {a.iters}")
    print(f"{'':58} {'ms/step':>9} {'tok/s':>10} {'vs ours':>8}")
    ours = med["ours (model.py)"]
    for name, t in med.items():
        print(f"{name[:58]:58} {1000 * t:>9.2f} {tokens / t:>10,.0f} {ours / t:>7.3f}x")
    if not a.nanogpt:
        print("(pass --nanogpt=path/to/nanoGPT/model.py to time nanoGPT's model beside ours)")
    return med


# -----------------------------------------------------------------------------


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("what", choices=["analyzer", "sampler", "ltd", "dense"])
    args, rest = p.parse_known_args(argv)
    {"analyzer": bench_analyzer, "sampler": bench_sampler, "ltd": bench_ltd, "dense": bench_dense}[args.what](rest)


if __name__ == "__main__":
    main()
