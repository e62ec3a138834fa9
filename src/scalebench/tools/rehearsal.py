"""A rehearsal of a night's plan before its first real night: the real benchmark DAGs, scheduler
code, operators, validation, recording and report, on CPU hosts standing in for the fleet's GPU
hosts, with the kit's hold trainer in place of each framework. Each cell holds for its planned
warm-up and timed steps at a planted step time (the plan's, scaled down), so the report must
give back the planted relative times, and each host's makespan can be set against the plan.

With a planted regression (`Regression`) it runs two nights: the plan on the night before
(the baseline pass, whose relative times are checked), copies of that pass's figures as the
scheduled nights before it (1 % noise), then on the night the regressed benchmark again with its
step time slowed at one GPU count through the hold trainer's slowdown file (same config, same
image: a slower system). Its DAG must flag the figure and its reruns confirm it.

A rehearsed week (`profile="full"`) runs the nightly pass and then each benchmark's weekly
accuracy DAG at the weekly plan's sizes (full passes, the accuracy cut's epochs and repeats),
the hold trainer evaluating a planted metric after every epoch: equal levels at every GPU count,
or one count lowered by `AccuracyDrop`. The report must then say "equivalent" where the levels
are equal, "worse" where one was lowered, and compare epochs to the target with 1 GPU.

Isolated: its own Airflow home, results store and configs under one work folder.
"""
from __future__ import annotations

import copy
import datetime as dt
import json
import os
import random
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path

import yaml

from scalebench.core import paths
from scalebench.core.errors import RunFailed, telling_line
from scalebench.core.config import STACKS_FILE, ConfigError, Configs
from scalebench.core.plan import NightPlan, PlanRow, assigned_plan, night_plan
from scalebench.orchestration.airflow_steps import StepOutcome, run_steps

HOLD_IMAGE = "scalebench/torch:cpu"  # the lightest image; the kit (and its hold trainer) is in every one
BASELINE_NIGHTS = 8  # seeded scheduled nights: 3 reruns can confirm (one-sided U test, p < 0.01) from 7 on
# the rehearsed week's planted accuracy: its level, a repeat's noise, the target every count reaches
PLANTED_LEVEL, PLANTED_SD, PLANTED_TARGET, PLANTED_TIME_SD = 0.80, 0.003, 0.60, 0.01


def _planted_at(text: str, flag: str, unit: str, example: str) -> tuple[str, int, float]:
    """(benchmark, GPUs, number) from "BENCHMARK:GPUS:<unit>", refused naming the flag."""
    try:
        bench, gpus, number = text.split(":")
        return bench, int(gpus), float(number)
    except ValueError:
        raise ConfigError(f"{flag} {text!r}: expected BENCHMARK:GPUS:{unit}, e.g. {example}") from None


@dataclass(frozen=True)
class Regression:
    """A planted regression: `benchmark`'s step time at `gpus` devices times `factor`."""
    benchmark: str
    gpus: int
    factor: float

    @classmethod
    def parse(cls, text: str) -> "Regression":
        """"BENCHMARK:GPUS:PERCENT", e.g. "unet_torch_voc2007:4:20" (20 % slower steps at 4 GPUs)."""
        bench, gpus, pct = _planted_at(text, "--regress", "PERCENT", "unet_torch_voc2007:4:20")
        out = cls(bench, gpus, 1 + pct / 100)
        if out.gpus < 1 or out.factor <= 1:
            raise ConfigError(f"--regress {text!r}: expected GPUS >= 1 and a PERCENT above 0")
        return out

    def line(self) -> str:
        return f"{self.benchmark} at {self.gpus} GPU(s), step time +{(self.factor - 1) * 100:g} %"


@dataclass(frozen=True)
class AccuracyDrop:
    """A planted accuracy loss in the rehearsed week: `benchmark` at `gpus` devices `points` lower."""
    benchmark: str
    gpus: int
    points: float

    @classmethod
    def parse(cls, text: str) -> "AccuracyDrop":
        """"BENCHMARK:GPUS:POINTS", e.g. "unet_torch_voc2007:4:3" (3 points lower at 4 GPUs)."""
        out = cls(*_planted_at(text, "--plant-accuracy", "POINTS", "unet_torch_voc2007:4:3"))
        if out.gpus < 2 or not 0 < out.points < 100 * PLANTED_LEVEL:
            raise ConfigError(f"--plant-accuracy {text!r}: expected GPUS >= 2 (1 GPU is the reference) and POINTS "
                              f"between 0 and {100 * PLANTED_LEVEL:g}")
        return out

    def line(self) -> str:
        return f"{self.benchmark} at {self.gpus} GPUs, {self.points:g} points lower"


