"""
Benchmarks that print ratios measured side by side in one run, as tables
(`python bench.py ltd --help`: options).

    python bench.py analyzer   # our analyzer vs DeepSpeed's DataAnalyzer (when importable;
                               # else our rows only)
    python bench.py sampler    # our sampler vs DeepSpeed's DeepSpeedDataSampler (when importable)
    python bench.py ltd        # random-LTD step time vs the FLOP ratio (efficiency);
                               # on a GPU, GPT-2 small:
        --n_embd=768 --n_head=12 --block_size=1024 --batch_size=16 --vocab_size=50304
        --modes=eager,compiled
    python bench.py dense      # our dense training step vs nanoGPT's model
                               # (--nanogpt=path/to/model.py)
    python bench.py prepare    # data.py's peak memory on 30 and 150 MB of text: MB per extra MB
    python bench.py scale --tokens=2e9  # an OpenWebText-shaped corpus: index build, start,
                               # batch fetch, RssFile (bench_scale's docstring)

Each table states device, torch version and threads, and the median (min-max) of rounds run
interleaved (ours, theirs, ours, ...) after warm-up ones, so that drift in machine load hits every
case alike. Each benchmark has its own options (with --threads, torch's threads, pinned).
"""
import itertools
import json
import os
import runpy
import shutil
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time
from contextlib import nullcontext
from dataclasses import make_dataclass

import numpy as np
import torch
from torch.utils.flop_counter import FlopCounterMode

import analyzer
import data
from model import GPT, GPTConfig
from sampler import CurriculumSampler
from services import index
from support import launch as cli
from model import compile_model
from support.launch import resolve_device

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # the repository
DEVICE = ("auto", "auto (cuda:0 when torch sees a GPU, else cpu), cpu, cuda or cuda:N")
ROUNDS = "timed rounds each, interleaved, after warm-up ones"


# --- shared: options, interleaved rounds, median (min-max) cells, rows, device, DeepSpeed --------


def options(what, argv, **fields):
    """`bench.py what`'s options from name=(default, help) and --threads, by cli.parse;
    pins torch's threads."""
    threads_help = "torch intra-op threads (more than the free cores slows the cases unevenly)"
    fields.setdefault("threads", (1, threads_help))
    field_specs = [(name, type(d), cli.opt(d, h)) for name, (d, h) in fields.items()]
    a = cli.parse(make_dataclass(f"{what}_options", field_specs), argv, f"bench.py {what}")
    torch.set_num_threads(a.threads)
    return a


# the end of each table's title: what ran (threads as options pinned)
def stated(rounds, warmup=1, where="cpu"):
    return (f"{where}, torch {torch.__version__}, {torch.get_num_threads()} thread(s); "
            f"median (min-max) of {rounds} interleaved rounds after {warmup} warm-up")


def interleaved(cases, rounds, warmup=1, sync=lambda: None):
    """{name: fn} -> {name: [seconds of each timed round]}: a, b, a, b, ... with `sync` before
    each clock read."""
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
    return f"{statistics.median(ts) * scale:.4g} ({min(ts) * scale:.4g}-{max(ts) * scale:.4g})"


def row(widths, *cells):  # right-aligned cells, left-aligned where the width is negative
    print(" ".join(f"{c:<{-w}}" if w < 0 else f"{c:>{w}}" for c, w in zip(cells, widths)))


def table(times, scale, unit, work, work_unit):
    """A row per case, ours first: time (times scale), work per second, time / ours."""
    W = (-34, 28, 16, 12)
    ours = statistics.median(next(iter(times.values())))
    row(W, "", unit, f"{work_unit}/s", "time / ours")
    for name, ts in times.items():
        m = statistics.median(ts)
        row(W, name, med_range(ts, scale), f"{work / m:,.0f}", f"{m / ours:.3f}")


def on_device(name):
    """--device -> (device, autocast, sync before a clock read, label):
    bf16 autocast on CUDA, fp32 on CPU."""
    device = resolve_device(name, torch.cuda.device_count())  # cpu or cuda:N, always with an index
    if device == "cpu":
        return device, nullcontext(), lambda: None, "cpu fp32"
    return (device, torch.autocast("cuda", dtype=torch.bfloat16),
            lambda: torch.cuda.synchronize(device), f"{torch.cuda.get_device_name(device)} bf16")


