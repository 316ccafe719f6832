"""
Benchmarks that print ratios measured side by side in one run, as tables (`python bench.py ltd --help`: options).

    python bench.py analyzer   # our analyzer vs DeepSpeed's DataAnalyzer (when importable)
    python bench.py sampler    # our sampler vs DeepSpeed's DeepSpeedDataSampler (when importable)
    python bench.py ltd        # random-LTD step time vs the FLOP ratio (efficiency)
    python bench.py dense      # our dense training step vs nanoGPT's model (--nanogpt=path/to/model.py)
    python bench.py prepare    # data.py's peak anonymous memory and MB/s at 30 MB, 300 MB and 1 GB of text

Each timing table states device, torch version and threads, and prints the median (min-max) of rounds run
interleaved (ours, theirs, ours, ...) after warm-up ones, so that drift in machine load hits every case alike.
Without DeepSpeed, only our rows. Speed targets live here, never in timed test assertions.
"""

import argparse
import importlib.util
import itertools
import json
import os
import shutil
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time

import numpy as np
import torch
from torch.utils.flop_counter import FlopCounterMode

import analyzer
import data
from model import GPT, GPTConfig, compile_model
from sampler import CurriculumSampler
from scheduler import CurriculumScheduler

# -----------------------------------------------------------------------------
# shared: options and threads, device, interleaved rounds, table lines, DeepSpeed set-up

ROUNDS = "timed rounds each, interleaved, after warm-up ones"
HELP = {"threads": "torch intra-op threads (more than the free cores slows the cases unevenly)", "rounds": ROUNDS,
        "iters": ROUNDS}


def setup(what, args, **options):
    """`bench.py what`'s options from name=default or name=(default, help), typed as the default (unknown ones
    fail); pins torch's intra-op threads to --threads."""
    p = argparse.ArgumentParser(prog=f"bench.py {what}")
    for name, v in options.items():
        default, help = v if isinstance(v, tuple) else (v, HELP.get(name))
        p.add_argument(f"--{name}", type=type(default), default=default, help=help)
    a = p.parse_args(args)
    if "threads" in options:
        torch.set_num_threads(a.threads)
    return a


def device_autocast():
    """(device, autocast context, label): bf16 autocast on CUDA, plain fp32 on CPU."""
    if torch.cuda.is_available():
        return "cuda", torch.autocast("cuda", dtype=torch.bfloat16), f"{torch.cuda.get_device_name()} bf16"
    return "cpu", torch.autocast("cpu", enabled=False), "cpu fp32"


def stated(where, threads, rounds, warmup):
    """The end of each timing table's first line: device, torch version, threads, and what its numbers are."""
    return f"{where}, torch {torch.__version__}, {threads} thread(s); median (min-max) of {rounds} " \
           f"interleaved rounds after {warmup} warm-up"


def interleaved(cases, rounds, warmup=1, sync=lambda: None):
    """{name: fn} -> {name: [seconds of each round]}, rounds interleaved (a, b, a, b, ...) after `warmup` untimed
    ones; `sync` before each clock read."""
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


def row(widths, *cells):
    """Print one table line, a cell per width: right-aligned, or left-aligned where the width is negative (%-34s)."""
    print(" ".join(f"{c:<{-w}}" if w < 0 else f"{c:>{w}}" for c, w in zip(cells, widths)))


def deepspeed_init(port):
    """Import DeepSpeed and start the one-process Gloo group its data pipeline needs; None if not installed."""
    try:
        import deepspeed
        import deepspeed.comm.torch
    except ImportError as e:
        print(f"DeepSpeed is not importable ({e.__class__.__name__}: {e}): only our rows are printed")
        return None
    env = {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), "RANK": "0", "LOCAL_RANK": "0", "WORLD_SIZE": "1"}
    for k, v in env.items():
        os.environ.setdefault(k, v)
    deepspeed.comm.torch.build_shm_op = lambda: None  # its CPU shared-memory op crashes here; plain Gloo is enough
    deepspeed.init_distributed(dist_backend="gloo")  # DataAnalyzer and DeepSpeedDataSampler synchronize with barriers
    return deepspeed


