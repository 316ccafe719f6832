"""
How a run is launched: its command line, its device, its process group, its signals, its errors;
the same for python and torchrun.

Any dataclass becomes a command line (as nanochat, argparse instead of nanoGPT's exec
configurator): --key=value for every field, typed as declared, --help from each field's help text,
lower bounds and choices checked, unknown keys and bad values as one ValueError line.

Follows nanoGPT's DDP set-up (torchrun sets RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE; NCCL on
GPUs, Gloo on CPUs, so two-process runs are tested on a CPU) and what cluster schedulers expect:

    device = cuda:LOCAL_RANK with GPUs (auto or cuda), cuda:N as asked, else cpu   (always an index)
    SIGTERM or SIGINT -> stop after the step in progress, every rank after the same one,
                         checkpoint, exit 1
    an error -> one line on stderr, under torchrun once, from the first rank that met it,
                with its rank

But:
- what every rank needs on disk (the default corpus, a curriculum index) is built by rank 0, then by
  the first rank of any other machine that does not share rank 0's filesystem, never by all at once;
- a signal the launcher set to be ignored (SIGINT in a background job) stays ignored.
"""

import argparse
import contextlib
import gc
import os
import re
import signal
from dataclasses import field, fields

import torch
import torch.distributed as dist


# -----------------------------------------------------------------------------
# the command line


def opt(default, help, low=None, choices=None):
    """A field with its --help text; low: the smallest value allowed; choices: the only values
    allowed."""
    return field(default=default, metadata={"help": help, "low": low, "choices": choices})


class Parser(argparse.ArgumentParser):
    """argparse whose errors are one ValueError line (for main's handler), not a usage block and
    exit 2."""

    def error(self, message):
        message = re.sub(r"^argument (--\w+): ", r"\1: ", message)
        message = message.replace("unrecognized arguments", "unknown option")
        raise ValueError(f"{message}; see {self.prog} --help")


def to_bool(text):
    if text.lower() in ("1", "true", "yes", "on", "0", "false", "no", "off"):
        return text.lower() in ("1", "true", "yes", "on")
    raise ValueError(text)


to_bool.__name__ = "bool"  # argparse names the type in its error: "invalid bool value"


def parse(cls, argv, prog, description=""):
    """Every field of the dataclass cls as --key=value (a bool also as --key), typed as it is
    declared -> cls(...)."""
    p = Parser(prog=prog, usage=f"python {prog} [--key=value ...]", description=description,
               allow_abbrev=False, formatter_class=argparse.RawDescriptionHelpFormatter)
    for f in fields(cls):
        help = f"{f.metadata.get('help', '')} (default: {f.default!r})".replace("%", "%%")
        # a bool also as --key alone
        kind = dict(type=to_bool, nargs="?", const=True) if f.type is bool else dict(type=f.type)
        p.add_argument(f"--{f.name}", default=f.default, help=help, metavar=f.type.__name__.upper(),
                       choices=f.metadata.get("choices"), **kind)
    cfg = cls(**vars(p.parse_args(argv)))
    for f in fields(cls):  # lower bounds: one line naming the flag
        low, value = f.metadata.get("low"), getattr(cfg, f.name)
        if low is not None and value < low:
            what = "be at least 1" if low == 1 else "be positive" if low else "not be negative"
            raise ValueError(f"--{f.name}={value} must {what}")
    return cfg


def given(argv):
    """The names of the flags on a command line: ["--lr=1", "--resume"] -> {"lr", "resume"}."""
    return {a[2:].partition("=")[0] for a in argv if a.startswith("--")}



# -----------------------------------------------------------------------------
# the process


class Stopped(Exception):
    """A signal (or a second one) ended the run; the message says where and how to go on."""


def resolve_device(device, n_gpu, local_rank=0, local_world_size=1):
    """This process's device from --device, LOCAL_RANK, LOCAL_WORLD_SIZE and the visible GPUs: the
    only place.

    Always an index (torch.cuda.set_device refuses a bare "cuda").
    2 GPUs, auto, local rank 1 of 2 -> cuda:1.
    """
    if device == "auto":
        device = "cuda" if n_gpu else "cpu"
    if device == "cpu":
        return device
    if n_gpu == 0:
        raise ValueError(f"--device={device} but torch sees no CUDA device; use --device=cpu")
    if local_world_size > n_gpu:
        raise ValueError(f"{local_world_size} ranks on this machine but {n_gpu} GPU(s); "
                         f"use torchrun --nproc_per_node={n_gpu}, "
                         "or --device=cpu for Gloo processes")
    if device != "cuda" and local_world_size > 1:
        raise ValueError(f"--device={device} would put {local_world_size} ranks on one GPU; "
                         "use --device=cuda")
    index = local_rank if device == "cuda" else int(device.split(":")[1])
    if index >= n_gpu:
        raise ValueError(f"--device={device} but this machine has {n_gpu} GPU(s), "
                         f"cuda:0..cuda:{n_gpu - 1}")
    return f"cuda:{index}"