def planted_levels(bench: str, counts: list[int], drop: AccuracyDrop | None) -> dict[int, float]:
    return {n: PLANTED_LEVEL - (drop.points / 100 if drop and (drop.benchmark, drop.gpus) == (bench, n) else 0.0)
            for n in counts}


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
    regression: Regression | None = None
    flagged: list[str] = field(default_factory=list)    # the regressed run's flags (its DAG log)
    confirmed: list[str] = field(default_factory=list)  # ... and the flags its reruns confirmed
    weekly: dict[str, Planted] = field(default_factory=dict)              # the rehearsed week's weekly run
    weekly_measured: dict[str, dict[int, float]] = field(default_factory=dict)
    accuracy: dict[str, dict] = field(default_factory=dict)  # per benchmark: planted levels, verdicts, the answer

    @property
    def caught(self) -> bool:
        """The planted regression was flagged and confirmed by reruns, at its GPU count."""
        r = self.regression
        if not r:
            return False
        # "<benchmark> <n> GPU(s) [<precision>] images_per_s: ..." (Judgement.line)
        head = re.compile(rf"{re.escape(r.benchmark)} {r.gpus} GPUs? (\S+ )?images_per_s:")
        return any(head.match(line) for line in self.confirmed)

    def rows(self) -> list[dict]:
        out = []
        for run, planted_of, measured_of in (("nightly", self.planted, self.measured),
                                             ("weekly", self.weekly, self.weekly_measured)):
            for b, p in sorted(planted_of.items()):
                for n, planted in sorted(p.relative().items()):
                    got = measured_of.get(b, {}).get(n)
                    out.append({"run": run, "benchmark": b, "host": p.host, "gpus": n, "basis": p.basis,
                                "planted": round(planted, 4), "measured": None if got is None else round(got, 4),
                                "off_pct": None if got is None else round(100 * (got / planted - 1), 2),
                                "valid": "%d/%d" % self.valid.get(f"{run} {b}", (0, 0))})
        return out

    def accuracy_misses(self) -> list[str]:
        """Weekly verdicts that do not give back the planted levels: 'worse' where a count was
        planted lower than 1 GPU, 'equivalent' where it was planted equal."""
        out = []
        for b in sorted(self.weekly):
            acc = self.accuracy.get(b)
            if not acc:
                out.append(f"{b}: no weekly row in the report")
                continue
            levels = acc["planted"]
            for m, per in acc["verdicts"].items():
                for n in sorted(levels):
                    if n == min(levels):
                        continue
                    want = "worse" if levels[n] < levels[min(levels)] else "equivalent"
                    got = per.get(n, {}).get("kind")
                    if got != want:
                        out.append(f"{b} {m} at {n} GPUs: {got} (planted {levels[n]:g} against "
                                   f"{levels[min(levels)]:g}: {want})")
        return out

    def hosts(self, scale: float) -> list[dict]:
        out = []
        for h in self.plan.hosts:
            hold = sum(p.hold_seconds() for p in self.planted.values() if p.host == h.host)
            out.append({"host": h.host, "makespan_s": round(self.makespan_s.get(h.host, 0.0), 1),
                        "plan_estimate_s": round(h.cell_minutes * 60 * scale, 1), "lower_bound_s": round(hold, 1)})
        return out


def _planted(plan: NightPlan, bid: str, scale: float, warmup: int | None = None) -> Planted:
    # the stand-in holds one precision's cells (the plan's first): the hold trainer runs no model,
    # so every precision would hold the same planted steps; `warmup`: the stand-in profile's own
    mine = [r for r in plan.rows if r.benchmark == bid]
    rows = {r.gpus: r for r in mine if r.precision == mine[0].precision}
    if warmup is not None:
        rows = {n: replace(r, warmup_steps=warmup, timed_steps=max(r.epochs * r.steps_per_epoch - warmup, 0))
                for n, r in rows.items()}
    first = rows[min(rows)]
    return Planted(bid, first.host, first.timing_basis, rows, {n: r.step_s * scale for n, r in rows.items()})


def _spec(p: Planted) -> str:
    return ",".join(f"{n}={r.steps_per_epoch}x{p.step_s[n]:.6f}" for n, r in sorted(p.rows.items()))