def deepspeed_init(port):
    """Import DeepSpeed and start the one-process Gloo group its data pipeline needs;
    None if not installed."""
    try:
        import deepspeed.comm.torch  # binds deepspeed too
    except ImportError as e:
        print(f"DeepSpeed is not importable ({e.__class__.__name__}: {e}): "
              "only our rows are printed")
        return None
    group_env = dict(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK="0", LOCAL_RANK="0",
                     WORLD_SIZE="1")
    for k, v in group_env.items():
        os.environ.setdefault(k, v)
    # its CPU shared-memory op crashes here; plain Gloo is enough
    deepspeed.comm.torch.build_shm_op = lambda: None
    # DataAnalyzer and DeepSpeedDataSampler synchronize with barriers
    deepspeed.init_distributed(dist_backend="gloo")
    return deepspeed


# --- analyzer: ours vs DeepSpeed's DataAnalyzer ---------------------------------------------------
def deepspeed_analyzer(bin_path, T, num_workers, out):
    """vocab_rarity of every sample of bin_path by DeepSpeed's DataAnalyzer, into out, in two passes
    as Megatron-DeepSpeed's analyze_data (count tokens, then score samples). It gets what a tuned
    user would give it: each batch of 1000 samples as one (B, T+1) tensor, not 1000 single samples
    for its DataLoader to collate."""
    from deepspeed.runtime.data_pipeline.data_sampling.data_analyzer import DataAnalyzer
    from deepspeed.runtime.data_pipeline.data_sampling.indexed_dataset import MMapIndexedDataset
    windows = data.SampleWindows(bin_path, T)
    V = json.load(open(os.path.join(os.path.dirname(bin_path), "meta.json")))["vocab_size"]

    class Batches(torch.utils.data.Dataset):
        def __len__(self):
            return len(windows)

        def __getitems__(self, ids):  # its DataLoader asks for batch_size consecutive ids at a time
            assert ids[-1] - ids[0] == len(ids) - 1
            # (B, T+1) int64, one read
            return torch.from_numpy(windows.get_range(ids[0], ids[-1] + 1))

    kw = dict(batch_size=1000, num_threads=num_workers, num_threads_reduce=num_workers,
              collate_fn=lambda b: b, metric_dtypes=[torch.int64], save_path=out)
    DataAnalyzer(Batches(), metric_names=["total_vocab_freq"],
                 metric_types=["accumulate_value_over_samples"],
                 metric_functions=[lambda b: torch.bincount(b.flatten(), minlength=V)],
                 **kw).run_map_reduce()
    freq = MMapIndexedDataset(f"{out}/total_vocab_freq/total_vocab_freq_metric_value",
                              skip_warmup=True)
    # subtle: copy while the mmap is open
    counts = np.maximum(np.array(freq[0], dtype=np.float64), 1)
    neg_log_p = torch.from_numpy(-np.log(counts / counts.sum()))
    DataAnalyzer(Batches(), metric_names=["vocab_rarity"], metric_types=["single_value_per_sample"],
                 metric_functions=[lambda b: neg_log_p[b].sum(1).to(torch.int64)],
                 **kw).run_map_reduce()


def bench_analyzer(args):
    """Seconds to score and sort the same first num_samples samples:
    ours, and DeepSpeed's when importable."""
    a = options("analyzer", args, data_dir=("", 'a prepared corpus; "" = the standard library'),
                block_size=(128, "T"), num_samples=(50000, "analyze the first this many samples"),
                num_workers=(1, "our worker processes, and DeepSpeed's num_threads"),
                rounds=(5, ROUNDS))
    data_dir = data.corpus_dir(a.data_dir)
    T = a.block_size
    work = tempfile.mkdtemp(prefix="bench_analyzer_")
    src = data.SampleWindows(os.path.join(data_dir, "train.bin"), T)
    n = min(a.num_samples, len(src))
    bin_path = os.path.join(work, "train.bin")
    # the same first n samples, for both analyzers
    np.asarray(src.data[: n * T + 1]).tofile(bin_path)
    shutil.copy(os.path.join(data_dir, "meta.json"), work)
    # each round into a fresh directory
    cases = {"ours: counts, rarity, sort": lambda: index.build_index(
        bin_path, T, ["vocab_rarity"], tempfile.mkdtemp(dir=work), a.num_workers, verbose=False)}
    if deepspeed_init(29533):
        cases["DeepSpeed DataAnalyzer, 2 passes"] = lambda: deepspeed_analyzer(
            bin_path, T, a.num_workers, tempfile.mkdtemp(dir=work))
    times = interleaved(cases, a.rounds)
    print(f"analyzer: vocab_rarity of {n:,} samples of {T}+1 tokens, {a.num_workers} worker(s), "
          + stated(a.rounds))
    table(times, 1, "seconds", n * (T + 1), "tokens")
    shutil.rmtree(work)


