"""A rehearsal of a night's plan before its first real night: the real benchmark DAGs, scheduler
code, operators, validation, recording and report, on CPU hosts standing in for the fleet's GPU
hosts, with the kit's hold trainer in place of each framework. Each cell holds for its planned
warm-up and timed steps at a planted step time (the plan's, scaled down), so the report must
give back the planted relative times, and each host's makespan can be set against the plan.

Isolated: its own Airflow home, results store and configs under one work folder.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from scalebench.core import paths
from scalebench.core.config import STACKS_FILE, ConfigError, Configs
from scalebench.core.plan import NightPlan, PlanRow, night_plan

HOLD_IMAGE = "scalebench/torch:cpu"  # the lightest image; the kit (and its hold trainer) is in every one


@dataclass
class Planted:
    """What one benchmark's stand-in holds, per GPU count, and the relative time that must come back."""
    benchmark: str
    host: str
    basis: str
    rows: dict[int, PlanRow]
    step_s: dict[int, float]          # planted seconds per step (the plan's, scaled)

    def relative(self) -> dict[int, float]:
        one = self.rows[min(self.rows)]
        out = {}
        for n, r in self.rows.items():
            if self.basis == "throughput":   # X(1) / X(n), X = global batch / step time
                out[n] = one.global_batch * self.step_s[n] / (r.global_batch * self.step_s[min(self.rows)])
            else:                             # T(n) / T(1) over the timed steps
                out[n] = r.timed_steps * self.step_s[n] / (one.timed_steps * self.step_s[min(self.rows)])
        return out

    def hold_seconds(self) -> float:
        return sum((r.epochs * r.steps_per_epoch) * self.step_s[n] * r.repeats for n, r in self.rows.items())


@dataclass
class Rehearsal:
    night: str
    plan: NightPlan
    planted: dict[str, Planted]
    measured: dict[str, dict[int, float]] = field(default_factory=dict)   # the report's relative times
    valid: dict[str, tuple[int, int]] = field(default_factory=dict)       # (valid cells, cells)
    makespan_s: dict[str, float] = field(default_factory=dict)            # per host: its DAG runs, end to end
    report: str = ""

    def rows(self) -> list[dict]:
        out = []
        for b, p in sorted(self.planted.items()):
            for n, planted in sorted(p.relative().items()):
                got = self.measured.get(b, {}).get(n)
                out.append({"benchmark": b, "host": p.host, "gpus": n, "basis": p.basis,
                            "planted": round(planted, 4), "measured": None if got is None else round(got, 4),
                            "off_pct": None if got is None else round(100 * (got / planted - 1), 2),
                            "valid": "%d/%d" % self.valid.get(b, (0, 0))})
        return out

    def hosts(self, scale: float) -> list[dict]:
        out = []
        for h in self.plan.hosts:
            hold = sum(p.hold_seconds() for p in self.planted.values() if p.host == h.host)
            out.append({"host": h.host, "makespan_s": round(self.makespan_s.get(h.host, 0.0), 1),
                        "plan_estimate_s": round(h.cell_minutes * 60 * scale, 1), "lower_bound_s": round(hold, 1)})
        return out


def stand_in(configs: Configs, plan: NightPlan, scale: float, dst: Path) -> dict[str, Planted]:
    """The rehearsal's config folder: one CPU host per planned host (same name and device count), and per
    benchmark a hold config at the plan's sizes (profile smoke on those hosts)."""
    if dst.exists():
        shutil.rmtree(dst)
    (dst / "benchmarks").mkdir(parents=True)
    shutil.copy(configs.config_dir / STACKS_FILE, dst / STACKS_FILE)
    used = {r.host for r in plan.rows}
    hosts = [{"name": h.name, "kind": "cpu", "queue": "default", "device_ids": list(h.device_ids),
              "timing_policy": "exclusive"} for h in configs.fleet.hosts if h.name in used]
    (dst / "fleet.yaml").write_text(yaml.safe_dump({"night_budget_minutes": configs.fleet.night_budget_minutes,
                                                   "hosts": hosts}))
    planted = {}
    for bid in sorted({r.benchmark for r in plan.rows}):
        bench = configs.benchmark(bid)
        rows = {r.gpus: r for r in plan.rows if r.benchmark == bid}
        first = rows[min(rows)]
        p = planted[bid] = Planted(bid, first.host, first.timing_basis, rows,
                                   {n: r.step_s * scale for n, r in rows.items()})
        spec = ",".join(f"{n}={r.steps_per_epoch}x{p.step_s[n]:.6f}" for n, r in sorted(rows.items()))
        doc = bench.model_dump(exclude_none=True)
        smoke = bench.profiles.get("smoke")
        doc.update(images={"cpu": HOLD_IMAGE, "gpu": HOLD_IMAGE}, metrics=["precision", "recall"],
                   bounds={"precision": [0.0, 1.0], "recall": [0.0, 1.0]}, gpu_counts=sorted(rows),
                   entrypoint=["python", "-m", "scalebench_kit.hold", "--planned", spec,
                               *(["--capped"] if first.capped else [])], retries=0)
        doc.pop("time_to_accuracy", None)
        doc.pop("reference_accuracy", None)
        doc["profiles"] = {"smoke": {**(smoke.model_dump(exclude_none=True) if smoke else {}),
                                     "epochs": [first.epochs], "per_gpu_batch": first.global_batch // min(rows),
                                     "warmup_steps": first.warmup_steps, "min_timed_steps": 0,
                                     "cell_timeout_minutes": 30}}
        doc["profiles"]["smoke"].pop("reference_accuracy", None)
        (dst / "benchmarks" / f"{bid}.yaml").write_text(yaml.safe_dump(doc, width=1000))
    return planted


