"""All-reduce bus bandwidth over given gradient sizes, run under torchrun: NCCL on GPUs, gloo on
the CPU twin. Bus bandwidth as nccl-tests defines it: algorithm bandwidth (bytes / time) x
2(n - 1)/n, the rate each link carries in a ring, comparable across GPU counts. The sizes come
from the caller (the all-reduce DAG: each benchmark's gradients as its trainer reported them).

    torchrun --nproc-per-node=N -m scalebench_kit.allreduce OUT.json --bytes 7771668,26214400 [--cpu]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import time

DDP_BUCKET = 25 * 2**20  # DDP's default bucket: the size NCCL actually sees per call while backward runs


def sweep(sizes: dict[str, int], cpu: bool) -> dict:
    """Each size's median all-reduce time over timed calls after warm-up (rank 0's view)."""
    import torch
    import torch.distributed as dist

    world = int(os.environ["WORLD_SIZE"])
    device = torch.device("cpu") if cpu else torch.device("cuda", int(os.environ["LOCAL_RANK"]))
    if not cpu:
        torch.cuda.set_device(device)
    warmup, timed = (2, 5) if cpu else (5, 20)
    rows = []
    for name, nbytes in sizes.items():
        x = torch.ones(max(1, nbytes // 4), dtype=torch.float32, device=device)
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
    return {"backend": "gloo" if cpu else "nccl", "world_size": world, "timed_calls": timed,
            "nccl": ".".join(map(str, torch.cuda.nccl.version())) if not cpu else None, "rows": rows}


def run(out: str, sizes: dict[str, int], cpu: bool) -> None:
    import torch.distributed as dist

    dist.init_process_group("gloo" if cpu else "nccl")
    try:
        doc = sweep(sizes, cpu)
        if int(os.environ["RANK"]) == 0:
            with open(out, "w") as fh:
                json.dump(doc, fh, indent=2)
        dist.barrier()  # every rank done before the group goes
    finally:
        dist.destroy_process_group()


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("out")
    p.add_argument("--bytes", default=str(DDP_BUCKET), help="comma-separated sizes in bytes")
    p.add_argument("--cpu", action="store_true", help="gloo on CPU processes (the CPU twin)")
    args = p.parse_args(argv)
    sizes = {f"{int(b)} bytes": int(b) for b in args.bytes.split(",") if b.strip()}
    run(args.out, sizes, args.cpu)


if __name__ == "__main__":
    main()