# -----------------------------------------------------------------------------
# analyzer


def bench_analyzer(args):
    """vocab_rarity over the same samples: our analyzer vs DeepSpeed's DataAnalyzer (map + reduce), which gets
    what a tuned user would give it: whole batches (see the line it prints)."""
    a = setup("analyzer", args, data_dir=("", 'a prepared corpus; "" = the standard library'), block_size=(128, "T; the README quotes 128 and 1024"),
              num_samples=(50000, "analyze the first this many samples"), threads=1, rounds=5,
              num_workers=(1, "our worker processes, and DeepSpeed's num_threads"))
    a.data_dir = data.corpus_dir(a.data_dir)
    T, src = a.block_size, data.SampleWindows(os.path.join(a.data_dir, "train.bin"), a.block_size)
    n, work = min(a.num_samples, len(src)), tempfile.mkdtemp(prefix="bench_analyzer_")
    bin_path = os.path.join(work, "train.bin")  # the same first n samples, for both analyzers
    np.asarray(src.data[: n * T + 1]).tofile(bin_path)
    shutil.copy(os.path.join(a.data_dir, "meta.json"), work)
    runs = {"ours": itertools.count(), "ds": itertools.count()}  # a fresh output directory every round
    cases = {"ours": lambda: analyzer.build_index(bin_path, T, ["vocab_rarity"], f"{work}/ours{next(runs['ours'])}",
                                                  a.num_workers, verbose=False)}
    if deepspeed_init(29533):
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
          + stated("cpu", a.threads, a.rounds, 1))
    W = (-34, 24, 13, 20)
    row(W, "", "seconds", "tokens/s", "DeepSpeed / ours")
    for name, label in (("ours", "ours: counts, rarity, sort"), ("DeepSpeed", "DeepSpeed DataAnalyzer, 2 passes")):
        if name in times:
            ratios = [d / o for d, o in zip(times[name], times["ours"])]  # paired: the same round
            row(W, label, med_range(times[name]), f"{tokens / statistics.median(times[name]):,.0f}",
                med_range(ratios) if name != "ours" else "")
    if "DeepSpeed" in times:
        print("DeepSpeed was given a Dataset whose __getitems__ returns each batch of 1000 samples as one (B, T+1) "
              "tensor, collate_fn = identity, num_threads = --num_workers")
        ours = np.asarray(analyzer.load_index(f"{work}/ours0", "vocab_rarity")["sample_to_metric"])
        ds = MMapIndexedDataset(f"{work}/ds0/vocab_rarity/vocab_rarity_sample_to_metric", skip_warmup=True)
        ds = np.array([ds[i][0] for i in range(n)])
        print(f"same metric: {100 * np.mean(ds == ours.astype(np.int64)):.2f}% of DeepSpeed's int values equal "
              f"int(ours), all within {np.abs(ds - ours).max():.2f} (its pass 1 counts windows' shared tokens twice)")
    shutil.rmtree(work)


# -----------------------------------------------------------------------------
# sampler


def deepspeed_samplers(deepspeed, entries, index_to_sample, work, N, G):
    """{name: DeepSpeedDataSampler} for {name: (curriculum entry, _)}, all over one index written under work."""
    from deepspeed.runtime.data_pipeline.data_sampling import utils
    from deepspeed.runtime.data_pipeline.data_sampling.data_sampler import DeepSpeedDataSampler

    path = os.path.join(work, "m_index_to_sample_percentile_merged")  # DeepSpeed's layout: 100 rows of sorted ids
    builder = utils.create_mmap_dataset_builder(path, np.int64)
    for chunk in np.array_split(index_to_sample, 100):
        builder.add_item(torch.from_numpy(chunk))
    utils.close_mmap_dataset_builder(builder, path)
    samplers = {}
    for i, (name, (entry, _)) in enumerate(entries.items()):
        metric = dict(entry, index_to_sample_path=path, index_to_metric_path=path, clustering_type="schedule_based")
        cl = {"enabled": True, "data_cluster_path": f"{work}/clusters{i}", "curriculum_metrics": {"m": metric}}
        config = {"seed": 0, "data_sampling": {"num_epochs": 1, "curriculum_learning": cl}}
        samplers[name] = DeepSpeedDataSampler(config, N, G, 0, 1, deepspeed.comm.get_world_group(), 1, 0)
    return samplers