def on_each_filesystem(make, rank, local_rank):
    """make() (which builds only what is missing) on rank 0, then on the first rank of every other
    machine."""
    if rank == 0:
        make()
    if dist.is_initialized():
        dist.barrier()
        if local_rank == 0 and rank != 0:
            make()  # on a filesystem shared with rank 0 it finds everything built
        dist.barrier()


def resolve_dtype(dtype, device, set_by=""):
    """-> (dtype, note or None). auto -> bfloat16 on GPUs that have it natively, float16 on older
    ones (V100, T4), float32 on the CPU. set_by: the DeepSpeed key that asked for dtype
    ("fp16.enabled"); a GPU recipe's precision falls back to float32 on the CPU, with a note."""
    if set_by and dtype != "float32" and device == "cpu":
        return "float32", (f"--config's {set_by} asks for {dtype}, a GPU precision: on this CPU "
                           "the run trains in float32")
    if dtype == "float16" and device == "cpu":
        raise ValueError("--dtype=float16 is for CUDA (on CPU it is emulated, many times slower); "
                         "use float32 or bfloat16")
    if dtype != "auto" or device == "cpu":
        return ("float32" if dtype == "auto" else dtype), None
    bf16 = torch.cuda.is_bf16_supported(including_emulation=False)
    return ("bfloat16" if bf16 else "float16"), None


@contextlib.contextmanager
def process(device, ckpt_path, resume=""):
    """One process of a run, start to end -> (rank, local_rank, world_size, device, signals):
    torchrun's group joined and left again, an error given its line while the group is up
    (error_line), and SIGTERM or SIGINT noted in signals["got"] for the loop to stop after its step;
    a second one stops at once, its line naming the command that continues (resume)."""
    signals, old = {"got": None}, {}
    ddp = "RANK" in os.environ  # under torchrun

    def handler(signum, frame):
        if signals["got"]:
            raise KeyboardInterrupt
        signals["got"] = signal.Signals(signum).name

    for sig in (signal.SIGINT, signal.SIGTERM):
        # a background job's ignored SIGINT stays ignored
        if signal.getsignal(sig) is not signal.SIG_IGN:
            old[sig] = signal.signal(sig, handler)
    try:
        env = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE")
        ids = [int(os.environ[k]) for k in env] if ddp else [0, 0, 1, 1]
        rank, local_rank, world_size, local_world = ids
        n_gpu = torch.cuda.device_count() if device != "cpu" else 0
        device = resolve_device(device, n_gpu, local_rank, local_world)
        if device != "cpu":
            torch.cuda.set_device(device)
        if ddp:
            dist.init_process_group(backend="nccl" if device != "cpu" else "gloo")
        yield rank, local_rank, world_size, device, signals
    except KeyboardInterrupt:
        raise Stopped(f"interrupted; the last checkpoint is {ckpt_path}, if any was written; "
                      f"continue with: {resume}")
    except (ValueError, OSError) as e:
        # while the process group is up: its store counts the ranks that say it
        e.line = error_line(e)
        raise
    finally:
        for sig, h in old.items():
            signal.signal(sig, h)
        if ddp and dist.is_initialized():
            # subtle: free the DDP wrapper (it sits in reference cycles) while its process group
            # is alive
            gc.collect()
            dist.destroy_process_group()


def stop_requested(signals, device, agree):
    """The signal that asks to stop, if any: at once on one process; under torchrun only at steps
    where agree is true on every rank (the log steps), as the maximum over ranks, so every rank
    stops after the same step."""
    if not dist.is_initialized():
        return signals["got"]
    if not agree:
        return None
    signum = float(signal.Signals[signals["got"]]) if signals["got"] else 0.0
    flag = torch.tensor(signum, device=device)
    # subtle: a signal reaches the ranks at slightly different steps
    dist.all_reduce(flag, op=dist.ReduceOp.MAX)
    return signal.Signals(int(flag.item())).name if flag.item() else None


def error_line(e):
    """'error: ...', or under torchrun 'error: rank R: ...' from the first rank to meet this error
    (counted in the process group's store), None on the others; before the group exists, each
    machine's first rank speaks."""
    if "RANK" not in os.environ:
        return f"error: {e}"
    if dist.is_initialized():
        first = dist.distributed_c10d._get_default_store().add(f"error: {e}", 1) == 1
    else:
        first = int(os.environ["LOCAL_RANK"]) == 0
    return f"error: rank {os.environ['RANK']}: {e}" if first else None