def _airflow(env: dict, *args: str, timeout: float = 1800) -> tuple[int, str]:
    exe = Path(sys.executable).parent / "airflow"
    out = subprocess.run([str(exe), *args], env=env, capture_output=True, text=True, timeout=timeout)
    return out.returncode, out.stdout + out.stderr


def rehearse(configs: Configs, work: Path, *, benchmarks: list[str] | None = None, gpu_counts: list[int] | None = None,
             repeats: int | None = None, scale: float = 0.05, log=print) -> Rehearsal:
    """Plan the nightly night on the configured fleet, run it through the real DAGs on stand-in CPU
    hosts, and read back the report."""
    from scalebench.report.build import build_report
    from scalebench.report.model import Options
    from scalebench.report.render import render
    from scalebench.store.results import Store

    chosen = {b: configs.benchmark(b) for b in (benchmarks or sorted(configs.benchmarks))}
    plan = night_plan(chosen, configs.fleet, "nightly", repeats=repeats, gpu_counts=gpu_counts)
    if not plan.feasible:
        raise ConfigError("the nightly plan is infeasible (see scalebench plan): " + "; ".join(plan.problems))
    work = work.resolve()
    planted = stand_in(configs, plan, scale, work / "configs")
    home = work / "state"
    if home.exists():
        shutil.rmtree(home)
    env = {**os.environ, "SCALEBENCH_HOME": str(home), "SCALEBENCH_CONFIG_DIR": str(work / "configs"),
           "SCALEBENCH_FLEET": str(work / "configs" / "fleet.yaml"), "AIRFLOW_HOME": str(home / "airflow"),
           "AIRFLOW__CORE__DAGS_FOLDER": str(paths.project_root() / "dags"), "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
           "GX_ANALYTICS_ENABLED": "false"}
    for own in ("AIRFLOW__DATABASE__SQL_ALCHEMY_CONN", "SCALEBENCH_STORE_URL"):  # never the deployment's own
        env.pop(own, None)
    rc, out = _airflow(env, "db", "migrate")
    if rc:
        raise RuntimeError(f"airflow db migrate failed:\n{out[-3000:]}")
    scalebench = Path(sys.executable).parent / "scalebench"
    for cmd in (["db", "upgrade"], ["pools", "--apply"]):
        out = subprocess.run([str(scalebench), *cmd], env=env, capture_output=True, text=True)
        if out.returncode:
            raise RuntimeError(f"scalebench {' '.join(cmd)} failed:\n{out.stderr[-3000:]}")
    night = time.strftime("%Y-%m-%d", time.gmtime())
    result = Rehearsal(night, plan, planted)
    for bid, p in sorted(planted.items()):
        conf = {"profile": "smoke", "gpu_counts": sorted(p.rows), "repeats": p.rows[min(p.rows)].repeats}
        t0 = time.perf_counter()
        rc, out = _airflow(env, "dags", "test", f"scalebench_{bid}", "-c", json.dumps(conf))
        result.makespan_s[p.host] = result.makespan_s.get(p.host, 0.0) + time.perf_counter() - t0
        (work / f"{bid}.log").write_text(out)
        log(f"{bid}: DAG run {'succeeded' if rc == 0 else 'FAILED'} in {time.perf_counter() - t0:.0f} s "
            f"(log {work / f'{bid}.log'})")
    store = Store(f"sqlite:///{home / 'results.db'}")
    stand_ins = Configs(work / "configs", work / "configs" / "fleet.yaml").benchmarks
    rep = build_report(store, night, Options(benchmarks=stand_ins, expected=sorted(stand_ins)))
    path = render(rep, work / "report")
    result.report = str(path)
    for row in rep.rows:
        result.measured[row.benchmark] = dict(row.relative_time)
        result.valid[row.benchmark] = (row.valid, row.cells)
    return result
