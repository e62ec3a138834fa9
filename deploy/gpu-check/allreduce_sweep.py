"""The GPU host check's all-reduce sweep, run under torchrun by gpu_check.py: the kit's sweep
(scalebench_kit.allreduce: NCCL on GPUs, gloo on the CPU twin) over our models' float32 gradient
sizes as their trainers report them, and DDP's 25 MB bucket. On a host with a results store the
all-reduce DAG sweeps the sizes the store's contracts report instead.

    torchrun --nproc-per-node=N allreduce_sweep.py OUT.json [--cpu]
"""
from __future__ import annotations

import sys

from scalebench_kit.allreduce import DDP_BUCKET, run

SIZES = {
    "DDP bucket (25 MB)": DDP_BUCKET,
    "UNet, unet_torch_voc2007 (1.94 M parameters)": 1_942_917 * 4,
    "ResNet50, resnet50_keras_cifar10 (23.6 M)": 23_608_202 * 4,
    "Faster R-CNN R50-FPN, 21 classes (~41 M)": 41_200_000 * 4,
}
CPU_SIZES = {k: SIZES[k] for k in ("DDP bucket (25 MB)", "UNet, unet_torch_voc2007 (1.94 M parameters)")}


if __name__ == "__main__":
    cpu = "--cpu" in sys.argv[2:]
    run(sys.argv[1], CPU_SIZES if cpu else SIZES, cpu)
