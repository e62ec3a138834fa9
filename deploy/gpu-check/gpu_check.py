#!/usr/bin/env python3
"""GPU check of a GPU host before its first night (make gpu-check, deploy/gpu-check/run.sh).
Where Docker and the built GPU image are there (scalebench/torch:gpu, or GPU_CHECK_IMAGE), run.sh
runs this script inside that image with the host's GPUs: the image's own torch, kit and UNet
trainer are what is checked. Elsewhere (a lent GPU machine: Python 3.12 with a CUDA torch and
nvidia-ml-py, no Docker engine, no network) it runs natively and only the kit and the trainer
travel (this repository's containers/kit and containers/torch/trainers, put on PYTHONPATH); the
kit's other needs (numpy, pillow, jsonschema) come from the git-ignored wheels folder `make
gpu-check-wheels` fills beside this script, installed into a venv that sees the host's torch.

    python3 deploy/gpu-check/gpu_check.py OUT_DIR          # on the GPU host (make gpu-check)
    python3 deploy/gpu-check/gpu_check.py --cpu OUT_DIR    # the CPU twin: same steps, gloo, no NVML

Steps: NVML pre-flight of device 0 (the orchestrator's own check, with bf16's compute
capability); a synthetic VOC2007 tree in the real layout; cell.json for a nightly-size UNet cell
on every GPU the process sees; the UNet trainer under torchrun (NCCL on GPUs) with NVML sampling,
once in fp32 and once in bf16 (the nightly default), each contract validated and summarised with
its throughput, breakdown, observed dtype and the share of its run the profiling window took
(the goal: at most 10 % of a nightly cell); then, with two or more GPUs, an all-reduce
bus-bandwidth sweep over our models' gradient sizes (allreduce_sweep.py; on one GPU: n/a).
Writes <precision>/{cell.json,metrics.json,events.jsonl}, allreduce.json and gpu-check.json into
OUT_DIR; exits non-zero with the reason when any step fails.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
KIT, TRAINERS, SRC = ROOT / "containers" / "kit", ROOT / "containers" / "torch", ROOT / "src"
# run.sh runs this script inside the built GPU image where Docker is: the image's own kit and trainer
# then (its PYTHONPATH), only the pre-flight check comes from this checkout
IN_IMAGE = os.environ.get("SCALEBENCH_GPU_CHECK_IMAGE")
sys.path[:0] = [str(SRC)] if IN_IMAGE else [str(KIT), str(SRC)]

# (epochs, steps per epoch, batch per device, image px, warm-up steps). GPU: the UNet config's
# nightly profile (55 epochs of 1 step, 5 warm-up, 30 per GPU; a test holds it to the config) at
# VOC's 256 px; the CPU twin: small.
SIZES = {"gpu": (55, 1, 30, 256, 5), "cpu": (2, 3, 4, 48, 1)}
WINDOW_GOAL = 0.10  # the profiling window adds at most this share of a nightly cell's run
PRECISIONS = ("fp32", "bf16")  # fp32 with TF32 off, and the nightly default on GPU hosts
PROFILE_STEPS = 5  # the nightly profile's window after the timed steps (scalebench_kit.profiling)


def fail(out: Path, step: str, reason: str) -> None:
    (out / "gpu-check.json").write_text(json.dumps({"ok": False, "step": step, "reason": reason}, indent=2))
    print(f"gpu-check FAILED at {step}: {reason}", file=sys.stderr)
    sys.exit(1)


def preflight(out: Path, cpu: bool) -> dict:
    if cpu:
        return {"status": "skipped", "reason": "CPU twin: no NVML"}
    from scalebench.cell.preflight import PreflightFailed, check  # stdlib + pynvml only

    try:
        report = check(["0"], precision="bf16")
    except PreflightFailed as exc:
        fail(out, "preflight", f"{exc} {json.dumps(exc.report)}")
    if report.get("status") == "skipped":
        fail(out, "preflight", report["reason"])
    return report


def cell_spec(devices: int, cpu: bool, data: Path, train_images: int, precision: str) -> dict:
    from scalebench_kit.contract import CONTRACT_VERSION

    epochs, steps, batch, size, warmup = SIZES["cpu" if cpu else "gpu"]
    return {
        "contract_version": CONTRACT_VERSION,
        "cell": {"key": "gpu-check-unet-nightly", "benchmark": "unet_torch_voc2007",
                 "dag_id": "scalebench_unet_torch_voc2007", "run_id": f"gpu_check__{int(time.time())}",
                 "run_type": "manual", "host": os.uname().nodename, "gpus": devices, "epochs": epochs, "repeat": 1,
                 "profile": "nightly", "seed": 0, "attempt": 1, "label": f"{devices} GPU · {precision} gpu-check"},
        "devices": {"kind": "cpu" if cpu else "gpu", "ids": [str(i) for i in range(devices)], "count": devices},
        "training": {"per_device_batch": batch, "global_batch": batch * devices, "scaling_mode": "weak",
                     "lr_policy": {"rule": "linear", "base_lr": 0.001, "reference_batch": batch},
                     "lr": 0.001 * devices, "warmup_steps": warmup, "epochs": epochs, "max_steps_per_epoch": steps,
                     "precision": precision, "profile_steps": PROFILE_STEPS},  # the window: CUPTI on a GPU
        "data": {"name": "voc2007", "format": "vocdevkit-2007-seg", "path": str(data), "fingerprint": "synthetic",
                 "train_limit": train_images, "test_limit": None, "image_size": size},
        "model": {"name": "unet_torch_voc2007", "architecture": "UNet", "num_classes": 21},
        "provenance": {"image": IN_IMAGE, "git_revision": os.environ.get("SCALEBENCH_GIT_REVISION")},
    }


def main(argv: list[str]) -> None:
    cpu = "--cpu" in argv
    args = [a for a in argv if a != "--cpu"]
    if len(args) != 1:
        sys.exit(__doc__)
    out = Path(args[0]).resolve()
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    try:
        import torch
    except ImportError as exc:
        fail(out, "import torch", str(exc))
    devices = 2 if cpu else torch.cuda.device_count()
    if devices < 1:
        fail(out, "cuda", f"torch {torch.__version__} sees no CUDA device (CUDA build: {torch.version.cuda})")
    checked = preflight(out, cpu)

    from scalebench_kit import voc_seg
    from scalebench_kit.contract import ContractError, load_result, write_json_atomic
    from scalebench_kit.events import read_events, window_share

    _, steps, batch, size, _ = SIZES["cpu" if cpu else "gpu"]
    train_images = steps * batch * devices
    data = out / "data"
    if not (data / "VOCdevkit").exists():
        voc_seg.write_synthetic(data, train_images=train_images, test_images=2 * batch + 1, size=size, seed=1)
    travel = [] if IN_IMAGE else [str(TRAINERS), str(KIT)]
    env = {**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "4"),
           "PYTHONPATH": os.pathsep.join([*travel, os.environ.get("PYTHONPATH", "")])}
    trainer = subprocess.run([sys.executable, "-c", "import importlib.util as u; print(u.find_spec('trainers.unet_voc').origin)"],
                             env=env, capture_output=True, text=True).stdout.strip()
    runs = {}
    for precision in PRECISIONS:
        sub = out / precision
        sub.mkdir(exist_ok=True)
        write_json_atomic(sub / "cell.json", cell_spec(devices, cpu, data, train_images, precision))
        cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={devices}",
               "-m", "trainers.unet_voc"]
        proc = subprocess.run(cmd, env={**env, "SCALEBENCH_RESULTS_DIR": str(sub)}, cwd=sub, capture_output=True,
                              text=True, timeout=600)
        (sub / "trainer.log").write_text(proc.stdout + proc.stderr)
        if proc.returncode != 0:
            fail(out, f"trainer ({precision})",
                 f"exit {proc.returncode}: {(proc.stdout + proc.stderr).strip().splitlines()[-1:]}")
        try:
            doc = load_result(sub / "metrics.json")
        except ContractError as exc:
            fail(out, f"contract ({precision})", str(exc))
        b = doc["timing"]["breakdown"]
        if not cpu and not (b.get("gpu") or {}).get("devices"):
            fail(out, "nvml sampling", "no NVML utilisation samples in the contract")
        if doc["precision"]["observed_dtype"] != doc["precision"]["expected_dtype"]:
            fail(out, f"precision ({precision})", f"observed {doc['precision']}")
        prof = doc.get("profile") or {}
        if prof.get("why_not") or not prof.get("ops") or (not cpu and not prof.get("kernels")):
            fail(out, f"profiling window ({precision})",
                 prof.get("why_not") or f"{'no kernel' if prof.get('ops') else 'no operation'} in the profile")
        window = window_share(read_events(sub / "events.jsonl"))
        if window is None:
            fail(out, f"profiling window ({precision})", "no profile_start and profile_stop in events.jsonl")
        runs[precision] = {"images_per_s": doc["timing"]["images_per_s"], "train_s": doc["timing"]["train_s"],
                           "window": {"seconds": round(window[0], 3), "run_s": round(window[1], 3),
                                      "share": round(window[0] / window[1], 4)},
                           "profile": {"step_s": prof["step_s"], "ops": [o["name"] for o in prof["ops"][:5]],
                                       "kernels": [k["name"] for k in prof["kernels"][:5]], "traces": prof["traces"]},
                           "step_s": {k: b[k] for k in ("step_s", "data_wait_s", "compute_s", "sync_s", "other_s")},
                           "shares": b["shares"], "observed_dtype": doc["precision"]["observed_dtype"],
                           "switches": doc["precision"]["switches"], "metrics": doc["metrics"], "gpu": b.get("gpu")}
    summary = {
        "ok": True, "image": IN_IMAGE, "trainer": trainer, "devices": devices, "preflight": checked,
        "system": doc["system"], "precisions": runs,
        "bf16_over_fp32_throughput": round(runs["bf16"]["images_per_s"] / runs["fp32"]["images_per_s"], 3),
        "profiling_window": window_goal(runs, cpu),
        "allreduce": allreduce(out, devices, cpu, env),
    }
    summary["seconds"] = round(time.perf_counter() - t0, 1)
    (out / "gpu-check.json").write_text(json.dumps(summary, indent=2, default=str))
    print(json.dumps(summary, indent=2, default=str))


def window_goal(runs: dict, cpu: bool) -> dict:
    """The profiling window's largest share of the trainer's run over the precisions, against
    WINDOW_GOAL (the trainer's run alone: the cell's container start and checks would only lower
    it). The CPU twin's small cell says nothing of a night's: not judged there."""
    share = max(r["window"]["share"] for r in runs.values())
    verdict = ("not judged: the CPU twin's cell is not a nightly one" if cpu else
               f"{'met' if share <= WINDOW_GOAL else 'NOT met'}: at most {WINDOW_GOAL:.0%} of a nightly cell's run")
    return {"share": share, "goal": verdict}


def allreduce(out: Path, devices: int, cpu: bool, env: dict) -> dict | str:
    """The bus-bandwidth sweep over our gradient sizes (NCCL; gloo on the CPU twin); n/a on one GPU."""
    if devices < 2:
        return "n/a: one GPU, no all-reduce to measure"
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={devices}",
           str(Path(__file__).with_name("allreduce_sweep.py")), str(out / "allreduce.json"), *(["--cpu"] if cpu else [])]
    proc = subprocess.run(cmd, env=env, cwd=out, capture_output=True, text=True, timeout=600)
    if proc.returncode != 0:
        fail(out, "all-reduce sweep", f"exit {proc.returncode}: {(proc.stdout + proc.stderr).strip().splitlines()[-1:]}")
    return json.loads((out / "allreduce.json").read_text())


if __name__ == "__main__":
    main(sys.argv[1:])