def stand_in(configs: Configs, plan: NightPlan, scale: float, dst: Path, weekly: NightPlan | None = None,
             drop: AccuracyDrop | None = None) -> tuple[dict[str, Planted], dict[str, Planted]]:
    """The rehearsal's config folder: one CPU host per planned host (same name and device count), and per
    benchmark a hold config at the plan's sizes (profile smoke), pinned to its planned host; with
    `weekly`, its profile `full` at the weekly plan's sizes with planted accuracies."""
    if dst.exists():
        shutil.rmtree(dst)
    (dst / "benchmarks").mkdir(parents=True)
    shutil.copy(configs.config_dir / STACKS_FILE, dst / STACKS_FILE)
    used = {r.host for r in plan.rows}
    hosts = [{"name": h.name, "kind": "cpu", "queue": "default", "device_ids": list(h.device_ids),
              "timing_policy": "exclusive"} for h in configs.fleet.hosts if h.name in used]
    (dst / "fleet.yaml").write_text(yaml.safe_dump({"night_budget_minutes": configs.fleet.night_budget_minutes,
                                                   "hosts": hosts}))
    planted, weeks = {}, {}
    for bid in sorted({r.benchmark for r in plan.rows}):
        bench = configs.benchmark(bid)
        p = planted[bid] = _planted(plan, bid, scale)
        first = p.rows[min(p.rows)]
        doc = bench.model_dump(exclude_none=True)
        smoke = bench.profiles.get("smoke")
        doc.update(images={"cpu": HOLD_IMAGE, "gpu": HOLD_IMAGE}, metrics=["precision", "recall"], hosts=[first.host],
                   bounds={"precision": [0.0, 1.0], "recall": [0.0, 1.0]}, gpu_counts=sorted(p.rows),
                   entrypoint=["python", "-m", "scalebench_kit.hold", "--planned", _spec(p),
                               *(["--capped"] if first.capped else [])], retries=0)
        for own in ("time_to_accuracy", "precision", "reference_accuracy", "accuracy_epochs"):
            doc.pop(own, None)
        doc["profiles"] = {"smoke": _sizes(smoke, first, min(p.rows))}
        if weekly is not None:
            # the weekly run is the accuracy DAG's run of this smoke profile at the weekly epochs (a CPU
            # stand-in runs no profile full); its hold trainer takes the weekly steps by run type
            w = weeks[bid] = _planted(weekly, bid, scale, warmup=first.warmup_steps)
            wfirst = w.rows[min(w.rows)]
            metric = bench.time_to_accuracy.metric if bench.time_to_accuracy else "recall"
            levels = planted_levels(bid, sorted(w.rows), drop)
            split = bench.resolved("full").train_images_used() or wfirst.steps_per_epoch * wfirst.global_batch
            doc["entrypoint"] += ["--planned-full", _spec(w), "--train-images", str(split), "--time-sd",
                                  str(PLANTED_TIME_SD), "--accuracy-sd", str(PLANTED_SD), "--accuracy",
                                  f"{metric}:" + ",".join(f"{n}={v:g}" for n, v in sorted(levels.items()))]
            doc.update(metrics=[metric], bounds={metric: [0.0, 1.0]}, gpu_counts=sorted(set(p.rows) | set(w.rows)),
                       time_to_accuracy={"metric": metric, "target": PLANTED_TARGET})
        (dst / "benchmarks" / f"{bid}.yaml").write_text(yaml.safe_dump(doc, width=1000))
    return planted, weeks


def _sizes(smoke, first: PlanRow, fewest: int) -> dict:
    """A stand-in profile at a plan row's sizes (the smoke profile's data sizes, fp32)."""
    out = {**(smoke.model_dump(exclude_none=True) if smoke else {}), "epochs": [first.epochs],
           "per_gpu_batch": first.global_batch // fewest, "warmup_steps": first.warmup_steps, "min_timed_steps": 0,
           "cell_timeout_minutes": 30, "precision": ["fp32"]}
    out.pop("reference_accuracy", None)
    return out


def _airflow(env: dict, *args: str, timeout: float = 1800) -> tuple[int, str]:
    exe = Path(sys.executable).parent / "airflow"
    out = subprocess.run([str(exe), *args], env=env, capture_output=True, text=True, timeout=timeout)
    return out.returncode, out.stdout + out.stderr


