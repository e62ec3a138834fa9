"""Every epoch covers the whole split at 1-4 devices, through the loaders the trainers build, in
their images: the torch stacks' DataLoader over the kit's sampler (UNet, mmdet) and the Keras
trainer's tf.data pipeline. A split of 209 items (VOC2007's segmentation train split) at 30 per
device leaves a remainder at every count. Model Garden's reader keeps full batches (its plan is
tested in tests/integration/tf_detection)."""
import json
import os
import subprocess
from collections import Counter

import pytest

from scalebench_kit.epochs import epoch_plan
from tests.support.engine import docker_ready

SPLIT, PER_DEVICE, EPOCHS = 209, 30, 2

TORCH_LOADER = f"""
import json, torch
from scalebench_kit.epochs import epoch_plan, epoch_sampler
out = {{}}
for n in (1, 2, 3, 4):
    plan = epoch_plan({SPLIT}, {PER_DEVICE} * n, shards=n)
    for epoch in range({EPOCHS}):
        ranks = []
        for rank in range(n):
            sampler = epoch_sampler(torch, plan, 0, rank, n)
            sampler.set_epoch(epoch)
            loader = torch.utils.data.DataLoader(list(range({SPLIT})), batch_size={PER_DEVICE}, sampler=sampler)
            ranks.append([b.tolist() for b in loader])
        out[f"{{n}}/{{epoch}}"] = [sum((r[k] for r in ranks), []) for k in range(len(ranks[0]))]
        assert len({{len(r) for r in ranks}}) == 1, "ranks run different numbers of steps"
print(json.dumps(out))
"""

KERAS_LOADER = f"""
import json
import numpy as np, tensorflow as tf
from scalebench_kit.epochs import epoch_plan
from trainers.resnet50_keras import epoch_dataset
out = {{}}
for n in (1, 2, 3, 4):
    plan = epoch_plan({SPLIT}, {PER_DEVICE} * n, shards=n)
    batches = iter(epoch_dataset(tf, np.arange({SPLIT}), np.zeros({SPLIT}), plan, 0))
    for epoch in range({EPOCHS}):
        out[f"{{n}}/{{epoch}}"] = [next(batches)[0].numpy().tolist() for _ in range(plan["steps_per_epoch"])]
print(json.dumps(out))
"""


def batches_in(image: str, script: str) -> dict:
    proc = subprocess.run(["docker", "run", "--rm", "--network", "none", image, "python", "-c", script],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.slow
@pytest.mark.timeout(400)
@pytest.mark.parametrize("image, script", [("scalebench/torch:cpu", TORCH_LOADER), ("scalebench/mmdet:cpu", TORCH_LOADER),
                                           ("scalebench/tensorflow:cpu", KERAS_LOADER)],
                         ids=["unet-torch", "mmdet", "keras"])
def test_each_epoch_covers_the_whole_split_at_every_device_count(image, script):
    if not docker_ready(image) and os.environ.get("CI") != "true":
        pytest.skip(f"needs a Docker engine and {image} (make images)")
    got = batches_in(image, script)
    for n in (1, 2, 3, 4):
        plan = epoch_plan(SPLIT, PER_DEVICE * n, shards=n)
        for epoch in range(EPOCHS):
            steps = got[f"{n}/{epoch}"]
            seen = Counter(i for step in steps for i in step)
            assert set(seen) == set(range(SPLIT)), (n, epoch, sorted(set(range(SPLIT)) - set(seen)))
            assert len(steps) == plan["steps_per_epoch"] and sum(seen.values()) == plan["samples_per_epoch"]
            assert sum(seen.values()) - SPLIT == plan["repeated_images"] < n  # repeats: fewer than one per device
            assert [len(s) for s in steps] == [PER_DEVICE * n] * (len(steps) - 1) + [plan["last_batch"]]
            assert plan["last_batch"] % n == 0  # the smaller last batch splits evenly over the devices
