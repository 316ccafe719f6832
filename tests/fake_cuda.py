"""A fake CUDA machine for CPU tests: torch.cuda's entry points replaced by stand-ins that check
their arguments as the real ones do, and every tensor, module or generator that asks for a GPU
placed on the CPU instead.

    with FakeCuda(n_gpu=2) as gpu:      # torch.cuda.is_available() is True, device_count() is 2
        train.train(cfg)                # runs its CUDA branch on the CPU
    gpu.calls                           # [("set_device", 0), ("init_process_group", "nccl"), ...]

What it checks, as the real calls would fail: set_device needs an index below device_count; a
device string "cuda:N" needs N < device_count; autocast a device type it knows and a CUDA dtype;
pin_memory a CPU tensor; DDP device_ids == [the index set_device chose]; torch.cuda.set_rng_state
a 16-byte CUDA state (the CPU's is 5,056); process groups on NCCL. bf16=False is a GPU without
native bf16 (V100, T4), which reports it supported through emulation, as the real ones do. What it
cannot see: kernels, streams, memory, NCCL itself, torch.compile on a GPU, and numerics (every op
runs in float32 on the CPU, autocast is recorded, not applied), and a CUDA generator's continuity
(its state reads as 16 zero bytes, so a resume on the fake GPU is not bit-exact).
"""

import contextlib
import re
from unittest.mock import patch

import torch
import torch.distributed as dist
from torch.cuda._utils import _get_device_index
from torch.overrides import TorchFunctionMode

CUDA = re.compile(r"cuda(:\d+)?")
# a CUDA generator's state: seed and offset (the CPU's Mersenne Twister state is 5,056)
CUDA_STATE_BYTES = 16
REAL_GENERATOR, REAL_INIT = torch.Generator, dist.init_process_group
REAL_DDP = torch.nn.parallel.DistributedDataParallel


class FakeCuda(TorchFunctionMode):
    def __init__(self, n_gpu=1, bf16=True, ddp_modules=()):
        super().__init__()
        self.n_gpu, self.bf16, self.ddp_modules = n_gpu, bf16, ddp_modules
        self.current, self.calls, self.patches = 0, [], contextlib.ExitStack()

    def placed(self, device):
        """A device argument -> the CPU, after the check the real placement would make."""
        d = torch.device(device)
        index = self.current if d.index is None else d.index
        assert 0 <= index < self.n_gpu, f"{device}: invalid device ordinal on {self.n_gpu} GPU(s)"
        return torch.device("cpu")

    def _cpu(self, a):
        if isinstance(a, (torch.device, str)) and CUDA.fullmatch(str(a)):
            return self.placed(a)
        return a

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if func is torch.Tensor.pin_memory:
            assert args[0].device.type == "cpu", "pin_memory needs a CPU tensor"
            self.calls.append(("pin_memory",))
            return args[0]
        # naming a GPU is fine; placing a tensor on one is what moves to the CPU
        if func is torch.device:
            return func(*args, **(kwargs or {}))
        args = tuple(self._cpu(a) for a in args)
        kwargs = {k: self._cpu(v) for k, v in (kwargs or {}).items()}
        return func(*args, **kwargs)

    # --- torch.cuda and friends -------------------------------------------------------------------

    def set_device(self, device):
        # the real check: "cuda" without an index raises ValueError
        index = _get_device_index(device)
        assert 0 <= index < self.n_gpu, f"set_device({device!r}): invalid device ordinal"
        self.current = index
        self.calls.append(("set_device", index))

    def is_bf16_supported(self, including_emulation=True):
        return self.bf16 or including_emulation

    def get_rng_state(self, device="cuda"):
        return torch.zeros(CUDA_STATE_BYTES, dtype=torch.uint8)

    def set_rng_state(self, state, device="cuda"):
        assert state.dtype == torch.uint8, "a CUDA RNG state is a ByteTensor"
        assert state.device.type == "cpu", "a CUDA RNG state is on the CPU"
        assert state.numel() == CUDA_STATE_BYTES, f"a CUDA RNG state of {state.numel()} bytes"
        self.calls.append(("set_rng_state",))

    def generator_class(self):
        fake = self

        class Generator(REAL_GENERATOR):  # a CPU generator that checks the device it was asked for
            def __new__(cls, device="cpu"):
                fake.calls.append(("Generator", str(device)))
                if str(device) != "cpu":
                    fake.placed(device)
                return super().__new__(cls)  # subtle: torch's generator takes its device in __new__

            def __init__(self, device="cpu"):
                super().__init__()
                self.cuda = str(device) != "cpu"

            # a CUDA generator's state is its seed and offset: 16 bytes
            def get_state(self):
                return fake.get_rng_state() if self.cuda else super().get_state()

            def set_state(self, state):
                if self.cuda:  # as the real one: "Expected ... of size 16 but found ..."
                    assert state.numel() == CUDA_STATE_BYTES, f"16 bytes, not {state.numel()}"
                    return self
                return super().set_state(state)

        return Generator

    def autocast(self, device_type, dtype=None, enabled=True, **kw):
        assert torch.amp.is_autocast_available(device_type), f"unknown device_type {device_type!r}"
        if device_type.startswith("cuda"):
            assert dtype in (torch.bfloat16, torch.float16), f"{dtype} is not a CUDA autocast dtype"
        self.calls.append(("autocast", device_type, dtype))
        return contextlib.nullcontext()

    def init_process_group(self, backend=None, **kw):
        self.calls.append(("init_process_group", backend))
        assert backend == "nccl", f"GPU ranks talk over NCCL, got {backend}"
        return REAL_INIT(backend="gloo", **kw)  # the CPU stand-in for NCCL

    def ddp(self, module, device_ids=None, **kw):
        self.calls.append(("DDP", device_ids))
        assert device_ids == [self.current], f"DDP(device_ids={device_ids}) on cuda:{self.current}"
        return REAL_DDP(module, **kw)

    def __enter__(self):
        enter = self.patches.enter_context
        # torch.cuda's entry points, and what a CUDA build's optimizer.step asks
        enter(patch.multiple(torch.cuda, is_available=lambda: True, device_count=lambda: self.n_gpu,
                             set_device=self.set_device, current_device=lambda: self.current,
                             is_bf16_supported=self.is_bf16_supported,
                             get_rng_state=self.get_rng_state, set_rng_state=self.set_rng_state,
                             is_current_stream_capturing=lambda: False))
        enter(patch.multiple(torch, Generator=self.generator_class(), autocast=self.autocast))
        enter(patch.multiple(dist, init_process_group=self.init_process_group))
        enter(patch.multiple(torch.nn.parallel, DistributedDataParallel=self.ddp))
        for module in self.ddp_modules:  # modules that imported the DDP class by name
            enter(patch.object(module, "DDP", self.ddp))
        return super().__enter__()

    def __exit__(self, *exc):
        super().__exit__(*exc)
        self.patches.close()
        return False