def seed_baseline(store, configs: Configs, planted: dict[str, Planted], night: str, nights: int = BASELINE_NIGHTS,
                  seed: int = 0) -> int:
    """The baseline pass's valid cells copied as `nights` scheduled nights before `night`, each
    figure times 1 % noise: the history a regression is judged against (the pass itself is a
    manual run, never a baseline). Returns the number of cells seeded."""
    from scalebench.core.cells import plan

    rng = random.Random(seed)
    passed = {(c["benchmark"], c["gpus"], c["epochs"], c["repeat"]): c
              for c in store.figures(up_to_night=night, since_night=night)
              if c["figure"] is not None and c["role"] not in ("rerun", "ab_previous")}
    seeded = 0
    for k in range(1, nights + 1):
        day = (dt.date.fromisoformat(night) - dt.timedelta(days=k)).isoformat()
        for bid, p in sorted(planted.items()):
            for cell in plan(configs.benchmark(bid), configs.fleet, profile="smoke", run_id=f"scheduled__{day}",
                             gpu_counts=sorted(p.rows), repeats=p.rows[min(p.rows)].repeats, run_type="scheduled",
                             night=day):
                src = passed.get((bid, cell["gpus"], cell["epochs"], cell["repeat"]))
                if src is None:
                    continue
                contract = copy.deepcopy(store.contract(src["key"]))
                noise = 1 + rng.gauss(0, 0.01)
                contract["timing"]["images_per_s"] *= noise
                contract["timing"]["train_s"] /= noise
                store.record_attempt(cell, 1, "valid", contract=contract)
                seeded += 1
    return seeded


def _lines(log: str, marker: str) -> list[str]:
    return [line.split(marker, 1)[1].strip() for line in log.splitlines() if marker in line]


