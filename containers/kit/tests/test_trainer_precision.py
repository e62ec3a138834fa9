"""The trainers' precision settings as objects, without their frameworks: mmengine's AMP wrapper
needs CUDA, so its config is what CI can check (the mmdet image test shows the CPU refusal is
mmengine's own)."""
import importlib
import sys
import types

import pytest

from scalebench_kit.precision import PrecisionError
from tests.support import ROOT


@pytest.fixture(scope="module")
def mmdet_train():
    pkg = types.ModuleType("trainers")  # as in the mmdet image: the torch trainers beside mmdet's
    pkg.__path__ = [str(ROOT / "containers" / "mmdet" / "trainers"), str(ROOT / "containers" / "torch" / "trainers")]
    saved = {k: sys.modules.pop(k) for k in list(sys.modules) if k == "trainers" or k.startswith("trainers.")}
    sys.modules["trainers"] = pkg
    try:
        yield importlib.import_module("trainers.mmdet_train")
    finally:
        for k in [k for k in sys.modules if k == "trainers" or k.startswith("trainers.")]:
            del sys.modules[k]
        sys.modules.update(saved)


@pytest.mark.parametrize("precision, kind, wrapper, dtype, scale", [
    ("fp32", "cpu", "OptimWrapper", None, None), ("fp32", "cuda", "OptimWrapper", None, None),
    ("tf32", "cuda", "OptimWrapper", None, None), ("bf16", "cuda", "AmpOptimWrapper", "bfloat16", 1.0),
    ("fp16", "cuda", "AmpOptimWrapper", "float16", "dynamic")])
def test_mmdet_optimiser_wrapper_per_precision(mmdet_train, precision, kind, wrapper, dtype, scale):
    w = mmdet_train.optim_wrapper({"lr": 0.02, "precision": precision}, kind)
    assert (w["type"], w.get("dtype"), w.get("loss_scale")) == (wrapper, dtype, scale)
    assert w["optimizer"] == {"type": "SGD", "lr": 0.02, "momentum": 0.9, "weight_decay": 0.0001}


@pytest.mark.parametrize("precision", ["bf16", "fp16", "tf32"])
def test_mmdet_on_cpu_slots_refuses_what_needs_cuda_with_the_reason(mmdet_train, precision):
    with pytest.raises(PrecisionError, match="CUDA"):
        mmdet_train.optim_wrapper({"lr": 0.02, "precision": precision}, "cpu")


def test_the_runner_config_turns_cudnn_benchmark_on_only_on_gpus(mmdet_train):
    spec = {"training": {"per_device_batch": 2, "lr": 0.02, "epochs": 1, "precision": "bf16"},
            "cell": {"seed": 0}, "model": {}}
    plan = {"steps_per_epoch": 3}
    gpu = mmdet_train.runner_config(spec, {}, plan, {}, {}, "cuda", 2)
    assert gpu["env_cfg"]["cudnn_benchmark"] is True and gpu["optim_wrapper"]["type"] == "AmpOptimWrapper"
    spec["training"]["precision"] = "fp32"
    assert mmdet_train.runner_config(spec, {}, plan, {}, {}, "cpu", 2)["env_cfg"]["cudnn_benchmark"] is False