def bench_sampler(args):
    """ms per global batch: our CurriculumSampler (deepspeed=True) vs DeepSpeedDataSampler on one percentile index,
    a steady pool (percentile 50) and a pool growing by N/100 ids per step."""
    a = setup("sampler", args, num_samples=1_000_000, global_batch_size=512, threads=1, rounds=6,
              steps=(200, "batches per round in the steady case"))
    N, G = a.num_samples, a.global_batch_size
    index_to_sample = np.random.default_rng(0).permutation(N).astype(np.int64)  # a random metric's sorted index
    grow = 98 // (a.rounds + 1)  # each round draws the next `grow` steps of one run that admits 1% more per step
    linear = {"difficulty_type": "percentile", "min_difficulty": 1, "max_difficulty": 100,
              "schedule_type": "fixed_linear", "schedule_config": {"total_curriculum_step": 99, "difficulty_step": 1}}
    steady = dict(linear, min_difficulty=50, schedule_config={"total_curriculum_step": 10**9, "difficulty_step": 1})
    entries = {"steady pool (percentile 50)": (steady, a.steps),  # (entry, batches per round)
               f"pool growing by {N // 100:,} ids per step": (linear, grow)}
    deepspeed, work = deepspeed_init(29534), tempfile.mkdtemp(prefix="bench_sampler_")
    theirs = deepspeed_samplers(deepspeed, entries, index_to_sample, work, N, G) if deepspeed else {}

    def batches(fn, k):
        return lambda: [fn() for _ in range(k)]  # one round: k global batches

    cases = {}  # in the order of the rounds: ours, DeepSpeed, ours, DeepSpeed
    for name, (entry, k) in entries.items():
        c = {"name": "m", "difficulty_type": "percentile", "get_difficulty": CurriculumScheduler(entry).get_difficulty,
             "max_difficulty": 100, "index_to_sample": index_to_sample, "index_to_metric": None}
        cases[name, "ours"] = batches(CurriculumSampler(N, G, curricula=[c], deepspeed=True).next_global_batch, k)
        if name in theirs:
            cases[name, "DeepSpeed"] = batches(theirs[name].get_next_global_batch, k)
    times = interleaved(cases, a.rounds)
    shutil.rmtree(work)
    print(f"sampler: {N:,} samples, global batch {G}, ms per global batch; " + stated("cpu", a.threads, a.rounds, 1))
    W = (-40, 26, 26, 7)
    row(W, "", "ours", "DeepSpeedDataSampler", "ratio")
    for name, (_, k) in entries.items():
        ours, ds = times[name, "ours"], times.get((name, "DeepSpeed"))
        ratio = f"{statistics.median(ds) / statistics.median(ours):.1f}x" if ds else ""
        row(W, name, med_range(ours, 1000 / k), med_range(ds, 1000 / k) if ds else "-", ratio)


# -----------------------------------------------------------------------------
# random-LTD