def rehearse(configs: Configs, work: Path, *, benchmarks: list[str] | None = None, gpu_counts: list[int] | None = None,
             repeats: int | None = None, scale: float = 0.05, regression: Regression | None = None,
             profile: str = "nightly", drop: AccuracyDrop | None = None, log=print) -> Rehearsal:
    """Plan the nightly night on the configured fleet, run it through the real DAGs on stand-in CPU
    hosts, and read back the report; with `regression`, then plant it and check it is caught; with
    profile "full", then the weekly accuracy runs with planted accuracies (a rehearsed week)."""
    from scalebench.report.build import build_report
    from scalebench.report.model import Options
    from scalebench.report.render import render
    from scalebench.store.results import Store

    chosen = {b: configs.benchmark(b) for b in (benchmarks or sorted(configs.benchmarks))}
    # on the hosts the nights would assign (decided over every benchmark, with no stored history)
    _, assignment = assigned_plan(configs.benchmarks, configs.fleet, "nightly", probe=configs.probe())
    plan = night_plan(chosen, configs.fleet, "nightly", repeats=repeats, gpu_counts=gpu_counts,
                      assigned=assignment.hosts)
    if not plan.feasible:
        raise ConfigError("the nightly plan is infeasible (see scalebench plan): " + "; ".join(plan.problems))
    if regression and (regression.benchmark not in chosen or
                       regression.gpus not in {r.gpus for r in plan.rows if r.benchmark == regression.benchmark}):
        raise ConfigError(f"--regress: {regression.line()} is not in the rehearsed plan "
                          f"(benchmarks {sorted(chosen)}, GPU counts {sorted({r.gpus for r in plan.rows})})")
    weekly = None
    if profile == "full":
        weekly = night_plan(chosen, configs.fleet, "full", gpu_counts=gpu_counts, assigned=assignment.hosts)
        if not weekly.feasible:
            raise ConfigError("the weekly plan is infeasible (see scalebench plan --profile full): "
                              + "; ".join(weekly.problems))
    if drop and weekly is None:
        raise ConfigError(f"--plant-accuracy: {drop.line()} plants a weekly accuracy: it needs --profile full")
    if drop and weekly and (drop.benchmark not in chosen or drop.gpus not in {r.gpus for r in weekly.rows
                                                                   if r.benchmark == drop.benchmark}):
        raise ConfigError(f"--plant-accuracy: {drop.line()} is not in the rehearsed week (benchmarks {sorted(chosen)}, "
                          f"GPU counts {sorted({r.gpus for r in weekly.rows})})")
    work = work.resolve()
    planted, weeks = stand_in(configs, plan, scale, work / "configs", weekly, drop)
    home = work / "state"
    if home.exists():
        shutil.rmtree(home)
    env = {**os.environ, "SCALEBENCH_HOME": str(home), "SCALEBENCH_CONFIG_DIR": str(work / "configs"),
           "SCALEBENCH_FLEET": str(work / "configs" / "fleet.yaml"), "AIRFLOW_HOME": str(home / "airflow"),
           "AIRFLOW__CORE__DAGS_FOLDER": str((paths.project_root() or Path.cwd()) / "dags"),
           "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
           "GX_ANALYTICS_ENABLED": "false"}
    for own in ("AIRFLOW__DATABASE__SQL_ALCHEMY_CONN", "SCALEBENCH_STORE_URL"):  # never the deployment's own
        env.pop(own, None)
    rc, out = _airflow(env, "db", "migrate")
    if rc:
        raise RunFailed(f"rehearse: airflow db migrate failed: {telling_line(out)}")
    scalebench = Path(sys.executable).parent / "scalebench"
    for cmd in (["db", "upgrade"], ["pools", "--apply"]):
        done = subprocess.run([str(scalebench), *cmd], env=env, capture_output=True, text=True)
        if done.returncode:
            raise RunFailed(f"rehearse: scalebench {' '.join(cmd)} failed: {telling_line(done.stderr)}")
    today = dt.datetime.now(dt.timezone.utc).date()
    night = (today - dt.timedelta(days=1) if regression else today).isoformat()  # the baseline pass's night
    result = Rehearsal(night, plan, planted, regression=regression, weekly=weeks)

    def run(on: str, runs: list[tuple[str, str]]) -> list[StepOutcome]:
        """The (benchmark, tag) DAG runs in one process (Airflow starts once), each logged as it ends."""
        def step(bid: str, tag: str) -> list[str]:
            p = (weeks if tag == "-weekly" else planted)[bid]
            conf = {"profile": "smoke", "gpu_counts": sorted(p.rows), "repeats": p.rows[min(p.rows)].repeats,
                    "epochs": [p.rows[min(p.rows)].epochs]}
            dag = stand_ins[bid].accuracy_dag_id if tag == "-weekly" else f"scalebench_{bid}"
            return ["dags", "test", dag, on, "-c", json.dumps(conf)]

        def ended(i: int, o: StepOutcome) -> None:
            bid, tag = runs[i]
            (work / f"{bid}{tag}.log").write_text(o.log)
            log(f"{bid}{tag}: DAG run {'succeeded' if o.rc == 0 else 'FAILED'} in {o.seconds:.0f} s "
                f"(log {work / f'{bid}{tag}.log'})")
            if not tag:  # a host's night: its benchmarks' DAG runs, one after another
                result.makespan_s[planted[bid].host] = result.makespan_s.get(planted[bid].host, 0.0) + o.seconds

        outcomes = run_steps(env, [step(bid, tag) for bid, tag in runs], timeout=1800 * len(runs), on_step=ended)
        for bid, tag in runs[len(outcomes):]:  # the process ended before them (its last step says why)
            log(f"{bid}{tag}: DAG run not started: the runs' process ended before it")
        return outcomes

    stand_in_configs = Configs(work / "configs", work / "configs" / "fleet.yaml")
    stand_ins = stand_in_configs.benchmarks
    # the nights, then the week's accuracy runs after them
    run(night, [(bid, "") for bid in sorted(planted)] + [(bid, "-weekly") for bid in sorted(weeks)])
    store = Store(f"sqlite:///{home / 'results.db'}")
    if regression:
        seeded = seed_baseline(store, stand_in_configs, planted, night)
        log(f"seeded {seeded} cells as the {BASELINE_NIGHTS} scheduled nights before {night}")
        (home / "cache").mkdir(parents=True, exist_ok=True)
        (home / "cache" / "hold-slowdown.json").write_text(json.dumps(
            {"benchmark": regression.benchmark, "gpus": regression.gpus, "factor": regression.factor}))
        out = next((o.log for o in run(today.isoformat(), [(regression.benchmark, "-regressed")])), "")
        result.flagged = [line.split(" reruns: ", 1)[-1] for line in _lines(out, "flagged, ")]  # "k reruns: ..."
        result.confirmed = _lines(out, "confirmed by reruns: ")
    rep = build_report(store, night, Options(benchmarks=stand_ins, expected=sorted(stand_ins)))
    path = render(rep, work / "report")
    result.report = str(path)
    for row in rep.rows:
        result.measured[row.benchmark] = dict(row.relative_time)
        result.valid[f"nightly {row.benchmark}"] = (row.valid, row.cells)
    for row in rep.study_rows:
        result.weekly_measured[row.benchmark] = dict(row.relative_time)
        result.valid[f"weekly {row.benchmark}"] = (row.valid, row.cells)
        result.accuracy[row.benchmark] = {
            "planted": planted_levels(row.benchmark, sorted(weeks[row.benchmark].rows), drop),
            "verdicts": {m: {n: {"kind": v.kind, "text": v.text()} for n, v in per.items()}
                         for m, per in row.verdicts.items()},
            "epochs_to_target": {n: {"kind": v.kind, "text": v.text()} for n, v in row.convergence.items()},
            "answer": next((c for c in rep.conclusions if c.startswith(f"Does accuracy suffer? {row.name},")), None)}
    return result
