"""UNet + PyTorch + VOC2007 semantic segmentation, on one device or under torchrun.

One script, unchanged: `python -m trainers.unet_voc` trains on one device; `torchrun
--nproc-per-node=N -m trainers.unet_voc` runs N processes under DistributedDataParallel (NCCL
on GPUs, gloo on CPU device slots). Weak scaling: each process takes per-device batch images
per step from its shard of the epoch (scalebench_kit.epochs: the whole split every epoch, the last
batch smaller, equal shards), so the global batch is per-device batch x N; the LR
comes from cell.json (the config's policy). Warm-up steps are timed apart from steady training;
evaluation runs after training (and after every epoch when the cell asks, for time to accuracy),
outside the timed region, over the whole val split exactly once (each rank a disjoint slice,
confusion matrices summed), so no image counts twice.

Time breakdown per step and rank (scalebench_kit.timing): data wait = blocked on the loader plus
the copy to the device; exposed sync = from DDP handing its last gradient bucket to the all-reduce
(a communication hook: the backward compute is done then) until backward() returns with every
bucket reduced, i.e. the all-reduce time the backward pass did not hide; compute = the rest of
forward, backward and the optimiser step. On GPUs the sync span is taken with CUDA events and
the step is synchronised at its end.

Precision (cell.json training.precision, scalebench_kit.precision.TorchPrecision): autocast to
bf16/fp16 for forward, loss and evaluation (a GradScaler for fp16), the TF32 flags, and on CUDA
cudnn.benchmark and channels_last; an inner convolution's output dtype is recorded.

`python -m trainers.unet_voc --evaluate WEIGHTS` evaluates saved weights in one process on the
cell's val split (the check that a DDP evaluation counts every image once).
"""
from __future__ import annotations

import json
import os
import sys
import time
from contextlib import nullcontext

from scalebench_kit import voc_seg
from scalebench_kit.contract import load_cell_spec
from scalebench_kit.epochs import epoch_sampler
from scalebench_kit.evaluation import Evaluations
from scalebench_kit.gpu_monitor import sample_gpus
from scalebench_kit.metrics import confusion_matrix, scores
from scalebench_kit.names import CELL_SPEC_FILE
from scalebench_kit.precision import TorchPrecision, requested
from scalebench_kit.runtime import (RESULTS_DIR_ENV, Cell, Progress, StepTimer, combine_ranks, epoch_plan, main_guard,
                                   system_fingerprint)
from scalebench_kit.timing import delayed

WEIGHTS_FILE = "weights.pt"  # written only when cell.json's test_hooks ask (save_weights)
BREAKDOWN_METHOD = {
    "data_wait_s": "blocked in the DataLoader's next() plus the copy to the device",
    "compute_s": "forward, loss, backward and optimiser step, less the exposed sync",
    "sync_s": "DDP communication hook: from the last gradient bucket handed to the all-reduce (backward "
              "compute done) until backward() returns with all buckets reduced; 0 on one device",
    "other_s": "the rest of the step (loss read-out, bookkeeping): unattributed",
    "epoch_fixed_s": "per epoch: sampler.set_epoch and starting the loader's iterator",
}


def build_unet(torch, num_classes: int, width: int = 16):
    """A plain UNet (4 down, 4 up, skip connections), GroupNorm so that a step does not depend on
    the per-device batch, no pretrained weights."""
    nn = torch.nn

    def block(cin, cout):
        return nn.Sequential(nn.Conv2d(cin, cout, 3, padding=1, bias=False), nn.GroupNorm(8, cout), nn.ReLU(inplace=True),
                             nn.Conv2d(cout, cout, 3, padding=1, bias=False), nn.GroupNorm(8, cout), nn.ReLU(inplace=True))

    class UNet(nn.Module):
        def __init__(self):
            super().__init__()
            w = [width * 2 ** i for i in range(5)]
            self.down = nn.ModuleList([block(3, w[0])] + [block(w[i], w[i + 1]) for i in range(4)])
            self.pool = nn.MaxPool2d(2)
            self.up = nn.ModuleList([nn.ConvTranspose2d(w[i + 1], w[i], 2, stride=2) for i in reversed(range(4))])
            self.merge = nn.ModuleList([block(2 * w[i], w[i]) for i in reversed(range(4))])
            self.head = nn.Conv2d(w[0], num_classes, 1)

        def forward(self, x):
            skips = []
            for i, down in enumerate(self.down):
                x = down(x if i == 0 else self.pool(x))
                skips.append(x)
            x = skips.pop()
            for up, merge in zip(self.up, self.merge):
                x = merge(torch.cat([up(x), skips.pop()], dim=1))
            return self.head(x)

    return UNet()


def setup_distributed(torch, devices: dict) -> tuple[int, int, object, str]:
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


