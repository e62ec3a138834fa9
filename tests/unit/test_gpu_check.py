"""make gpu-check's script checked without a GPU: its cell is the UNet's nightly cell as the
configs size it, and the profiling window's goal is judged only where a night's cell ran."""
import importlib.util
import sys

from tests.support import ROOT

from scalebench.core.config import Configs


def gpu_check():
    spec = importlib.util.spec_from_file_location("gpu_check", ROOT / "deploy" / "gpu-check" / "gpu_check.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_the_gpu_cell_is_the_unet_configs_nightly_cell():
    check = gpu_check()
    nightly = Configs().benchmarks["unet_torch_voc2007"].resolved("nightly")
    epochs, steps, batch, _, warmup = check.SIZES["gpu"]
    assert ([epochs], steps, batch, warmup) == (nightly.epochs, nightly.max_steps_per_epoch, nightly.per_gpu_batch,
                                                nightly.warmup_steps)
    assert check.PROFILE_STEPS == nightly.profile_steps


def test_the_window_goal_takes_the_larger_share_and_is_judged_on_a_gpu_only():
    check = gpu_check()
    runs = {"fp32": {"window": {"share": 0.04}}, "bf16": {"window": {"share": 0.12}}}
    assert check.window_goal(runs, cpu=False) == {"share": 0.12, "goal": "NOT met: at most 10% of a nightly cell's run"}
    runs["bf16"]["window"]["share"] = 0.06
    assert check.window_goal(runs, cpu=False)["goal"].startswith("met: ")
    assert check.window_goal(runs, cpu=True)["goal"].startswith("not judged: ")
