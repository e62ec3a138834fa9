"""The cell matrix: benchmark x GPU count x precision x epochs x repeat x profile, within one DAG run.

A cell's key includes its DAG run so nights accumulate history; the attempt (task try) is not
part of the key, so a retry is a new attempt of the same cell.
"""
from __future__ import annotations

import hashlib
import json
from typing import Any, cast

from scalebench.core.config import Benchmark, ConfigError, Fleet, Host, with_tag
from scalebench.core.records import PlannedCell

IDENTITY = ("dag_id", "run_id", "benchmark", "host", "gpus", "epochs", "repeat", "profile", "precision")


def cell_key(identity: dict) -> str:
    """The identity's hash; a bisect cell's image is part of its identity (one run runs several)."""
    canon = json.dumps({k: identity[k] for k in IDENTITY if k in identity} | (
        {"image": identity["image"]} if identity.get("image") else {}), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canon.encode()).hexdigest()[:20]


def cell_id(gpus: int, precision: str, epochs: int, repeat: int) -> str:
    """A cell's folder name within its run: g<gpus>-<precision>-e<epochs>-r<repeat>."""
    return f"g{gpus}-{precision}-e{epochs}-r{repeat}"


def cell_label(gpus: int, epochs: int, repeat: int, capped_at: int | None = None, precision: str = "fp32") -> str:
    """"2 GPUs · bf16 · 3 epochs · repeat 1"; a capped epoch says its steps ("5 epochs of 15 steps")."""
    steps = f" of {capped_at} steps" if capped_at else ""
    return (f"{gpus} GPU{'s' if gpus != 1 else ''} · {precision} · {epochs} epoch{'s' if epochs != 1 else ''}{steps} "
            f"· repeat {repeat}")


def fitting_label(label: str) -> str:
    """A cell's label as the store's column holds it (an image tag is 128 characters at most: it fits)."""
    from scalebench.core.columns import check_width

    try:
        return check_width(label, "cells.label", "cell label")
    except ValueError as exc:
        raise ConfigError(str(exc)) from None


def timing_policy(profile: str, host: Host | None = None) -> str:
    """exclusive: a timed cell has its host to itself (co-scheduled jobs distort timings);
    packed: cells share a host's free devices (smoke runs, where time is not the point).
    A host's own `timing_policy` in the fleet overrides the profile's."""
    if host is not None and host.timing_policy:
        return host.timing_policy
    return "packed" if profile == "smoke" else "exclusive"


def host_for(bench: Benchmark, profile: str, fleet: Fleet, gpu_counts: list[int]) -> Host:
    """All cells of one run go to one host, so their times compare like with like.

    smoke runs on a CPU host (emulated devices) when there is one; nightly/full need GPUs (and
    on a GPU fleet take the benchmark's assigned host instead). Only the benchmark's `hosts:`.
    """
    kinds = ["cpu", "gpu"] if profile == "smoke" else ["gpu"]
    need = max(gpu_counts)
    for kind in kinds:
        for host in fleet.hosts_of(kind):
            if len(host.device_ids) >= need and (bench.hosts is None or host.name in bench.hosts):
                return host
    raise ConfigError(f"{bench.id}: no {' or '.join(kinds).upper()} host in the fleet has {need} devices "
                      f"for profile {profile!r} (hosts: {[(h.name, h.kind, len(h.device_ids)) for h in fleet.hosts]}); "
                      "give a fleet with GPU hosts (--fleet / SCALEBENCH_FLEET, e.g. include/configs/fleet.gpu-example.yaml)")


ACCURACY = "accuracy"  # the run type of the weekly accuracy DAG's runs (scheduled or triggered)
PROBE = "probe"        # the host probe's DAG kind and its cells' role: a night factor, never a figure
MEASURE = "measure"    # a scheduled or manual cell: a figure
RERUN = "rerun"        # a same-night rerun of a flagged figure (on tonight's image: the A/B's B arm)
AB_PREVIOUS = "ab_previous"  # the A/B's A arm: the flagged cell on the image its baseline was measured on
BISECT = "bisect"      # a bisect step's cell: one of the images it compares, never a figure of the night


def repeats_for(bench: Benchmark, run_type: str, requested: int) -> int:
    """Scheduled runs repeat every cell `schedule_repeats` times (a verdict needs repeats to
    have an interval); a manual run repeats what its trigger asked for."""
    return bench.schedule_repeats if run_type == "scheduled" else requested


