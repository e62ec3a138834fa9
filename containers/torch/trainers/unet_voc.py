"""UNet + PyTorch + VOC2007 semantic segmentation, on one device or under torchrun.

One script, unchanged: `python -m trainers.unet_voc` trains on one device; `torchrun
--nproc-per-node=N -m trainers.unet_voc` runs N processes under DistributedDataParallel (NCCL
on GPUs, gloo on CPU device slots). Weak scaling: each process takes per-device batch images
per step from its DistributedSampler shard, so the global batch is per-device batch x N; the LR
comes from cell.json (the config's policy). Warm-up steps are timed apart from steady training;
evaluation runs after training, outside the timed region, over the whole val split exactly once
(each rank a disjoint slice, confusion matrices summed), so no image counts twice.
"""
from __future__ import annotations

import os
import time

from scalebench_kit import voc_seg
from scalebench_kit.metrics import confusion_matrix, scores
from scalebench_kit.runtime import Cell, StepTimer, main_guard, system_fingerprint


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


def main() -> None:
    cell = Cell()
    cell.events.log("init_start")
    import numpy as np
    import torch
    from torch import nn
    from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
    spec, train, data = cell.spec, cell.training, cell.spec["data"]
    rank, world, device, backend = setup_distributed(torch, cell.devices)
    if train["global_batch"] != train["per_device_batch"] * world:
        raise RuntimeError(f"global batch {train['global_batch']} != per-device batch {train['per_device_batch']} x {world}")
    seed = spec["cell"]["seed"]
    torch.manual_seed(seed)

    size = data.get("image_size") or 256
    x_train, y_train = voc_seg.read_split(data["path"], "train", size, data.get("train_limit"))
    x_val, y_val = voc_seg.read_split(data["path"], "val", size, data.get("test_limit"))
    mean, std = x_train.mean(axis=(0, 1, 2)), x_train.std(axis=(0, 1, 2)) + 1e-6

    def tensors(x, y):
        x = torch.from_numpy(((x.astype("float32") - mean) / std).astype("float32")).permute(0, 3, 1, 2).contiguous()
        return x, torch.from_numpy(y.astype("int64"))

    train_set = TensorDataset(*tensors(x_train, y_train))
    sampler = DistributedSampler(train_set, num_replicas=world, rank=rank, shuffle=True, seed=seed, drop_last=True)
    loader = DataLoader(train_set, batch_size=train["per_device_batch"], sampler=sampler, drop_last=True)
    steps_per_epoch = len(loader)
    if steps_per_epoch < 1:
        raise RuntimeError(f"train split has {len(train_set)} images, fewer than one global batch of {train['global_batch']}")
    if train.get("max_steps_per_epoch"):
        steps_per_epoch = min(steps_per_epoch, train["max_steps_per_epoch"])
    cell.events.log("data_ready", len(train_set), val_images=len(x_val), steps_per_epoch=steps_per_epoch)

    model = build_unet(torch, spec["model"].get("num_classes", voc_seg.NUM_CLASSES)).to(device)
    params = sum(p.numel() for p in model.parameters())
    if world > 1:
        model = nn.parallel.DistributedDataParallel(model, device_ids=[device.index] if device.type == "cuda" else None)
    optimiser = torch.optim.Adam(model.parameters(), lr=train["lr"])
    loss_fn = nn.CrossEntropyLoss(ignore_index=voc_seg.IGNORE)
    cell.events.log("model_ready", params, world_size=world, backend=backend, strategy="DistributedDataParallel"
                    if world > 1 else "single process")
    setup_s = cell.elapsed()
    cell.events.log("init_stop", setup_s)

    timer = StepTimer(train["warmup_steps"])
    epoch_s, loss_curve = [], []
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    model.train()
    for epoch in range(train["epochs"]):
        t_epoch = time.perf_counter()
        cell.events.log("epoch_start", epoch + 1)
        sampler.set_epoch(epoch)
        losses = []
        timer.start()
        for step, (x, y) in enumerate(loader):
            if step == steps_per_epoch:
                break
            x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
            optimiser.zero_grad(set_to_none=True)
            loss = loss_fn(model(x), y)
            loss.backward()  # DDP all-reduces the gradients here
            optimiser.step()
            sync()
            timer.step_done()
            losses.append(loss.item())
            if len(timer.step_times) == timer.warmup_steps:
                cell.events.log("warmup_stop", timer.warmup_s)
        epoch_s.append(time.perf_counter() - t_epoch)
        loss_curve.append(float(np.mean(losses)))
        cell.events.log("epoch_stop", epoch + 1, loss=loss_curve[-1], seconds=epoch_s[-1])
    cell.events.log("train_stop", timer.train_s)

    cell.events.log("eval_start")
    t_eval = time.perf_counter()
    model.eval()
    x_v, y_v = tensors(x_val, y_val)
    mine = list(range(rank, len(x_v), world))  # disjoint slices: every val image exactly once
    cm = np.zeros((voc_seg.NUM_CLASSES, voc_seg.NUM_CLASSES), dtype=np.int64)
    with torch.no_grad():
        for start in range(0, len(mine), train["per_device_batch"]):
            idx = mine[start:start + train["per_device_batch"]]
            pred = model(x_v[idx].to(device)).argmax(dim=1).cpu().numpy()
            cm += confusion_matrix(y_v[idx].numpy(), pred, voc_seg.NUM_CLASSES, ignore=voc_seg.IGNORE)
    if world > 1:
        total = torch.from_numpy(cm).to(device)
        torch.distributed.all_reduce(total)
        cm = total.cpu().numpy()
    metrics = scores(cm)
    eval_s = time.perf_counter() - t_eval
    cell.events.log("eval_stop", eval_s, **metrics)

    system = system_fingerprint("pytorch", torch.__version__, backend=backend, cuda=torch.version.cuda,
                                nccl=".".join(map(str, torch.cuda.nccl.version())) if device.type == "cuda" else None)
    names = [torch.cuda.get_device_name(i) for i in range(world)] if device.type == "cuda" else \
        [f"cpu:{i}" for i in range(world)]
    cell.finish(system=system, world_size=world, device_names=names, setup_s=setup_s, timer=timer, epoch_s=epoch_s,
                eval_s=eval_s, loss_curve=loss_curve, metrics=metrics,
                model={"parameters": int(params), "architecture": "UNet", "strategy": "DistributedDataParallel"})
    if world > 1:
        torch.distributed.destroy_process_group()


if __name__ == "__main__":
    main_guard(main)