def bench_ltd(args):
    """Training-step time (forward + backward) with random-LTD at several kept ratios vs the FLOPs it saves:
    efficiency = (1 - t_ltd / t_dense) / (1 - flops_ltd / flops_dense), 1.0 when the wall clock falls exactly as
    much as the counted FLOPs (the paper: about 0.77 on GPUs). Eager and (default on CUDA) compiled rows; GPT-2
    small in bf16 on CUDA, a small model on CPU. Returns {r: (time ratio, FLOP ratio)} of the first mode."""
    device, ctx, where = device_autocast()
    shape = (12, 12, 768, 1024, 16, 50304) if device == "cuda" else (12, 6, 384, 512, 4, 257)
    names = ("n_layer", "n_head", "n_embd", "block_size", "batch_size", "vocab_size")
    a = setup("ltd", args, **dict(zip(names, shape)),
              ratios=("0.75,0.5,0.25", "kept ratios r/T to measure"), iters=6,
              modes=("eager,compiled" if device == "cuda" else "eager", "eager and/or compiled"),
              threads=torch.get_num_threads() if device == "cuda" else 1)
    torch.manual_seed(0)
    T = a.block_size
    config = GPTConfig(block_size=T, vocab_size=a.vocab_size, n_layer=a.n_layer, n_head=a.n_head, n_embd=a.n_embd)
    model = GPT(config).to(device)
    x = torch.randint(0, a.vocab_size, (a.batch_size, T + 1), device=device)
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
    times = interleaved(cases, a.iters, warmup=2, sync=torch.cuda.synchronize if device == "cuda" else lambda: None)
    med = {c: statistics.median(t) for c, t in times.items()}
    print(f"random-LTD, {a.n_layer} layers (dropping {len(model.ltd_layers)}), n_embd {a.n_embd}, T {T}, "
          f"batch {a.batch_size}, vocab {a.vocab_size}, " + stated(where, a.threads, a.iters, 2))
    W = (8, 8, 5, 22, 10, 10, 10)
    row(W, "mode", "kept r/T", "r", "ms/step", "time ratio", "FLOP ratio", "efficiency")
    for m, k in cases:
        tr, fr = med[m, k] / med[m, T], flops[k] / flops[T]
        eff = (1 - tr) / (1 - fr) if k < T else float("nan")
        row(W, m, f"{k / T:.2f}", k, med_range(times[m, k], 1000), f"{tr:.3f}", f"{fr:.3f}", f"{eff:.2f}")
    for m in modes:
        print(f"{m}: dense step {flops[T] / med[m, T] / 1e12:.2f} TFLOP/s achieved (counted matmul + attention FLOPs)")
    first = next(iter(modes))
    return {k: (med[first, k] / med[first, T], flops[k] / flops[T]) for k in keeps}  # r -> (time ratio, FLOP ratio)


# -----------------------------------------------------------------------------
# dense training step: ours vs nanoGPT's model at the same config


def bench_dense(args):
    """Tokens/s of a full training step (forward, backward, clip, AdamW) for our GPT and, given its model.py,
    nanoGPT's GPT: same config, same batches, same optimizer settings. Returns {name: median seconds}."""
    device, ctx, where = device_autocast()
    a = setup("dense", args, nanogpt=("", "path to karpathy/nanoGPT's model.py (not shipped here)"), n_layer=4,
              n_head=4, n_embd=128, block_size=128, batch_size=16, iters=30,
              threads=torch.get_num_threads() if device == "cuda" else 1)
    shape = dict(block_size=a.block_size, vocab_size=257, n_layer=a.n_layer, n_head=a.n_head, n_embd=a.n_embd,
                 dropout=0.0, bias=False)
    models = {"ours (model.py)": GPT(GPTConfig(**shape))}
    if a.nanogpt:
        spec = importlib.util.spec_from_file_location("nanogpt_model", a.nanogpt)
        ref = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(ref)
        models[f"nanoGPT ({a.nanogpt})"] = ref.GPT(ref.GPTConfig(**shape))
    gen = torch.Generator().manual_seed(0)
    xs = torch.randint(0, 257, (4, a.batch_size, a.block_size + 1), generator=gen).to(device)  # (4, B, T+1)
    batches = [(b[:, :-1].contiguous(), b[:, 1:].contiguous()) for b in xs]  # as nanoGPT's get_batch makes them

    def step(model, opt, xy):
        with ctx:
            _, loss = model(*xy)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)

    cases = {}  # each model cycles through the same 4 batches
    for name, model in models.items():
        opt = model.to(device).train().configure_optimizers(0.1, 1e-3, (0.9, 0.99), device)
        cases[name] = lambda model=model, opt=opt, it=itertools.cycle(batches): step(model, opt, next(it))
    times = interleaved(cases, a.iters, warmup=3, sync=torch.cuda.synchronize if device == "cuda" else lambda: None)
    med = {name: statistics.median(t) for name, t in times.items()}
    print(f"dense training step: {a.n_layer} layers, n_embd {a.n_embd}, T {a.block_size}, batch {a.batch_size}, "
          + stated(where, a.threads, a.iters, 3))
    W = (-58, 22, 10, 8)
    row(W, "", "ms/step", "tok/s", "vs ours")
    for name, t in med.items():
        row(W, name[:58], med_range(times[name], 1000), f"{a.batch_size * a.block_size / t:,.0f}",
            f"{med['ours (model.py)'] / t:.3f}x")
    if not a.nanogpt:
        print("(pass --nanogpt=path/to/nanoGPT/model.py to time nanoGPT's model beside ours)")
    return med