# --- sampler: ours vs DeepSpeedDataSampler --------------------------------------------------------
def deepspeed_sampler(deepspeed, entry, index_to_sample, work, N, G):
    """-> next global batch of DeepSpeedDataSampler under one curriculum_metrics `entry`, the sorted
    ids written under work in its layout."""
    from deepspeed.runtime.data_pipeline.data_sampling import utils
    from deepspeed.runtime.data_pipeline.data_sampling.data_sampler import DeepSpeedDataSampler
    # DeepSpeed's layout: 100 rows of sorted ids
    path = os.path.join(work, "m_index_to_sample_percentile_merged")
    builder = utils.create_mmap_dataset_builder(path, np.int64)
    for chunk in np.array_split(index_to_sample, 100):
        builder.add_item(torch.from_numpy(chunk))
    utils.close_mmap_dataset_builder(builder, path)
    metric = dict(entry, index_to_sample_path=path, index_to_metric_path=path,
                  clustering_type="schedule_based")
    cl = {"enabled": True, "data_cluster_path": f"{work}/clusters",
          "curriculum_metrics": {"m": metric}}
    ds_config = {"seed": 0, "data_sampling": {"num_epochs": 1, "curriculum_learning": cl}}
    sampler = DeepSpeedDataSampler(ds_config, N, G, 0, 1, deepspeed.comm.get_world_group(), 1, 0)
    return sampler.get_next_global_batch


def bench_sampler(args):
    """ms per global batch on one percentile index of a random metric: a steady pool, and one
    growing each step."""
    a = options("sampler", args, num_samples=(1_000_000, "N, samples in the index"),
                global_batch_size=(512, "ids per global batch"),
                steps=(200, "batches per round in the steady case"), rounds=(6, ROUNDS))
    N, G = a.num_samples, a.global_batch_size
    # a random metric's sorted index
    index_to_sample = np.random.default_rng(0).permutation(N).astype(np.int64)
    # each round draws the next `grow` steps of one run that admits 1% more per step
    grow = 98 // (a.rounds + 1)
    linear = {"difficulty_type": "percentile", "min_difficulty": 1, "max_difficulty": 100,
              "schedule_type": "fixed_linear",
              "schedule_config": {"total_curriculum_step": 99, "difficulty_step": 1}}
    steady = dict(linear, min_difficulty=50,
                  schedule_config={"total_curriculum_step": 10**9, "difficulty_step": 1})
    # ids only: no tokens are read
    ids = type("Ids", (), {"__len__": lambda self: N, "block_size": 1})()
    index = {"m": {"index_to_sample": index_to_sample, "index_to_metric": None}}
    deepspeed = deepspeed_init(29534)
    work = tempfile.mkdtemp(prefix="bench_sampler_")
    for pool, entry, k in (("steady pool (percentile 50)", steady, a.steps),
                           (f"pool growing by {N // 100:,} ids per step", linear, grow)):
        sampler, steps = CurriculumSampler(ids, G, {"m": entry}, index), itertools.count()
        # the step goes on across rounds, as DeepSpeed's own counter does
        draws = {"ours: CurriculumSampler": lambda s=sampler, c=steps: s.global_ids(next(c))}
        if deepspeed:
            draws["DeepSpeedDataSampler"] = deepspeed_sampler(deepspeed, entry, index_to_sample,
                                                              tempfile.mkdtemp(dir=work), N, G)
        rounds = {who: lambda draw=draw, k=k: [draw() for _ in range(k)]  # k batches
                  for who, draw in draws.items()}
        print(f"sampler, {pool}: {N:,} samples, global batch {G}, {k} batches a round; "
              + stated(a.rounds))
        table(interleaved(rounds, a.rounds), 1000 / k, "ms per batch", G * k, "ids")
    shutil.rmtree(work)


