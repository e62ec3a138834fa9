"""The PyTorch family (torchrun, one process per device, DistributedDataParallel): what a
TrainerRun asks of a framework, and the DDP communication hook that times the exposed sync.
Torch is passed in, never imported here, so the kit imports with the standard library alone."""
from __future__ import annotations

import os
import time
from typing import Any


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