class SyncProbe:
    """The DDP communication hook that finds the end of backward compute (see the module doc):
    it stamps each bucket's hand-off and runs the stock all-reduce."""

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


def nccl_version(torch) -> str:
    v = torch.cuda.nccl.version()  # a tuple in recent torch, an int in older ones
    return ".".join(map(str, v)) if isinstance(v, tuple) else str(v)


def load_data(spec: dict):
    """Train and val arrays (NHWC uint8, HxW labels) and the train split's channel statistics."""
    data = spec["data"]
    size = data.get("image_size") or 256
    x_train, y_train = voc_seg.read_split(data["path"], "train", size, data.get("train_limit"))
    x_val, y_val = voc_seg.read_split(data["path"], "val", size, data.get("test_limit"))
    mean, std = x_train.mean(axis=(0, 1, 2)), x_train.std(axis=(0, 1, 2)) + 1e-6
    return x_train, y_train, x_val, y_val, mean, std


def to_tensors(torch, x, y, mean, std):
    x = torch.from_numpy(((x.astype("float32") - mean) / std).astype("float32")).permute(0, 3, 1, 2).contiguous()
    return x, torch.from_numpy(y.astype("int64"))


def evaluate(torch, model, x_v, y_v, *, rank: int, world: int, batch: int, device, autocast=nullcontext) -> dict:
    """Scores over the whole val split: each rank predicts a disjoint slice, the confusion
    matrices are summed, so every image counts exactly once whatever the world size."""
    import numpy as np

    model.eval()
    mine = list(range(rank, len(x_v), world))
    cm = np.zeros((voc_seg.NUM_CLASSES, voc_seg.NUM_CLASSES), dtype=np.int64)
    with torch.no_grad(), autocast():
        for start in range(0, len(mine), batch):
            idx = mine[start:start + batch]
            pred = model(x_v[idx].to(device)).argmax(dim=1).cpu().numpy()
            cm += confusion_matrix(y_v[idx].numpy(), pred, voc_seg.NUM_CLASSES, ignore=voc_seg.IGNORE)
    if world > 1:
        total = torch.from_numpy(cm).to(device)
        torch.distributed.all_reduce(total)
        cm = total.cpu().numpy()
    model.train()
    return scores(cm)


