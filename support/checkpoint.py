"""
The run directory: one lock per run, checkpoints written atomically with a checksum, and resume
checks.

Follows nanoGPT's out_dir/ckpt.pt (torch.save of a dict; `torch.load` reads our files too).
save() and resume() stand side by side: every part's state_dict (model, optimizer, scaler,
sampler), the loop's state, every rank's RNG states, and the settings a resume must match. What is
on disk is whole, ours, and matches the run that resumes it:

    file = torch.save(ckpt) bytes + SHA-256 of those bytes (32 bytes)

But:
- a truncated, bit-flipped, empty or foreign file is one clear error, never a traceback or a
  silently wrong model (torch.load alone accepts many bit flips);
- a second trainer on the same out_dir, or a fresh run over an existing checkpoint, is refused
  (DeepSpeed and nanoGPT overwrite it silently);
- a resume compares the settings that shape the run (corpus fingerprint, model, batch, seed,
  schedules, LR horizon, optimizer) and names every one that changed; another device or precision
  is allowed and said: the optimizer's fused kernels and the generators follow the new device.
"""

import contextlib
import hashlib
import io
import os
import shlex
from dataclasses import asdict, fields, replace

import torch
import torch.distributed as dist

try:
    import fcntl  # Unix: a lock that dies with its holder
except ImportError:  # Windows: the lock file's exclusive creation is the lock
    fcntl = None

from support.files import atomic_write


def save_checkpoint(path, ckpt):
    """torch.save + a 32-byte SHA-256 of it at the end (torch.load still reads the file), written
    atomically."""
    buf = io.BytesIO()
    torch.save(ckpt, buf)
    blob = buf.getvalue()
    try:
        atomic_write(path, lambda f: f.write(blob + hashlib.sha256(blob).digest()))
    except OSError as e:
        raise ValueError(f"could not write checkpoint {path} ({e.strerror or e}); "
                         "the previous one is intact; "
                         "free some space or pick another --out_dir") from None


def load_checkpoint(path):
    """The checkpoint at path, on the CPU (load_state_dict moves each part to its device); one line
    if damaged."""
    if not os.path.isfile(path):
        raise ValueError(f"--resume but no checkpoint at {path}; "
                         "run without --resume first or fix --out_dir")
    blob = open(path, "rb").read()
    if len(blob) < 32 or hashlib.sha256(blob[:-32]).digest() != blob[-32:]:
        raise ValueError(f"{path} is damaged or not a checkpoint of train.py (checksum mismatch); "
                         "restore a copy, or start afresh with --overwrite")
    return torch.load(io.BytesIO(blob[:-32]), map_location="cpu", weights_only=False)


def save(path, parts, state, gen, rank, settings, cfg, where):
    """Every rank's RNG states gathered (a collective), then rank 0 writes the checkpoint: each
    part's state_dict (parts: {name: object with state_dict}), the loop's state, the RNGs, the
    settings a resume must match, the config, and where it ran: "cpu (float32)", "cuda
    (bfloat16)", whose first word says whether there is a CUDA generator to save."""
    mine = {"torch": torch.get_rng_state(), "ltd": gen.get_state().cpu(),
            "cuda": torch.cuda.get_rng_state() if where.startswith("cuda") else None}
    rngs = [mine]  # under torchrun replaced by every rank's, in rank order
    if dist.is_initialized():
        rngs = [None] * dist.get_world_size()
        dist.all_gather_object(rngs, mine)
    if rank == 0:
        state_dicts = {k: p.state_dict() for k, p in parts.items()}
        save_checkpoint(path, {**state_dicts, "state": dict(state), "rng": rngs,
                               "settings": settings, "config": asdict(cfg), "where": where})


def resume(ckpt, parts, settings, gen, rank, world_size, where, path, notes):
    """The inverse of save(), from the checkpoint ckpt (a dict) -> the loop's state: refuses other
    settings; another world size, device or precision is allowed and said in notes."""
    check_resume(ckpt["settings"], settings, path)
    # subtle: fused/foreach/capturable follow this device, not the saver's
    for g, mine in zip(ckpt["optimizer"]["param_groups"], parts["optimizer"].param_groups):
        g.update({k: mine[k] for k in ("fused", "foreach", "capturable") if k in mine})
    for k, p in parts.items():
        p.load_state_dict(ckpt[k])
    # subtle: on another world size, resume goes on, not bit-exactly
    rng = ckpt["rng"][rank % len(ckpt["rng"])]
    torch.set_rng_state(rng["torch"])
    if rng["ltd"].numel() == gen.get_state().numel():  # 16 bytes on CUDA, 5,056 on the CPU
        gen.set_state(rng["ltd"])
    if where.startswith("cuda") and rng["cuda"] is not None:
        torch.cuda.set_rng_state(rng["cuda"])
    if len(ckpt["rng"]) != world_size or ckpt["where"] != where:
        notes.append(f"the checkpoint was written by {len(ckpt['rng'])} rank(s) "
                     f"on {ckpt['where']}, this run has {world_size} on {where}: "
                     "the same batches go on, but dropout and random-LTD draw anew")
    eff = ckpt["state"]["layer_tokens"] / ckpt["config"]["n_layer"]
    notes.insert(0, f"resumed from {path} at iter {ckpt['state']['iter_num']}, "
                    f"{eff:,.0f} effective tokens")
    return dict(ckpt["state"])