# --- random-LTD: step time vs FLOPs ---------------------------------------------------------------
def bench_ltd(args):
    """Training-step time (forward + backward) with random-LTD at several kept ratios vs the FLOPs
    it saves: efficiency = (1 - t_ltd / t_dense) / (1 - flops_ltd / flops_dense), 1.0 when the
    wall clock falls exactly as much as the counted FLOPs (the paper: about 0.77 on GPUs).
    Returns {r: (time ratio, FLOP ratio)}, first mode."""
    a = options("ltd", args, n_layer=(12, "transformer blocks"), n_head=(6, "attention heads"),
                n_embd=(384, "residual width"), block_size=(512, "T"), batch_size=(4, "B"),
                vocab_size=(257, "V"), modes=("eager", "eager and/or compiled"),
                ratios=("0.75,0.5,0.25", "kept ratios r/T to measure"), iters=(6, ROUNDS),
                device=DEVICE)
    device, ctx, sync, where = on_device(a.device)
    torch.manual_seed(0)
    T, B = a.block_size, a.batch_size
    model = GPT(GPTConfig(block_size=T, vocab_size=a.vocab_size, n_layer=a.n_layer, n_head=a.n_head,
                          n_embd=a.n_embd)).to(device)
    x = torch.randint(0, a.vocab_size, (B, T + 1), device=device)
    gen = torch.Generator(device=device).manual_seed(0)
    keeps = [T] + [max(1, int(T * float(r))) for r in a.ratios.split(",")]  # T = dense
    # (dense, LTD) nets per mode; compiled as train.py does: a dense run static, an LTD run with
    # symbolic shapes
    modes = {}
    for m in a.modes.split(","):
        if m == "compiled":
            modes[m] = (compile_model(model, False), compile_model(model, True))
        else:
            modes[m] = (model, model)

    def step(nets, keep):
        ltd_idx = model.sample_ltd_indices(B, T, keep, gen)  # drawn outside the compiled forward
        with ctx:
            _, loss = nets[keep < T](x[:, :-1], x[:, 1:], ltd_idx=ltd_idx)
        loss.backward()
        model.zero_grad(set_to_none=True)
    flops = {}
    for keep in keeps:
        with FlopCounterMode(display=False) as fc:
            step((model, model), keep)
        flops[keep] = fc.get_total_flops()
    cases = {(m, k): lambda m=m, k=k: step(modes[m], k) for m in modes for k in keeps}
    times = interleaved(cases, a.iters, 2, sync)
    med = {c: statistics.median(t) for c, t in times.items()}
    print(f"random-LTD, {a.n_layer} layers (dropping {len(model.ltd_layers)}), n_embd {a.n_embd}, "
          f"T {T}, batch {B}, vocab {a.vocab_size}, " + stated(a.iters, 2, where))
    W = (8, 8, 5, 22, 10, 10, 10, 10)
    row(W, "mode", "kept r/T", "r", "ms/step", "tokens/s", "time ratio", "FLOP ratio",
        "efficiency")
    for m, k in times:
        tr = med[m, k] / med[m, T]
        fr = flops[k] / flops[T]
        eff = f"{(1 - tr) / (1 - fr):.2f}" if k < T else "-"  # the dense row saves nothing
        row(W, m, f"{k / T:.2f}", k, med_range(times[m, k], 1000), f"{B * T / med[m, k]:,.0f}",
            f"{tr:.3f}", f"{fr:.3f}", eff)
    m = next(iter(modes))
    return {k: (med[m, k] / med[m, T], flops[k] / flops[T]) for k in keeps}