def main() -> None:
    cell = Cell()
    cell.events.log("init_start")
    import numpy as np
    import torch
    from torch import nn
    from torch.utils.data import DataLoader, TensorDataset

    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
    spec, train = cell.spec, cell.training
    rank, world, device, backend = setup_distributed(torch, cell.devices)
    prec = TorchPrecision(torch, requested(spec), device)
    if train["global_batch"] != train["per_device_batch"] * world:
        raise RuntimeError(f"global batch {train['global_batch']} != per-device batch {train['per_device_batch']} x {world}")
    seed = spec["cell"]["seed"]
    torch.manual_seed(seed)

    x_train, y_train, x_val, y_val, mean, std = load_data(spec)
    train_set = TensorDataset(*to_tensors(torch, x_train, y_train, mean, std))
    x_v, y_v = to_tensors(torch, x_val, y_val, mean, std)
    plan = epoch_plan(len(train_set), train["global_batch"], train.get("max_steps_per_epoch"), shards=world)
    sampler = epoch_sampler(torch, plan, seed, rank, world)  # the whole split each epoch, equal shards
    loader = DataLoader(train_set, batch_size=train["per_device_batch"], sampler=sampler)
    steps_per_epoch = plan["steps_per_epoch"]
    cell.events.log("data_ready", len(train_set), val_images=len(x_val), steps_per_epoch=steps_per_epoch)

    model = build_unet(torch, spec["model"].get("num_classes", voc_seg.NUM_CLASSES)).to(device,
                                                                                     memory_format=prec.memory_format)
    observed = prec.observe(model.down[2][0], "down.2.0 (Conv2d)")
    params = sum(p.numel() for p in model.parameters())
    probe = None
    if world > 1:
        model = nn.parallel.DistributedDataParallel(model, device_ids=[device.index] if device.type == "cuda" else None)
        probe = SyncProbe(torch, device)
        model.register_comm_hook(None, probe.hook)
    optimiser = torch.optim.Adam(model.parameters(), lr=train["lr"])
    loss_fn = nn.CrossEntropyLoss(ignore_index=voc_seg.IGNORE)
    cell.events.log("model_ready", params, backend=backend, strategy="DistributedDataParallel"
                    if world > 1 else "single process")
    setup_s = cell.elapsed()
    cell.events.log("init_stop", setup_s)

    delay = cell.test_hooks.get("data_delay_s")
    cuda = device.type == "cuda"
    settle = torch.cuda.synchronize if cuda else (lambda: None)
    timer = StepTimer(train["warmup_steps"],
                      Progress(steps_per_epoch * train["epochs"], train["global_batch"]) if rank == 0 else None)
    epoch_s, loss_curve = [], []
    evals = Evaluations(cell.events, train)

    def score() -> dict:
        return evaluate(torch, model, x_v, y_v, rank=rank, world=world, batch=train["per_device_batch"], device=device,
                        autocast=prec.autocast)

    gpus = sample_gpus(cell.devices["kind"], list(range(world)) if rank == 0 else [])
    with gpus:
        model.train()
        for epoch in range(train["epochs"]):
            t_epoch = time.perf_counter()
            cell.events.log("epoch_start", epoch + 1)
            sampler.set_epoch(epoch)
            batches = iter(loader if delay is None else delayed(loader, delay))
            timer.epoch_fixed(time.perf_counter() - t_epoch)
            losses = []
            timer.start()
            for _ in range(steps_per_epoch):
                t_fetch = time.perf_counter()
                if probe:
                    probe.last = None
                x, y = next(batches)
                x = x.to(device, non_blocking=True, memory_format=prec.memory_format)
                y = y.to(device, non_blocking=True)
                settle()
                t_data = time.perf_counter()
                optimiser.zero_grad(set_to_none=True)
                with prec.autocast():
                    loss = loss_fn(model(x), y)
                # under DDP, backward returns once every gradient bucket is all-reduced: mark it
                backward_end = []
                prec.backward_step(loss, optimiser, between=(lambda marks=backward_end: marks.append(probe.mark()))
                                   if probe else None)
                settle()
                t_done = time.perf_counter()
                sync_s = probe.exposed_since_last_bucket(backward_end[0]) if probe else 0.0
                losses.append(loss.item())
                timer.step_done(data_wait_s=t_data - t_fetch, compute_s=t_done - t_data - sync_s, sync_s=sync_s)
                if len(timer.steps) == timer.warmup_steps:
                    cell.events.log("warmup_stop", timer.warmup_s)
            epoch_s.append(time.perf_counter() - t_epoch)
            loss_curve.append(float(np.mean(losses)))
            cell.events.log("epoch_stop", epoch + 1, loss=loss_curve[-1], seconds=epoch_s[-1])
            evals.after_epoch(epoch + 1, sum(epoch_s), score)
        cell.events.log("train_stop", timer.train_s)
        metrics = evals.final(sum(epoch_s), score)

    mine = timer.summary(rank)
    cell.events.log("step_breakdown", mine["step_s"], **mine)  # every rank's own figures in the log
    ranks = [mine]
    if world > 1:
        ranks = [None] * world
        torch.distributed.all_gather_object(ranks, mine)
    unwrapped = model.module if world > 1 else model
    if cell.test_hooks.get("save_weights") and rank == 0:
        torch.save(unwrapped.state_dict(), cell.results_dir / WEIGHTS_FILE)

    system = system_fingerprint("pytorch", torch.__version__, backend=backend, cuda=torch.version.cuda,
                                nccl=nccl_version(torch) if cuda else None,
                                topology=cell.devices.get("topology"), **gpus.fingerprint())
    names = [torch.cuda.get_device_name(i) for i in range(world)] if cuda else [f"cpu:{i}" for i in range(world)]
    breakdown = combine_ranks(ranks, BREAKDOWN_METHOD)
    if gpus.summary():
        breakdown["gpu"] = gpus.summary()
    cell.finish(system=system, world_size=world, device_names=names, setup_s=setup_s, timer=timer, epoch_s=epoch_s,
                eval_s=evals.seconds, loss_curve=loss_curve, metrics=metrics, breakdown=breakdown, evaluations=evals.rows,
                model={"parameters": int(params), "architecture": "UNet", "strategy": "DistributedDataParallel"},
                extra={"epoch": plan}, precision=prec.record(observed))
    cell.shut_down(torch, world, device)  # the sampler was joined at the end of its `with`; no loader workers


def evaluate_saved(weights: str) -> dict:
    """One process, the cell's val split, weights saved by a (possibly distributed) run."""
    import torch

    spec = load_cell_spec(os.path.join(os.environ.get(RESULTS_DIR_ENV, "/results"), CELL_SPEC_FILE))
    _, _, x_val, y_val, mean, std = load_data(spec)
    model = build_unet(torch, spec["model"].get("num_classes", voc_seg.NUM_CLASSES))
    model.load_state_dict(torch.load(weights, map_location="cpu"))
    x_v, y_v = to_tensors(torch, x_val, y_val, mean, std)
    return evaluate(torch, model, x_v, y_v, rank=0, world=1, batch=spec["training"]["per_device_batch"],
                    device=torch.device("cpu"))


if __name__ == "__main__":
    if sys.argv[1:2] == ["--evaluate"]:
        print(json.dumps(evaluate_saved(sys.argv[2])))
    else:
        main_guard(main)
