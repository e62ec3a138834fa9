"""A planted cause for the profile diff: the kit's hold trainer run in a training image, profiled,
plain or as an image built N times slower would run it (SCALEBENCH_TEST_IMAGE_SLOWDOWN: its extra
time spent in a matrix multiply each step, so all of the slowdown is that one operation). Shared by
the TensorFlow family's test and bench/profiling.py."""
from __future__ import annotations

import subprocess
from pathlib import Path

from scalebench_kit.contract import load_result, write_json_atomic
from tests.support.samples import sample_cell, sample_spec

PLANTED = 1.25       # the slower side: a step 1.25 times as long
PROFILE_STEPS = 3


def hold_profile(image: str, out: Path, slowdown: float) -> dict:
    """The profile (the result's `profile`) of one hold cell in `image`: 4 steps of 0.2 s, then the window."""
    out.mkdir(parents=True)
    spec = sample_spec(sample_cell(gpus=1, epochs=1))
    spec["training"]["profile_steps"] = PROFILE_STEPS
    write_json_atomic(out / "cell.json", spec)
    proc = subprocess.run(["docker", "run", "--rm", "-e", f"SCALEBENCH_TEST_IMAGE_SLOWDOWN={slowdown}", "-v",
                           f"{out}:/results", image, "python", "-m", "scalebench_kit.hold", "--epoch-seconds", "0.8",
                           "--step-seconds", "0.2"], capture_output=True, text=True, timeout=240)
    if proc.returncode:
        raise RuntimeError(f"{image}: the hold trainer failed: {(proc.stdout + proc.stderr)[-3000:]}")
    return load_result(out / "metrics.json")["profile"]