# --- dense training step: ours vs nanoGPT's model at the same config ------------------------------
def bench_dense(args):
    """A training step (forward, backward, clip, AdamW) of our GPT and nanoGPT's alike:
    {name: median seconds}."""
    a = options("dense", args,
                nanogpt=("", "path to karpathy/nanoGPT's model.py (not shipped here)"),
                n_layer=(4, "transformer blocks"), n_head=(4, "attention heads"),
                n_embd=(128, "residual width"), block_size=(128, "T"), batch_size=(16, "B"),
                vocab_size=(257, "V"), iters=(30, ROUNDS), device=DEVICE)
    device, ctx, sync, where = on_device(a.device)
    classes = {"ours (model.py)": (GPT, GPTConfig)}
    if a.nanogpt:
        ref = runpy.run_path(a.nanogpt)  # the module's globals
        classes["nanoGPT (--nanogpt)"] = (ref["GPT"], ref["GPTConfig"])
    else:
        print("no nanoGPT row: pass --nanogpt=path/to/nanoGPT/model.py for the comparison")
    gen = torch.Generator().manual_seed(0)
    x = torch.randint(0, a.vocab_size, (a.batch_size, a.block_size + 1), generator=gen)
    # as nanoGPT's get_batch makes them
    xy = x[:, :-1].contiguous().to(device), x[:, 1:].contiguous().to(device)

    def step(model, opt):  # as train.py's, with one micro-step
        with ctx:
            _, loss = model(*xy)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)

    cases = {}
    for name, (Model, Config) in classes.items():
        model = Model(Config(block_size=a.block_size, vocab_size=a.vocab_size, n_layer=a.n_layer,
                             n_head=a.n_head, n_embd=a.n_embd, dropout=0.0,
                             bias=False)).to(device).train()
        # "cuda": fused AdamW
        opt = model.configure_optimizers(0.1, 1e-3, (0.9, 0.99), device.split(":")[0])
        cases[name] = lambda model=model, opt=opt: step(model, opt)
    times = interleaved(cases, a.iters, warmup=3, sync=sync)
    print(f"dense training step: {a.n_layer} layers, n_embd {a.n_embd}, T {a.block_size}, "
          f"batch {a.batch_size}, " + stated(a.iters, 3, where))
    table(times, 1000, "ms/step", a.batch_size * a.block_size, "tokens")
    return {name: statistics.median(t) for name, t in times.items()}


# --- prepare: peak memory against input size ------------------------------------------------------
# subtle: VmHWM (this process's peak RSS), not ru_maxrss, which keeps the forking parent's size
PREPARE = """import sys
import data
meta = data.prepare([sys.argv[1]], sys.argv[2], verbose=False)
peak_kb = int(open("/proc/self/status").read().split("VmHWM:")[1].split()[0])
print(peak_kb / 1024, meta["n_documents"])"""


def stdlib_copies(src, mb):
    """Copies of the standard library's .py files in src, each under a unique first line (so none is
    a duplicate), until they hold mb MB -> (bytes, files). mb=0.01 -> about 10,000 bytes, 1 file."""
    root = sysconfig.get_paths()["stdlib"]
    files = sorted(os.path.join(d, f) for d, _, names in os.walk(root) if "site-packages" not in d
                   for f in names if f.endswith(".py"))
    os.makedirs(src)
    size = 0
    k = 0
    while size < mb * 1e6:  # copy k: file k % len(files)
        with open(files[k % len(files)], "rb") as f:
            text = f"# copy {k}\n".encode() + f.read()
        with open(os.path.join(src, f"{k}.py"), "wb") as f:
            size += f.write(text)
        k += 1
    return size, k


def bench_prepare(args):
    """Peak resident memory (Linux's VmHWM) of `python data.py SRC --out_dir=OUT`, as
    data.prepare in a fresh process, on two inputs of standard-library copies: MB of peak RSS
    per extra MB of input. Inputs below a few MB do not fill data.py's 1M-token buffers: use
    larger ones."""
    a = options("prepare", args, sizes_mb=("30,150", "the two input sizes in MB"),
                rounds=(3, ROUNDS))
    small, large = map(float, a.sizes_mb.split(","))
    work = tempfile.mkdtemp(prefix="bench_prepare_")
    env = {**os.environ, "OMP_NUM_THREADS": str(a.threads)}  # the child's numpy, as torch's here
    try:
        inputs = {mb: stdlib_copies(os.path.join(work, f"src{mb:g}"), mb) for mb in (small, large)}
        peaks = {mb: [] for mb in inputs}
        n_documents = {}
        for i in range(1 + a.rounds):  # interleaved: small, large, small, ...; round 0 warms up
            for mb in inputs:
                cmd = [sys.executable, "-c", PREPARE, os.path.join(work, f"src{mb:g}"),
                       os.path.join(work, "out")]
                out = subprocess.run(cmd, cwd=ROOT, env=env,
                                     check=True, capture_output=True, text=True).stdout
                peak_mb, n_documents[mb] = out.split()  # documents: a few copies are not UTF-8
                if i:
                    peaks[mb].append(float(peak_mb))
    finally:
        shutil.rmtree(work)
    print("prepare: peak RSS of data.prepare in a fresh process, on standard-library copies; "
          + stated(a.rounds))
    W = (9, 7, 10, 22)
    row(W, "input MB", "files", "documents", "peak RSS MB")
    for mb, (size, files) in inputs.items():
        row(W, f"{size / 1e6:.1f}", f"{files:,}", f"{int(n_documents[mb]):,}", med_range(peaks[mb]))
    extra_mb = (inputs[large][0] - inputs[small][0]) / 1e6
    per_mb = (statistics.median(peaks[large]) - statistics.median(peaks[small])) / extra_mb
    print(f"{per_mb:.3f} MB of peak RSS per extra MB of input (medians)")
    return {"inputs": inputs, "peaks": peaks, "per_mb": per_mb}




