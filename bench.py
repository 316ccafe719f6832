"""
Benchmarks that print ratios measured side by side in one run, as tables.

    python bench.py analyzer   # our analyzer vs DeepSpeed's DataAnalyzer (when importable)
    python bench.py sampler    # our sampler vs DeepSpeed's DeepSpeedDataSampler (when importable)
    python bench.py ltd        # random-LTD step time vs the FLOP ratio (efficiency)
    python bench.py dense      # our dense training step vs nanoGPT's model (--nanogpt=path/to/model.py)
    python bench.py prepare    # data.py's peak anonymous memory and MB/s at 30 MB, 300 MB and 1 GB of text

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
    """vocab_rarity over the same samples, rounds interleaved: our analyzer vs DeepSpeed's DataAnalyzer (map + reduce).
    DeepSpeed gets what a tuned user would give it: whole batches (see the line it prints)."""
    import itertools

    import numpy as np

    import analyzer
    import data

    p = argparse.ArgumentParser(prog="bench.py analyzer")
    p.add_argument("--data_dir", default=data.DEFAULT_DIR)
    p.add_argument("--block_size", type=int, default=128, help="T; the README quotes 128 and 1024")
    p.add_argument("--num_samples", type=int, default=50000, help="analyze the first this many samples")
    p.add_argument("--num_workers", type=int, default=1, help="our worker processes, and DeepSpeed's num_threads")
    p.add_argument("--threads", type=int, default=1, help="torch intra-op threads (DeepSpeed's metrics run in torch)")
    p.add_argument("--rounds", type=int, default=5, help="timed rounds each, interleaved, after a warm-up")
    a = p.parse_args(args)
    T, threads = a.block_size, pin_threads(a.threads)
    src = data.SampleWindows(os.path.join(_corpus(a.data_dir), "train.bin"), T)
    n, work = min(a.num_samples, len(src)), tempfile.mkdtemp(prefix="bench_analyzer_")
    bin_path = os.path.join(work, "train.bin")  # the same first n samples, for both analyzers
    np.asarray(src.data[: n * T + 1]).tofile(bin_path)
    shutil.copy(os.path.join(a.data_dir, "meta.json"), work)
    runs = {"ours": itertools.count(), "ds": itertools.count()}  # a fresh output directory every round
    cases = {"ours": lambda: analyzer.build_index(bin_path, T, ["vocab_rarity"], f"{work}/ours{next(runs['ours'])}",
                                                  a.num_workers, verbose=False)}
    if deepspeed_init(29533):
        import torch
        from deepspeed.runtime.data_pipeline.data_sampling.data_analyzer import DataAnalyzer
        from deepspeed.runtime.data_pipeline.data_sampling.indexed_dataset import MMapIndexedDataset

        windows, V = data.SampleWindows(bin_path, T), json.load(open(os.path.join(work, "meta.json")))["vocab_size"]

        class Batches(torch.utils.data.Dataset):
            def __len__(self):
                return n

            def __getitems__(self, ids):  # its DataLoader asks for batch_size consecutive ids at a time
                assert ids[-1] - ids[0] == len(ids) - 1
                return torch.from_numpy(windows.get_range(ids[0], ids[-1] + 1))  # (B, T+1) int64, one read

        def deepspeed_run():  # as Megatron-DeepSpeed's analyze_data: pass 1 counts tokens, pass 2 scores samples
            out = f"{work}/ds{next(runs['ds'])}"
            kw = dict(batch_size=1000, num_threads=a.num_workers, num_threads_reduce=a.num_workers,
                      collate_fn=lambda b: b, metric_dtypes=[torch.int64], save_path=out)
            DataAnalyzer(Batches(), metric_names=["total_vocab_freq"], metric_types=["accumulate_value_over_samples"],
                         metric_functions=[lambda b: torch.bincount(b.flatten(), minlength=V)], **kw).run_map_reduce()
            freq = MMapIndexedDataset(f"{out}/total_vocab_freq/total_vocab_freq_metric_value", skip_warmup=True)
            counts = np.maximum(np.array(freq[0], dtype=np.float64), 1)  # subtle: copy while the mmap is open
            neg_log_p = torch.from_numpy(-np.log(counts / counts.sum()))
            DataAnalyzer(Batches(), metric_names=["vocab_rarity"], metric_types=["single_value_per_sample"],
                         metric_functions=[lambda b: neg_log_p[b].sum(1).to(torch.int64)], **kw).run_map_reduce()

        cases["DeepSpeed"] = deepspeed_run
    times, tokens = interleaved(cases, a.rounds), n * (T + 1)
    print(f"analyzer: vocab_rarity over {n:,} samples of {T}+1 tokens ({tokens:,} tokens), {a.num_workers} worker(s), "
          f"torch {__import__('torch').__version__}, {threads} thread(s); median (min-max) of {a.rounds} rounds")
    print(f"{'':34} {'seconds':>24} {'tokens/s':>13} {'DeepSpeed / ours':>20}")
    for name, label in (("ours", "ours: counts, rarity, sort"), ("DeepSpeed", "DeepSpeed DataAnalyzer, 2 passes")):
        if name in times:
            ratios = [d / o for d, o in zip(times[name], times["ours"])]  # paired: the same round
            print(f"{label:34} {med_range(times[name]):>24} {tokens / statistics.median(times[name]):>13,.0f} "
                  f"{med_range(ratios) if name != 'ours' else '':>20}")
    ours = np.asarray(analyzer.load_index(f"{work}/ours0", "vocab_rarity")["sample_to_metric"])
    if "DeepSpeed" in times:
        print("DeepSpeed was given a Dataset whose __getitems__ returns each batch of 1000 samples as one (B, T+1) "
              "tensor, collate_fn = identity, num_threads = --num_workers")
        ds = MMapIndexedDataset(f"{work}/ds0/vocab_rarity/vocab_rarity_sample_to_metric", skip_warmup=True)
        ds = np.array([ds[i][0] for i in range(n)])
        print(f"same metric: {100 * np.mean(ds == ours.astype(np.int64)):.2f}% of DeepSpeed's int values equal "
              f"int(ours), all within {np.abs(ds - ours).max():.2f} (its pass 1 counts windows' shared tokens twice)")
    shutil.rmtree(work)


# -----------------------------------------------------------------------------
# sampler


def bench_sampler(args):
    """ms per global batch: our CurriculumSampler (deepspeed=True) vs DeepSpeedDataSampler on one percentile index,
    a steady pool (percentile 50) and a pool growing by N/100 ids per step; rounds interleaved, median (range)."""
    import numpy as np

    from sampler import CurriculumSampler
    from scheduler import CurriculumScheduler

    p = argparse.ArgumentParser(prog="bench.py sampler")
    p.add_argument("--num_samples", type=int, default=1_000_000)
    p.add_argument("--global_batch_size", type=int, default=512)
    p.add_argument("--steps", type=int, default=200, help="batches per round in the steady case")
    p.add_argument("--rounds", type=int, default=6, help="timed rounds, after one warmup round")
    p.add_argument("--threads", type=int, default=1)
    a = p.parse_args(args)
    N, G, threads = a.num_samples, a.global_batch_size, pin_threads(a.threads)
    index_to_sample = np.random.default_rng(0).permutation(N).astype(np.int64)  # a random metric's sorted index
    grow = 98 // (a.rounds + 1)  # each round draws the next `grow` steps of one run that admits 1% more per step
    linear = {"difficulty_type": "percentile", "min_difficulty": 1, "max_difficulty": 100,
              "schedule_type": "fixed_linear"}
    entries = {"steady pool (percentile 50)": (dict(linear, min_difficulty=50, schedule_config={  # 50 for ~1e7 steps
                   "total_curriculum_step": 10**9, "difficulty_step": 1}), a.steps),
               f"pool growing by {N // 100:,} ids per step": (dict(linear, schedule_config={
                   "total_curriculum_step": 99, "difficulty_step": 1}), grow)}
    deepspeed, work = deepspeed_init(29534), tempfile.mkdtemp(prefix="bench_sampler_")
    if deepspeed:
        import torch
        from deepspeed.runtime.data_pipeline.data_sampling import utils
        from deepspeed.runtime.data_pipeline.data_sampling.data_sampler import DeepSpeedDataSampler

        path = os.path.join(work, "m_index_to_sample_percentile_merged")  # DeepSpeed's layout: 100 rows of sorted ids
        builder = utils.create_mmap_dataset_builder(path, np.int64)
        for chunk in np.array_split(index_to_sample, 100):
            builder.add_item(torch.from_numpy(chunk))
        utils.close_mmap_dataset_builder(builder, path)
    cases = {}  # in the order of the rounds: ours, DeepSpeed, ours, DeepSpeed
    for i, (name, (entry, k)) in enumerate(entries.items()):
        c = {"name": "m", "difficulty_type": "percentile", "get_difficulty": CurriculumScheduler(entry).get_difficulty,
             "max_difficulty": 100, "index_to_sample": index_to_sample, "index_to_metric": None}
        cases[name, "ours"] = (CurriculumSampler(N, G, curricula=[c], deepspeed=True).next_global_batch, k)
        if deepspeed:
            metric = dict(entry, index_to_sample_path=path, index_to_metric_path=path, clustering_type="schedule_based")
            cl = {"enabled": True, "data_cluster_path": os.path.join(work, f"clusters{i}"),
                  "curriculum_metrics": {"m": metric}}
            config = {"seed": 0, "data_sampling": {"num_epochs": 1, "curriculum_learning": cl}}
            ds = DeepSpeedDataSampler(config, N, G, 0, 1, deepspeed.comm.get_world_group(), 1, 0)
            cases[name, "DeepSpeed"] = (ds.get_next_global_batch, k)

    def batches(fn, k):
        return lambda: [fn() for _ in range(k)]  # one round: k global batches

    times = interleaved({key: batches(fn, k) for key, (fn, k) in cases.items()}, a.rounds)
    shutil.rmtree(work)
    print(f"sampler: {N:,} samples, global batch {G}, {threads} thread(s); ms per global batch, median (min-max) of "
          f"{a.rounds} interleaved rounds (ours, DeepSpeed, ...) after 1 warmup round")
    print(f"{'':40} {'ours':>26} {'DeepSpeedDataSampler':>26} {'ratio':>7}")
    for name, (_, k) in entries.items():
        ours, ds = times[name, "ours"], times.get((name, "DeepSpeed"))
        ratio = f"{statistics.median(ds) / statistics.median(ours):>6.1f}x" if ds else ""
        print(f"{name:40} {med_range(ours, 1000 / k):>26} {med_range(ds, 1000 / k) if ds else '-':>26} {ratio:>7}")


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
# data preparation

_PREPARE_CHILD = """import os, sys, time
sys.path.insert(0, sys.argv[2])
import data
print(open('/proc/self/status').read().split('RssAnon:')[1].split()[0], flush=True)  # kB after imports
sys.stdin.readline()  # the parent has read that level: go
t0 = time.perf_counter()
data.prepare([os.path.join(sys.argv[1], 'src')], os.path.join(sys.argv[1], 'out'), block_size=128, verbose=False)
print(time.perf_counter() - t0, flush=True)"""


def _rss_anon_kb(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            return int(f.read().split("RssAnon:")[1].split()[0])
    except (OSError, IndexError):
        return 0  # the process has just exited


def bench_prepare(args):
    """data.prepare in a child process on copies of this Python's standard library (each file with a unique first
    line, so none is a duplicate): peak anonymous memory (RssAnon, sampled every 5 ms, above its level after imports;
    the page cache and mapped libraries are not in it) and input MB/s. --data_py_dir times another data.py."""
    import subprocess
    import sys
    import sysconfig

    p = argparse.ArgumentParser(prog="bench.py prepare")
    p.add_argument("--sizes_mb", default="30,300,1000")
    p.add_argument("--data_py_dir", default=os.path.dirname(os.path.abspath(__file__)))
    a = p.parse_args(args)
    root = sysconfig.get_paths()["stdlib"]
    files = [os.path.join(d, f) for d, _, names in os.walk(root) if "site-packages" not in d
             for f in names if f.endswith(".py")]
    print(f"{'input MB':>9} {'files':>7} {'peak RssAnon MB':>16} {'seconds':>8} {'MB/s':>6}   {a.data_py_dir}/data.py")
    for mb in map(float, a.sizes_mb.split(",")):
        work, size, k = tempfile.mkdtemp(prefix="bench_prepare_"), 0, 0
        try:
            while size < mb * 1e6:  # copy round k // len(files) of file k % len(files)
                d = os.path.join(work, "src", str(k // len(files)))
                os.makedirs(d, exist_ok=True)
                with open(os.path.join(d, f"{k % len(files)}.py"), "wb") as f:
                    size += f.write(f"# copy {k}\n".encode() + open(files[k % len(files)], "rb").read())
                k += 1
            child = subprocess.Popen([sys.executable, "-c", _PREPARE_CHILD, work, a.data_py_dir], text=True,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE)
            base = peak = int(child.stdout.readline())
            child.stdin.write("\n")
            child.stdin.flush()
            while child.poll() is None:
                peak = max(peak, _rss_anon_kb(child.pid))
                time.sleep(0.005)
            seconds = float(child.stdout.readline())
        finally:
            shutil.rmtree(work)
        print(f"{size / 1e6:9.0f} {k:7,} {(peak - base) / 1024:16.1f} {seconds:8.1f} {size / 1e6 / seconds:6.0f}")


# -----------------------------------------------------------------------------


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("what", choices=["analyzer", "sampler", "ltd", "dense", "prepare"])
    args, rest = p.parse_known_args(argv)
    {"analyzer": bench_analyzer, "sampler": bench_sampler, "ltd": bench_ltd, "dense": bench_dense,
     "prepare": bench_prepare}[args.what](rest)


if __name__ == "__main__":
    main()