def resume_command(out_dir):
    """The command line that continues the run in out_dir, as it was launched:
    out_dir out-wiki -> python train.py --resume --out_dir=out-wiki; under torchrun with 2 ranks on
    one machine -> torchrun --standalone --nproc_per_node=2 train.py --resume --out_dir=out-wiki."""
    args = f"train.py --resume --out_dir={shlex.quote(out_dir)}"
    if "RANK" not in os.environ:
        return f"python {args}"
    local, world = int(os.environ["LOCAL_WORLD_SIZE"]), int(os.environ["WORLD_SIZE"])
    nodes = "--standalone" if world == local else f"--nnodes={world // local} <rendezvous flags>"
    return f"torchrun {nodes} --nproc_per_node={local} {args}"


# flags that may differ on --resume: where and how this process runs and what it prints
FREE = {"out_dir", "data_dir", "index_dir", "resume", "overwrite", "eval_interval", "eval_samples",
        "log_interval", "save_checkpoint", "sample_tokens", "threads", "compile", "device", "dtype"}
BUDGET = ("max_iters", "max_tokens")  # may differ too: only the stop moves


def resumed_config(saved, cfg, given, path):
    """The config of a --resume -> (config, notes): the checkpoint's (saved: its config as a dict),
    with the flags given on the command line (given: their names; None = every field of cfg) where
    they may differ. Any other flag given must agree with the checkpoint: one line names each."""
    merged, changed, notes = {}, [], []
    for f in fields(cfg):
        old, new = saved.get(f.name, getattr(cfg, f.name)), getattr(cfg, f.name)
        taken = given is None or f.name in given
        if taken and old != new and f.name not in FREE and f.name not in BUDGET:
            changed.append(f"--{f.name} {old} -> {new}")
        merged[f.name] = new if taken else old
    if changed:
        raise ValueError(f"--resume from {path} would change {', '.join(changed)}; "
                         "drop those flags to go on with the checkpoint's settings, "
                         "or start a new --out_dir")
    for k in BUDGET:
        if merged[k] != saved.get(k, merged[k]):
            notes.append(f"resuming with {k} {saved[k]} -> {merged[k]}: only the stop moves; "
                         "the curricula, the kept length and the LR schedule stay as checkpointed "
                         "(past its end, min_lr)")
    return replace(cfg, **merged), notes


def flatten(d, prefix=""):
    """{"a": {"b": 1}, "c": [2]} -> {"a.b": 1, "c": [2]}: the leaves of nested settings, by dotted
    name."""
    out = {}
    for k, v in (d or {}).items():
        out.update(flatten(v, f"{prefix}{k}.") if isinstance(v, dict) and v else {prefix + k: v})
    return out


def check_corpus(saved, corpus, path):
    """One line if the corpus (its content hash) is not the one the checkpoint trained on; train.py
    asks before it builds a curriculum index for it."""
    if saved["corpus"] != corpus:
        raise ValueError(f"--resume from {path}: this --data_dir holds another corpus than the one "
                         "the checkpoint trained on "
                         f"(content {saved['corpus'][:8]} -> {corpus[:8]}); "
                         "pass the checkpoint's data, or start a new --out_dir")


def check_resume(saved, settings, path):
    """One line naming every setting that differs between the checkpoint and this run."""
    check_corpus(saved, settings["corpus"], path)
    old, new = flatten(saved), flatten(settings)
    changed = [f"{k} {old.get(k)!r:.40} -> {new.get(k)!r:.40}"
               for k in sorted(old.keys() | new.keys()) if old.get(k) != new.get(k)]
    if changed:
        raise ValueError(f"--resume from {path} would change the run: {'; '.join(changed)}; "
                         "pass the checkpoint's settings again, or start a new --out_dir")


@contextlib.contextmanager
def run_dir(cfg):
    """Hold out_dir/.lock while the run lasts and refuse to replace a checkpoint by accident; leave
    nothing behind but checkpoints (the lock goes, and so do directories the run made and left
    empty)."""
    if os.path.exists(cfg.out_dir) and not os.path.isdir(cfg.out_dir):
        raise ValueError(f"--out_dir={cfg.out_dir} is a file; pick a directory")
    made = []  # the directories makedirs creates, deepest first
    d = cfg.out_dir
    while d and not os.path.exists(d):
        made.append(d)
        d = os.path.dirname(d)
    os.makedirs(cfg.out_dir, exist_ok=True)
    lock = os.path.join(cfg.out_dir, ".lock")
    fd = take_lock(lock)
    try:
        if fd is None:
            crashed = "" if fcntl else f" (if none is, a crashed run left {lock}: remove it)"
            raise ValueError(f"another trainer is running in --out_dir={cfg.out_dir}{crashed}; "
                             "wait for it or pick another --out_dir")
        if (not cfg.resume and not cfg.overwrite and cfg.save_checkpoint
                and os.path.exists(os.path.join(cfg.out_dir, "ckpt.pt"))):
            raise ValueError(f"{cfg.out_dir}/ckpt.pt exists; continue it with --resume, "
                             "pick another --out_dir, or replace it with --overwrite")
        yield
    finally:
        if fd is not None and fcntl:
            os.remove(lock)  # while still holding it: a trainer waiting on this file gets nothing
            os.close(fd)
        elif fd is not None:
            os.close(fd)  # subtle: Windows removes no open file
            os.remove(lock)
        for d in made:
            if os.listdir(d):
                break
            os.rmdir(d)


def take_lock(path):
    """-> the descriptor of the lock file at path, now held, or None if another trainer holds it.
    With fcntl (Unix) the lock dies with its holder; without it (Windows) creating the file
    exclusively is the lock, and a run that crashed leaves it behind."""
    if fcntl is None:
        try:
            return os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            return None
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        if os.fstat(fd).st_ino == os.stat(path).st_ino:  # subtle: not a file its holder removed
            return fd
    except (BlockingIOError, FileNotFoundError):
        pass
    os.close(fd)
    return None