# --- scale: a corpus of OpenWebText's shape -------------------------------------------------------
V_OWT = 50257  # GPT-2 BPE's vocabulary, nanoGPT's OpenWebText
START = ["--vocab_size=50257", "--block_size=1024", "--batch_size=1", "--n_layer=1",
         "--n_head=1", "--n_embd=32", "--max_iters=1", "--log_interval=1", "--eval_samples=1",
         "--sample_tokens=0", "--save_checkpoint=false", "--cl_metric=vocab_rarity", "--device=cpu"]


def rss_file_mb():
    """This process's resident memory backed by files (mapped token files among them), in MB."""
    with open("/proc/self/status") as f:
        return int(f.read().split("RssFile:")[1].split()[0]) / 1024


def write_corpus(d, n_train, n_val, seed=0, chunk=1 << 24):
    """train.bin and val.bin of uniform uint16 ids below V_OWT in d, chunk tokens a write ->
    seconds."""
    t0 = time.time()
    rng = np.random.default_rng(seed)
    os.makedirs(d)
    for split, n in (("train", n_train), ("val", n_val)):
        with open(os.path.join(d, f"{split}.bin"), "wb") as f:
            for s in range(0, n, chunk):
                rng.integers(0, V_OWT, min(chunk, n - s), dtype=np.uint16).tofile(f)
    return time.time() - t0


def numpy_floor(bin_path, T, windows=32):
    """vocab_rarity of every window of bin_path in plain numpy, then its stable argsort -> values:
    pass 1 counts ids 1M at a time, pass 2 sums -ln p(u) over each window's T+1 tokens (its T,
    plus the next window's first), `windows` windows at a time (the sizes that ran fastest here)."""
    tokens = np.memmap(bin_path, dtype=np.uint16, mode="r")
    counts = np.zeros(1 << 16, dtype=np.int64)
    for s in range(0, len(tokens), 1 << 20):
        counts += np.bincount(tokens[s : s + (1 << 20)], minlength=1 << 16)
    neg_log_p = analyzer.unigram_neg_log_p(counts[:V_OWT])  # (V,)
    N = (len(tokens) - 1) // T
    values = np.empty(N)
    for s in range(0, N, windows):
        e = min(s + windows, N)
        v = neg_log_p[tokens[s * T : e * T + 1].astype(np.intp)]  # ((e - s) * T + 1,)
        values[s:e] = v[:-1].reshape(-1, T).sum(1) + v[T::T]  # (e - s,)
    np.argsort(values, kind="stable")
    return values


def timed_start(data_dir, out_dir, threads):
    """train.py START on data_dir in a fresh process, stdout a pipe -> (seconds to its first step,
    [(seconds, line)] up to it). Nothing makes its output unbuffered: it flushes what it prints."""
    cmd = [sys.executable, "train.py", f"--data_dir={data_dir}", f"--out_dir={out_dir}",
           f"--threads={threads}", *START]
    env = {**os.environ, "OMP_NUM_THREADS": str(threads)}
    env.pop("PYTHONUNBUFFERED", None)
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, cwd=ROOT, env=env, text=True, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT)
    lines, first = [], None
    for line in p.stdout:
        lines.append((time.perf_counter() - t0, line.rstrip()))
        if first is None and line.startswith("iter 1:"):
            first = lines[-1][0]
    if p.wait() or first is None:
        raise ValueError(f"train.py failed on {data_dir}: {lines[-1][1] if lines else ''}")
    return first, [x for x in lines if x[0] <= first]


