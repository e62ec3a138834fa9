"""The mmengine config an mmdetection cell resolves to, built as plain objects (no mmdet, no
GPU): what differs between GPU hosts and CPU device slots, and what our policy fixes."""
import sys

import pytest

from tests.support import ROOT

# the image merges both folders into one `trainers` package; on the host they are namespace packages
sys.path[:0] = [str(ROOT / "containers/mmdet"), str(ROOT / "containers/torch")]
from trainers.mmdet_train import runner_config  # noqa: E402

PLAN = {"train_images": 16, "global_batch": 4, "steps_per_epoch": 4, "dropped_images": 0}


def spec(**model):
    return {"cell": {"seed": 3}, "model": {"architecture": "x", **model},
            "training": {"per_device_batch": 2, "global_batch": 4, "epochs": 5, "lr": 0.005}}


@pytest.mark.parametrize("kind, world, backend, launcher, wrapper", [
    ("cuda", 4, "nccl", "pytorch", None),   # mmengine's own wrapper: device_ids=[LOCAL_RANK]
    ("cuda", 1, "nccl", "none", None),
    ("cpu", 2, "gloo", "pytorch", {"type": "MMDistributedDataParallel", "device_ids": None, "broadcast_buffers": False}),
    ("cpu", 1, "gloo", "none", None),
])
def test_device_settings_per_host_kind(kind, world, backend, launcher, wrapper):
    cfg = runner_config(spec(), {"type": "FasterRCNN"}, PLAN, {"type": "VOCDataset"}, {}, kind, world)
    assert cfg["env_cfg"]["dist_cfg"] == {"backend": backend}
    assert (cfg["launcher"], cfg["model_wrapper_cfg"]) == (launcher, wrapper)


def test_the_policy_not_mmdets_defaults():
    cfg = runner_config(spec(), {}, PLAN, {}, {}, "cpu", 2)
    assert cfg["optim_wrapper"]["optimizer"]["lr"] == 0.005 and cfg["param_scheduler"] == []  # constant, ours
    assert cfg["auto_scale_lr"]["enable"] is False and cfg["load_from"] is None  # nothing downloaded
    assert cfg["train_cfg"]["max_epochs"] == 5 and cfg["train_cfg"]["val_interval"] > 5  # no validation in the loop
    assert cfg["default_hooks"]["checkpoint"] is None
    assert cfg["train_dataloader"]["batch_size"] == 2 and cfg["train_dataloader"]["sampler"]["steps_per_epoch"] == 4
    on = runner_config(spec(auto_scale_lr=True, init_checkpoint="/cache/frcnn.pth"), {}, PLAN, {}, {}, "cpu", 2)
    assert on["auto_scale_lr"]["enable"] is True and on["load_from"] == "/cache/frcnn.pth"
