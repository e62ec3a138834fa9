"""Running a bisect between images (scalebench.analysis.bisect) with the real benchmark DAG: each
step is one run of `scalebench_<benchmark>` with the trigger param `ab_images` (the images to
compare, every repeat on each of them in balanced order, cells of role "bisect"), at one GPU count.
`scalebench bisect` runs the steps with `airflow dags test`; the `scalebench_bisect` DAG triggers
them on the scheduler. Both store every step (its run, figures and verdicts) and end with the
culprit's package diff against the image before it."""
from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Callable, Literal


from scalebench.analysis.bisect import Bisection
from scalebench.analysis.changes import diff_line, package_diff
from scalebench.core import paths
from scalebench.core.errors import RunFailed, telling_line
from scalebench.core.cells import BISECT
from scalebench.core.config import IMAGE_TAG, Benchmark, ConfigError, image_repository


def image_list(bench: Benchmark, kind: Literal["cpu", "gpu"], good: str, bad: str, candidates: list[str]) -> list[str]:
    """good, candidates..., bad as references of the benchmark's image repository; a bare tag is
    taken in that repository, anything else must name it."""
    repo = image_repository(bench.images[kind])
    out = []
    for what, ref in [("--good", good), *(("--candidates", c) for c in candidates), ("--bad", bad)]:
        tag = ref.rsplit(":", 1)[1] if ":" in ref and image_repository(ref) == repo else ref
        if not IMAGE_TAG.fullmatch(tag):
            raise ConfigError(f"{what} {ref!r}: expected a tag of {repo} (or {repo}:TAG)")
        out.append(f"{repo}:{tag}")
    if len(set(out)) != len(out):
        raise ConfigError(f"bisect images must be distinct, got {out}")
    return out


def step_conf(b: Bisection, profile: str, pairs: int) -> dict:
    """The trigger conf of the benchmark DAG's run for the next step."""
    return {"gpu_counts": [b.gpus], "profile": profile, "repeats": pairs, "seed": 0,
            "ab_images": [im.rsplit(":", 1)[1] for im in b.next_images()]}


def step_values(store, benchmark: str, run_id: str) -> dict[str, list[float]]:
    """A step run's figures per image (the image each cell ran, from its fingerprint)."""
    out: dict[str, list[float]] = {}
    for c in store.cells(benchmark=benchmark, run_id=run_id):
        f = c["figure"]
        if c["role"] == BISECT and f is not None and f.get("images_per_s") is not None:
            out.setdefault((f.get("fingerprint") or {}).get("image") or "unknown", []).append(f["images_per_s"])
    return out


def record_step(store, bisect_id: str, b: Bisection, run_id: str | None) -> list[str]:
    """Judge a step from the store, keep it, and say what it found."""
    step = b.record(step_values(store, b.benchmark, run_id) if run_id else {}, run_id)
    store.save_bisect_step(bisect_id, step.number, b.benchmark, run_id, {**step.to_json(), "state": b.to_json()})
    return [f"step {step.number} (run {run_id}): {', '.join(step.images)}"] + [f"  {line}" for line in step.lines]


def culprit_lines(b: Bisection, packages_of: Callable[[str], dict | None]) -> list[str]:
    """The result, each culprit with its package diff against the image before it
    (`packages_of(ref)`: an image's kept package list)."""
    out = b.result()
    for i, _ in sorted(b.culprits):
        kept = [packages_of(b.images[j]) for j in (i - 1, i)]
        diff = package_diff(*kept)
        out.append(f"{b.images[i - 1]} -> {b.images[i]}: {diff_line(diff)}")
    return out


def bisect_id_for(benchmark: str, gpus: int) -> str:
    return f"{benchmark}-{gpus}g-{dt.datetime.now(dt.timezone.utc).strftime('%Y%m%dT%H%M%S')}"


def airflow_env() -> dict:
    """This machine's Airflow (as `make airflow` sets it up) unless the caller's environment says."""
    root = paths.project_root() or Path.cwd()
    return {"AIRFLOW_HOME": str(paths.state_dir() / "airflow"), "AIRFLOW__CORE__DAGS_FOLDER": str(root / "dags"),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False", "AIRFLOW__CORE__EXECUTOR": "LocalExecutor",
            "GX_ANALYTICS_ENABLED": "false", **os.environ}


def dags_test_runner(benchmark: str, store, timeout_s: float = 3600) -> Callable[[dict], str]:
    """A step runner: one `airflow dags test` of the benchmark's DAG; returns the run id it made."""
    exe = Path(sys.executable).parent / "airflow"

    def run(conf: dict) -> str:
        before = {c["run_id"] for c in store.cells(benchmark=benchmark) if c["role"] == BISECT}
        out = subprocess.run([str(exe), "dags", "test", f"scalebench_{benchmark}", "-c", json.dumps(conf)],
                             env=airflow_env(), capture_output=True, text=True, timeout=timeout_s)
        made = sorted({c["run_id"] for c in store.cells(benchmark=benchmark) if c["role"] == BISECT} - before)
        if not made:
            raise RunFailed(f"the bisect step's run of scalebench_{benchmark} recorded no cell (airflow dags test "
                            f"exit code {out.returncode}: {telling_line(out.stdout + out.stderr)})")
        return made[-1]

    return run


def bisect(store, b: Bisection, run_step: Callable[[dict], str], profile: str, pairs: int,
           packages_of: Callable[[str], dict | None], log: Callable[[str], None] = print,
           bisect_id: str | None = None) -> tuple[str, list[str]]:
    """Every step until the bisection is done; (its id, the result lines)."""
    bisect_id = bisect_id or bisect_id_for(b.benchmark, b.gpus)
    while not b.done:
        for line in record_step(store, bisect_id, b, run_step(step_conf(b, profile, pairs))):
            log(line)
    return bisect_id, culprit_lines(b, packages_of)