def bench_scale(args):
    """`python bench.py scale --tokens=2e9`: what a run on an OpenWebText-sized corpus meets,
    measured on a synthetic corpus of nanoGPT's OpenWebText shape (uint16 ids below 50257,
    train.bin and val.bin, no meta.pkl; block size 1024), written in a temporary folder and removed
    at the end:

        1. the index build's rate (services/index.py) against a numpy floor: the same counts,
           window sums and stable sort in plain numpy, nothing written;
        2. train.py's first start on it (hash, index build), stdout a pipe: its lines, timed, and
           the longest silence before the first step;
        3. a start with the index built, to the first step, on it and on a small corpus;
        4. the batch fetch per step (sampler.next_batch, a map per batch);
        5. the resident memory backed by files (RssFile) after N steps of 16 x 1024.

    The synthetic ids are uniform: the rates and the memory do not depend on which ids occur.
    (Sections 4 and 5 measured against the held map of before in RESULTS.md, 8.)
    """
    a = options("scale", args, tokens=(2e9, "train tokens of the synthetic corpus"),
                small_tokens=(2e7, "train tokens of the small corpus a start is compared with"),
                num_workers=(1, "the index build's worker processes, ours and the floor's 1"),
                build_rounds=(3, "rounds of the build and the floor, interleaved"),
                start_rounds=(5, "rounds of the two starts, interleaved"),
                rounds=(5, "rounds of the fetch, interleaved"), batches=(200, "batches a round"),
                steps=(50, "steps of 16 x 1024 for the RssFile growth"),
                tmp=("", 'folder of the temporary corpora ("" = the system\'s)'),
                default_dir=("", 'the default corpus ("" = data/stdlib, prepared on first use)'))
    n_big, n_small = int(a.tokens), int(a.small_tokens)
    vals = {n: max(n // 2000, 1 << 16) for n in (n_big, n_small)}  # OpenWebText's val: 0.05%
    work_parent = a.tmp or tempfile.gettempdir()
    need = 2 * sum(n + vals[n] for n in vals) * 1.1 + (1 << 30)  # tokens, indexes, 1 GB spare
    free = shutil.disk_usage(work_parent).free
    if free < need:
        raise ValueError(f"bench.py scale needs {need / 1e9:.1f} GB free in {work_parent}, "
                         f"{free / 1e9:.1f} GB are; pass --tmp=DIR or fewer --tokens")
    default = os.path.join(data.corpus_dir(a.default_dir), "train.bin")
    work = tempfile.mkdtemp(prefix="bench_scale_", dir=work_parent)
    try:
        big, small = os.path.join(work, "big"), os.path.join(work, "small")
        secs = write_corpus(big, n_big, vals[n_big])
        write_corpus(small, n_small, vals[n_small], seed=1)
        print(f"scale: synthetic corpus of nanoGPT's OpenWebText shape in {work}: {n_big:,} train "
              f"+ {vals[n_big]:,} val tokens (uint16 ids < {V_OWT}, no meta.pkl), written in "
              f"{secs:.1f} s; block 1024; a small one of {n_small:,}; {os.cpu_count()} cores; "
              f"{stated(a.rounds)}", flush=True)
        scale_build(a, work, os.path.join(big, "train.bin"), n_big)
        scale_starts(a, work, big, small, n_big, n_small)
        scale_fetch(a, {f"{n_big:,} tokens": (os.path.join(big, "train.bin"), 1024),
                        f"{n_small:,} tokens": (os.path.join(small, "train.bin"), 1024),
                        "default corpus": (default, 128)}, n_big)
    finally:
        shutil.rmtree(work)


def scale_build(a, work, path, n):
    """Section 1: services/index.py's build_index against numpy_floor, and whether their values
    agree."""
    out, got = os.path.join(work, "index"), {}
    cases = {"ours: services.index.build_index": lambda: index.build_index(
                 path, 1024, ["vocab_rarity"], out, a.num_workers, False),
             "numpy floor (counts, sums, sort)": lambda: got.update(floor=numpy_floor(path, 1024))}
    times = interleaved(cases, a.build_rounds, warmup=0)
    built = index.load_index(out, 1024, ["vocab_rarity"])["vocab_rarity"]["sample_to_metric"]
    gap = np.abs(built - got["floor"])
    print(f"\n1. index build, vocab_rarity over {n:,} tokens, {a.num_workers} worker(s), "
          f"{a.build_rounds} round(s): seconds, tokens/s", flush=True)
    for name, ts in times.items():
        row((-34, 24, 14), name, med_range(ts), f"{n / statistics.median(ts):,.0f}")
    print(f"   the same values: max |ours - floor| = {float(gap.max()):.2g}", flush=True)


def scale_starts(a, work, big, small, n_big, n_small):
    """Sections 2 and 3: the first start's lines and its longest silence (the gap before a line);
    starts with the index built."""
    out = os.path.join(work, "out")
    first, lines = timed_start(big, out, a.threads)
    times = [0.0] + [t for t, _ in lines]
    gap, after = max((b - t, lines[k][1]) for k, (t, b) in enumerate(zip(times, times[1:])))
    print(f"\n2. first start on {n_big:,} tokens (hash, index build), stdout a pipe: first step "
          f"after {first:.1f} s; longest silence {gap:.1f} s (until: {after[:50]})")
    for t, line in lines:
        print(f"   {t:6.1f} s  {line[:110]}")
    timed_start(small, out, a.threads)  # its hash and index, then a warm start each
    starts = {n_big: [], n_small: []}
    for _ in range(a.start_rounds):
        for n, d in ((n_big, big), (n_small, small)):
            starts[n].append(timed_start(d, out, a.threads)[0])
    print(f"\n3. start with the index built, to the first step, {a.start_rounds} interleaved "
          f"rounds: seconds\n   python train.py --data_dir=D {' '.join(START)}")
    for n, ts in starts.items():
        row((-26, 24), f"   {n:,} tokens", med_range(ts))
    diff = statistics.median(starts[n_big]) - statistics.median(starts[n_small])
    print(f"   difference of the medians: {diff:+.2f} s")


def scale_fetch(a, corpora, n_big):
    """Sections 4 and 5: ms per sampler.next_batch(step) (16 rows) on each corpus {label: (windows
    path, T)}; RssFile growth (MB) over a.steps batches of 16 x 1024 on the big corpus, in the page
    cache and dropped from it first (posix_fadvise), as a corpus larger than RAM."""
    samplers = {label: CurriculumSampler(data.SampleWindows(path, T), 16, seed=0)
                for label, (path, T) in corpora.items()}
    steps = itertools.count()  # no curriculum: the step only goes on
    cases = {label: lambda s=s: [s.next_batch(next(steps)) for _ in range(a.batches)]
             for label, s in samplers.items()}
    times = interleaved(cases, a.rounds)
    print(f"\n4. batch fetch per step (sampler.next_batch, 16 rows, a map per batch), ms, "
          f"{a.rounds} interleaved rounds of {a.batches} batches")
    for label, (_, T) in corpora.items():
        row((-26, 5, 24), label, T, med_range(times[label], 1000 / a.batches))
    print(f"\n5. RssFile growth over {a.steps} steps of 16 x 1024 on {n_big:,} tokens, MB")
    path = corpora[f"{n_big:,} tokens"][0]
    for label in ("corpus in the page cache", "corpus dropped from the cache"):
        if label.endswith("dropped from the cache"):
            fd = os.open(path, os.O_RDONLY)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            os.close(fd)
        s = CurriculumSampler(data.SampleWindows(path, 1024), 16, seed=1)
        before = rss_file_mb()
        for t in range(a.steps):
            s.next_batch(t)
        row((-32, 10), label, f"{rss_file_mb() - before:.1f}")


def main(argv=None):
    benches = {"analyzer": bench_analyzer, "sampler": bench_sampler, "ltd": bench_ltd,
               "dense": bench_dense, "prepare": bench_prepare, "scale": bench_scale}
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] in ("-h", "--help"):  # say which there are
        print(f"usage: python bench.py {{{','.join(benches)}}} [--key=value ...]\n{__doc__}")
        return
    if argv[0] not in benches:
        sys.exit(f"error: no benchmark {argv[0]!r}; pick one of {', '.join(benches)} "
                 "(python bench.py --help)")
    try:
        benches[argv[0]](argv[1:])  # the rest are its own options (bench.py ltd --help)
    except ValueError as e:  # bad options, or a --device this machine lacks: one line, no traceback
        sys.exit(f"error: {e}")


if __name__ == "__main__":
    main()
