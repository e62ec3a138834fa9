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

Precision (cell.json training.precision, scalebench_kit.torch_ddp.TorchPrecision): autocast to
bf16/fp16 for forward, loss and evaluation (a GradScaler for fp16), the TF32 flags, and on CUDA
cudnn.benchmark and channels_last; an inner convolution's output dtype is recorded.

`python -m trainers.unet_voc --evaluate WEIGHTS` evaluates saved weights in one process on the
cell's val split (the check that a DDP evaluation counts every image once).
"""
from __future__ import annotations

import itertools
import json
import os
import sys
import time
from contextlib import nullcontext

from scalebench_kit import voc_seg
from scalebench_kit.contract import load_cell_spec
from scalebench_kit.epochs import epoch_sampler
from scalebench_kit.metrics import confusion_matrix, scores
from scalebench_kit.names import CELL_SPEC_FILE
from scalebench_kit.precision import requested
from scalebench_kit.runtime import RESULTS_DIR_ENV, epoch_plan, main_guard
from scalebench_kit.timing import delayed
from scalebench_kit.torch_ddp import SyncProbe, TorchDDP, TorchPrecision
from scalebench_kit.trainer import TrainerRun

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
    run = TrainerRun(BREAKDOWN_METHOD)
    import numpy as np
    import torch

    ddp = run.use(TorchDDP(torch, run.cell.devices))
    spec, train = run.cell.spec, run.train
    prec = TorchPrecision(torch, requested(spec), ddp.device)
    torch.manual_seed(spec["cell"]["seed"])
    data = VocData(torch, spec, ddp)
    run.data_ready(len(data.train_set), val_images=len(data.y_val), steps_per_epoch=data.plan["steps_per_epoch"])
    step = UNetStep(torch, spec, ddp, prec)
    run.model_ready(step.params, backend=ddp.backend, strategy=ddp.strategy)

    def score() -> dict:
        return evaluate(torch, step.model, data.x_val, data.y_val, rank=ddp.rank, world=ddp.world,
                        batch=train["per_device_batch"], device=ddp.device, autocast=prec.autocast)

    with run.training(data.plan["steps_per_epoch"]):
        step.model.train()
        for epoch in run.epochs():
            losses = step.epoch(run, data.batches(epoch, run.cell.test_hooks.get("data_delay_s")))
            run.epoch_done(epoch, float(np.mean(losses)), score)
        metrics = run.final(score)
    if run.cell.test_hooks.get("save_weights") and ddp.rank == 0:
        torch.save(step.unwrapped.state_dict(), run.cell.results_dir / WEIGHTS_FILE)
    step.model.train()
    run.profile(step.untimed(data.stream(train["epochs"])))  # after the figures and the weights: nothing moves
    run.finish(metrics=metrics, model={"parameters": int(step.params), "architecture": "UNet",
                                       "strategy": "DistributedDataParallel"},
               extra={"epoch": data.plan}, precision=prec.record(step.observed))
    run.leave()


class VocData:
    """The train split as an epoch-sharded loader (the whole split each epoch, equal shards) and
    the val split as tensors."""

    def __init__(self, torch, spec: dict, ddp: TorchDDP):
        from torch.utils.data import DataLoader, TensorDataset

        train = spec["training"]
        x_train, y_train, x_val, y_val, mean, std = load_data(spec)
        self.train_set = TensorDataset(*to_tensors(torch, x_train, y_train, mean, std))
        self.x_val, self.y_val = to_tensors(torch, x_val, y_val, mean, std)
        self.plan = epoch_plan(len(self.train_set), train["global_batch"], train.get("max_steps_per_epoch"),
                               shards=ddp.world)
        self.sampler = epoch_sampler(torch, self.plan, spec["cell"]["seed"], ddp.rank, ddp.world)
        self.loader = DataLoader(self.train_set, batch_size=train["per_device_batch"], sampler=self.sampler)

    def batches(self, epoch: int, delay_s: float | None):
        self.sampler.set_epoch(epoch)
        return iter(self.loader if delay_s is None else delayed(self.loader, delay_s))

    def stream(self, first_epoch: int):
        """Batches epoch after epoch from `first_epoch` on, for as long as they are asked for."""
        return itertools.chain.from_iterable(self.batches(e, None) for e in itertools.count(first_epoch))


class UNetStep:
    """The model under DDP (with the sync probe on more than one rank), its optimiser and loss,
    and one epoch of timed steps."""

    def __init__(self, torch, spec: dict, ddp: TorchDDP, prec: TorchPrecision):
        from torch import nn

        self.torch, self.ddp, self.prec = torch, ddp, prec
        model = build_unet(torch, spec["model"].get("num_classes", voc_seg.NUM_CLASSES)).to(
            ddp.device, memory_format=prec.memory_format)
        self.observed = prec.observe(model.down[2][0], "down.2.0 (Conv2d)")
        self.params = sum(p.numel() for p in model.parameters())
        self.unwrapped, self.probe = model, None
        if ddp.world > 1:
            cuda = [ddp.device.index] if ddp.cuda else None
            model = nn.parallel.DistributedDataParallel(model, device_ids=cuda)
            self.probe = SyncProbe(torch, ddp.device)
            model.register_comm_hook(None, self.probe.hook)
        self.model = model
        self.optimiser = torch.optim.Adam(model.parameters(), lr=spec["training"]["lr"])
        self.loss_fn = nn.CrossEntropyLoss(ignore_index=voc_seg.IGNORE)
        self.settle = torch.cuda.synchronize if ddp.cuda else (lambda: None)
        self.planted = planted_matmul(torch, (spec.get("test_hooks") or {}).get("planted_matmul"), ddp.device)

    def untimed(self, batches):
        """One training step from `batches`, timed by no one: the profiling window's step."""
        device, prec = self.ddp.device, self.prec

        def one() -> None:
            x, y = next(batches)
            x = x.to(device, non_blocking=True, memory_format=prec.memory_format)
            self.optimiser.zero_grad(set_to_none=True)
            with prec.autocast():
                loss = self.loss_fn(self.model(x), y.to(device, non_blocking=True))
            self.planted()
            prec.backward_step(loss, self.optimiser)
        return one

    def epoch(self, run: TrainerRun, batches) -> list[float]:
        """One epoch's steps, each timed: data wait, compute, exposed sync (see the module doc)."""
        device, prec, probe, timer = self.ddp.device, self.prec, self.probe, run.timer
        timer.epoch_fixed(time.perf_counter() - run.epoch_started)
        losses = []
        timer.start()
        for _ in range(run.steps_per_epoch):
            t_fetch = time.perf_counter()
            if probe:
                probe.last = None
            x, y = next(batches)
            x = x.to(device, non_blocking=True, memory_format=prec.memory_format)
            y = y.to(device, non_blocking=True)
            self.settle()
            t_data = time.perf_counter()
            self.optimiser.zero_grad(set_to_none=True)
            with prec.autocast():
                loss = self.loss_fn(self.model(x), y)
            self.planted()
            # under DDP, backward returns once every gradient bucket is all-reduced: mark it
            backward_end: list = []
            prec.backward_step(loss, self.optimiser, between=(lambda marks=backward_end: marks.append(probe.mark()))
                               if probe else None)
            self.settle()
            t_done = time.perf_counter()
            sync_s = probe.exposed_since_last_bucket(backward_end[0]) if probe else 0.0
            losses.append(loss.item())
            run.step_done(data_wait_s=t_data - t_fetch, compute_s=t_done - t_data - sync_s, sync_s=sync_s)
        return losses


def planted_matmul(torch, size: int | None, device):
    """A test's planted slowdown in one named operation (cell.json test_hooks.planted_matmul): an
    extra size x size matrix product each step (aten::mm), else nothing."""
    if not size:
        return lambda: None
    a = torch.rand(size, size, device=device)
    return lambda: torch.mm(a, a)


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
