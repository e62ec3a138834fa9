"""The PyTorch family (torchrun, one process per device, DistributedDataParallel): what a
TrainerRun asks of a framework, the DDP communication hook that times the exposed sync, and
torch's switch for the four precision presets (and the observed dtype).
Torch is passed in, never imported here, so the kit imports with the standard library alone."""
from __future__ import annotations

import os
import time
from contextlib import nullcontext
from typing import Any

from .precision import PrecisionError, record


def setup_distributed(torch, devices: dict) -> tuple[int, int, Any, str]:
    """(rank, world size, device, backend) from torchrun's environment; one process per device."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank, local = int(os.environ.get("RANK", "0")), int(os.environ.get("LOCAL_RANK", "0"))
    if world != devices["count"]:
        raise RuntimeError(f"cell asked for {devices['count']} devices but runs {world} processes "
                           "(launch with torchrun --nproc-per-node=<gpus>)")
    if devices["kind"] == "gpu":
        if torch.cuda.device_count() < world:
            raise RuntimeError(f"cell asked for {world} GPUs (ids {devices['ids']}) but the process sees "
                               f"{torch.cuda.device_count()}")
        device, backend = torch.device("cuda", local), "nccl"
        torch.cuda.set_device(device)
    else:
        device, backend = torch.device("cpu"), "gloo"
    if world > 1:
        torch.distributed.init_process_group(backend)
    return rank, world, device, backend


def nccl_version(torch) -> str:
    v = torch.cuda.nccl.version()  # a tuple in recent torch, an int in older ones
    return ".".join(map(str, v)) if isinstance(v, tuple) else str(v)


class SyncProbe:
    """The DDP communication hook that finds the end of backward compute: it stamps each bucket's
    hand-off and runs the stock all-reduce; the span from the last hand-off until backward returns
    is the all-reduce time the backward pass did not hide (the exposed sync)."""

    def __init__(self, torch, device):
        from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import allreduce_hook

        self.torch, self.cuda, self.allreduce = torch, device.type == "cuda", allreduce_hook
        self.last = None

    def hook(self, state, bucket):
        self.last = self.mark()
        return self.allreduce(state, bucket)

    def mark(self):
        if self.cuda:
            event = self.torch.cuda.Event(enable_timing=True)
            event.record()
            return event
        return time.perf_counter()

    def exposed_since_last_bucket(self, backward_end) -> float:
        if self.last is None:
            return 0.0
        if self.cuda:
            self.torch.cuda.synchronize()
            return self.last.elapsed_time(backward_end) / 1000.0
        return backward_end - self.last


class TorchDDP:
    """One rank of a torchrun launch: its rank, the world, its device and backend."""

    def __init__(self, torch, devices: dict):
        torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
        self.torch = torch
        self.rank, self.world, self.device, self.backend = setup_distributed(torch, devices)
        self.cuda = self.device.type == "cuda"
        self.strategy = "DistributedDataParallel" if self.world > 1 else "single process"

    def gather(self, mine: list) -> list:
        """Every rank's items, in rank order (each rank passes its own list)."""
        if self.world == 1:
            return list(mine)
        parts: list = [None] * self.world
        self.torch.distributed.all_gather_object(parts, mine)
        return [x for part in parts for x in part]

    def profiler(self):
        """torch.profiler for the profiling window (scalebench_kit.profiling)."""
        from .profiling import TorchProfiler

        return TorchProfiler(self.torch, self.cuda)

    def device_names(self) -> list[str]:
        torch = self.torch
        return ([torch.cuda.get_device_name(i) for i in range(self.world)] if self.cuda
                else [f"cpu:{i}" for i in range(self.world)])

    def system(self) -> dict:
        """The system fingerprint's framework fields."""
        torch = self.torch
        return {"framework": "pytorch", "framework_version": torch.__version__, "backend": self.backend,
                "cuda": torch.version.cuda, "nccl": nccl_version(torch) if self.cuda else None}

    def shut_down(self, cell) -> None:
        cell.shut_down(self.torch, self.world, self.device)


class TorchPrecision:
    """PyTorch: `autocast` to bf16/fp16 (a GradScaler for fp16), the TF32 flags (off for fp32, on for
    tf32 and the mixed presets), and on CUDA `cudnn.benchmark` and channels_last for conv nets."""

    def __init__(self, torch, precision: str, device, conv_net: bool = True):
        self.torch, self.precision, self.device = torch, precision, device
        cuda = device.type == "cuda"
        if precision == "fp16" and not cuda:
            raise PrecisionError("fp16 mixed precision needs a CUDA device (GradScaler); CPU runs fp32 or bf16")
        if precision == "tf32" and not cuda:
            raise PrecisionError("tf32 is a tensor-core mode of CUDA devices; CPU runs fp32 or bf16")
        tf32 = precision != "fp32"
        torch.backends.cuda.matmul.allow_tf32 = tf32
        torch.backends.cudnn.allow_tf32 = tf32
        torch.backends.cudnn.benchmark = cuda
        self.dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(precision)
        self.memory_format = torch.channels_last if cuda and conv_net else torch.contiguous_format
        self.scaler = torch.amp.GradScaler("cuda") if precision == "fp16" else None
        self.switches = {"autocast": str(self.dtype).replace("torch.", "") if self.dtype else None,
                         "grad_scaler": self.scaler is not None, "allow_tf32": tf32,
                         "cudnn_benchmark": cuda, "channels_last": self.memory_format is torch.channels_last}

    def autocast(self):
        if self.dtype is None:
            return nullcontext()
        return self.torch.autocast(device_type=self.device.type, dtype=self.dtype)

    def backward_step(self, loss, optimiser, between=None) -> None:
        """backward, (`between()`: e.g. a timing mark after backward), optimiser step; scaled for fp16."""
        if self.scaler is None:
            loss.backward()
            if between:
                between()
            optimiser.step()
            return
        self.scaler.scale(loss).backward()
        if between:
            between()
        self.scaler.step(optimiser)
        self.scaler.update()

    def observe(self, module, name: str) -> "ObservedDtype":
        """Hook `module` (an inner layer): the dtype its output had on the last forward pass."""
        return ObservedDtype(module, name)

    def record(self, observed: "ObservedDtype") -> dict:
        return record(self.precision, observed.dtype, observed.name, self.switches)


class ObservedDtype:
    def __init__(self, module, name: str):
        self.name, self.dtype = name, "not observed"
        self._handle = module.register_forward_hook(self._hook)

    def _hook(self, module, inputs, output) -> None:
        self.dtype = str(output.dtype).replace("torch.", "")
        self._handle.remove()  # the first training forward pass tells; no cost afterwards