# -----------------------------------------------------------------------------
# data preparation

PREPARE_CHILD = """import os, sys, time
sys.path.insert(0, sys.argv[2])
import data
print('imported', flush=True)
input()  # the parent has read our memory after imports: go
t0 = time.perf_counter()
data.prepare([os.path.join(sys.argv[1], 'src')], os.path.join(sys.argv[1], 'out'), block_size=128, verbose=False)
print(time.perf_counter() - t0, flush=True)"""


def rss_anon_kb(pid):
    """A process's anonymous resident memory (no page cache, no mapped files) in kB; 0 once it has exited."""
    try:
        with open(f"/proc/{pid}/status") as f:
            return int(f.read().split("RssAnon:")[1].split()[0])
    except (OSError, IndexError):
        return 0


def bench_prepare(args):
    """data.prepare in a child process on copies of this Python's standard library (each file with a unique first
    line, so none is a duplicate): peak RssAnon (sampled every 5 ms, above its level after imports) and input MB/s."""
    a = setup("prepare", args, sizes_mb="30,300,1000",
              data_py_dir=(os.path.dirname(os.path.abspath(__file__)), "time the data.py in this directory"))
    root = sysconfig.get_paths()["stdlib"]
    files = [os.path.join(d, f) for d, _, names in os.walk(root) if "site-packages" not in d
             for f in names if f.endswith(".py")]
    W = (9, 7, 16, 8, 6)
    row(W + (-1,), "input MB", "files", "peak RssAnon MB", "seconds", "MB/s", f"  {a.data_py_dir}/data.py")
    for mb in map(float, a.sizes_mb.split(",")):
        work, size, k = tempfile.mkdtemp(prefix="bench_prepare_"), 0, 0
        os.makedirs(os.path.join(work, "src"))
        try:
            while size < mb * 1e6:  # copy k: file k % len(files), with a unique first line
                with open(os.path.join(work, "src", f"{k}.py"), "wb") as f:
                    size += f.write(f"# copy {k}\n".encode() + open(files[k % len(files)], "rb").read())
                k += 1
            child = subprocess.Popen([sys.executable, "-c", PREPARE_CHILD, work, a.data_py_dir], text=True,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE)
            child.stdout.readline()  # it has imported data.py and waits for us
            base = peak = rss_anon_kb(child.pid)
            child.stdin.write("\n")
            child.stdin.flush()
            while child.poll() is None:
                peak = max(peak, rss_anon_kb(child.pid))
                time.sleep(0.005)
            seconds = float(child.stdout.readline())
        finally:
            shutil.rmtree(work)
        row(W, f"{size / 1e6:.0f}", f"{k:,}", f"{(peak - base) / 1024:.1f}", f"{seconds:.1f}",
            f"{size / 1e6 / seconds:.0f}")


# -----------------------------------------------------------------------------


def main(argv=None):
    benches = {"analyzer": bench_analyzer, "sampler": bench_sampler, "ltd": bench_ltd, "dense": bench_dense,
               "prepare": bench_prepare}
    argv = sys.argv[1:] if argv is None else argv
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("what", choices=benches)
    benches[p.parse_args(argv[:1]).what](argv[1:])  # the rest are the benchmark's own options (bench.py ltd --help)


if __name__ == "__main__":
    main()