def plan(bench: Benchmark, fleet: Fleet, *, profile: str, run_id: str, gpu_counts: list[int] | None = None,
         epochs: list[int] | None = None, repeats: int = 1, seed: int = 0, run_type: str = "manual",
         night: str | None = None, image_tag: str | None = None, host: Host | None = None,
         precisions: list[str] | None = None, dag_id: str | None = None,
         ab_images: list[str] | None = None, profile_ops: bool = False) -> list[PlannedCell]:
    """Every cell of one run, in a stable order (GPU count, precision, epochs, repeat). `image_tag`:
    run a candidate image, another tag of the configured image's repository. `host`: the
    benchmark's assigned host (else the first that fits). `precisions`: the trigger's presets
    (default: the profile's), each one the stack runs on the host's kind. `ab_images`: a bisect
    step, tags of the repository compared in one run: every repeat runs each of them (role
    "bisect"), odd repeats in the given order and even ones reversed (balanced). `profile_ops`:
    each cell profiled after its timed steps (the profile's profile_steps)."""
    res = bench.resolved(profile)
    gpu_counts = sorted(gpu_counts or bench.gpu_counts)
    epochs = sorted(epochs or res.epochs)
    if repeats < 1:
        raise ConfigError(f"repeats must be >= 1, got {repeats}")
    bad = [n for n in gpu_counts if n < 1 or n > fleet.max_devices]
    if bad:
        raise ConfigError(f"gpu_counts {bad} cannot be served: the largest host has {fleet.max_devices} devices")
    if host is not None and len(host.device_ids) < max(gpu_counts):
        raise ConfigError(f"{bench.id}: host {host.name} has {len(host.device_ids)} devices, gpu_counts {gpu_counts}")
    host = host or host_for(bench, profile, fleet, gpu_counts)
    image = with_tag(bench.images[host.kind], image_tag) if image_tag else None
    arms = [with_tag(bench.images[host.kind], t) for t in ab_images or []]
    if ab_images is not None and (len(arms) < 2 or len(set(arms)) != len(arms)):
        raise ConfigError(f"ab_images {ab_images}: expected at least two different tags of "
                          f"{bench.images[host.kind]}'s repository")
    precisions = list(precisions or res.precision)
    refusal = bench.stack_config.precision.check(bench.stack, host.kind, precisions)
    if refusal:
        raise ConfigError(f"{bench.id}: parameter 'precisions' on host {host.name}: {refusal}")
    cells: list[PlannedCell] = []
    for n in gpu_counts:
        per_device, global_batch = res.batches(n)
        for p in precisions:
            for e in epochs:
                steps = res.steps(n, e)
                capped_at = steps.steps_per_epoch if steps and steps.capped else None
                for r in range(1, repeats + 1):
                    order: list[str | None] = list(arms if r % 2 else arms[::-1]) or [image]
                    for arm in order:
                        ident: dict[str, Any] = {"dag_id": dag_id or bench.dag_id, "run_id": run_id, "benchmark": bench.id,
                                 "host": host.name, "gpus": n, "epochs": e, "repeat": r, "profile": profile,
                                 "precision": p}
                        tag = arm.rsplit(":", 1)[1] if arms and arm else None
                        cell = cast(PlannedCell, dict(
                            ident, key=cell_key({**ident, "image": arm if arms else None}),
                            cell_id=cell_id(n, p, e, r) + (f"-{tag}" if tag else ""),
                            label=fitting_label(cell_label(n, e, r, capped_at, p) + (f" · image {tag}" if tag else "")),
                            run_type=run_type, night=night,
                            seed=seed + r - 1,  # distinct per repeat, the same across GPU counts and precisions
                            per_device_batch=per_device, global_batch=global_batch, scaling_mode=bench.scaling_mode,
                            lr=bench.lr_policy.lr_for(global_batch)))
                        if arm:
                            cell["image"] = arm
                        if arms:
                            cell["role"] = BISECT
                        if profile_ops:
                            cell["profile_steps"] = res.profile_steps
                        cells.append(cell)
    return cells


def group_id(host: str, gpus: int) -> str:
    """Task group of one (host, GPU count): its cells, train and validate tasks."""
    return f"{host.replace('-', '_')}_{gpus}gpu"


def group_by_task(cells: list[PlannedCell]) -> dict[str, list[PlannedCell]]:
    groups: dict[str, list[PlannedCell]] = {}
    for c in cells:
        groups.setdefault(group_id(c["host"], c["gpus"]), []).append(c)
    return groups
