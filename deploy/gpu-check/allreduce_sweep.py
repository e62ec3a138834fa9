"""All-reduce bus bandwidth over our models' gradient sizes, run under torchrun by gpu_check.py:
NCCL on GPUs, gloo on the CPU twin. Bus bandwidth as nccl-tests defines it: algorithm bandwidth
(bytes / time) x 2(n - 1)/n, the rate each link carries in a ring, comparable across GPU counts.

    torchrun --nproc-per-node=N allreduce_sweep.py OUT.json [--cpu]
"""
from __future__ import annotations

import json
import os
import statistics
import sys
import time

# float32 gradients of our models (parameter counts as their trainers report them) and DDP's
# default 25 MB bucket, the size NCCL actually sees per call while backward runs
SIZES = {
    "DDP bucket (25 MB)": 25 * 2**20,
    "UNet, unet_torch_voc2007 (1.94 M parameters)": 1_942_917 * 4,
    "ResNet50, resnet50_keras_cifar10 (23.6 M)": 23_608_202 * 4,
    "Faster R-CNN R50-FPN, 21 classes (~41 M)": 41_200_000 * 4,
}
CPU_SIZES = {"DDP bucket (25 MB)": 25 * 2**20, "UNet, unet_torch_voc2007 (1.94 M parameters)": 1_942_917 * 4}


def main(out: str, cpu: bool) -> None:
    import torch
    import torch.distributed as dist

    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    device = torch.device("cpu") if cpu else torch.device("cuda", int(os.environ["LOCAL_RANK"]))
    if not cpu:
        torch.cuda.set_device(device)
    dist.init_process_group("gloo" if cpu else "nccl")
    warmup, timed = (2, 5) if cpu else (5, 20)
    rows = []
    for name, nbytes in (CPU_SIZES if cpu else SIZES).items():
        x = torch.ones(nbytes // 4, dtype=torch.float32, device=device)
        times = []
        for i in range(warmup + timed):
            if not cpu:
                torch.cuda.synchronize()
            dist.barrier()
            t = time.perf_counter()
            dist.all_reduce(x)
            if not cpu:
                torch.cuda.synchronize()
            if i >= warmup:
                times.append(time.perf_counter() - t)
        med = statistics.median(times)
        alg = nbytes / med / 1e9
        rows.append({"size": name, "bytes": nbytes, "median_s": round(med, 6), "algbw_gbps": round(alg, 3),
                     "busbw_gbps": round(alg * 2 * (world - 1) / world, 3)})
    if rank == 0:
        with open(out, "w") as fh:
            json.dump({"backend": "gloo" if cpu else "nccl", "world_size": world, "timed_calls": timed,
                       "nccl": ".".join(map(str, torch.cuda.nccl.version())) if not cpu else None, "rows": rows}, fh,
                      indent=2)
    dist.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1], "--cpu" in sys.argv[2:])
