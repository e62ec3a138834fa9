"""`scalebench` command line: configs, stacks, plan, rehearse, cells, results, compare, report, data, pools, db, prune.

Listing commands (configs, stacks, plan, rehearse, cells, results, compare, pools) print a table for a person by default
and take `-o json` or `-o csv` for programs; other commands print a sentence or a JSON document.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Mapping, Sequence

from scalebench.core.alert_rules import STATES
from scalebench.analysis.compare import CompareError
from scalebench.core import tables
from scalebench.core.config import PROFILES, ConfigError, Configs
from scalebench.core.config.common import ALERTS_FILE, SHIFTS_FILE
from scalebench.cell.datasets import DatasetError
from scalebench.cell.fetch import FetchError
from scalebench.store.db import StoreNotReady
from scalebench.core.errors import RunFailed
from scalebench.core.paths import ProjectNotFound


def _gpus(text: str) -> list[int]:
    try:
        counts = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"--gpus expects a comma-separated list of integers like 1,2; got {text!r}") from None
    if not counts or min(counts) < 1 or len(set(counts)) != len(counts):
        raise argparse.ArgumentTypeError(f"--gpus expects distinct GPU counts of at least 1 like 1,2; got {text!r}")
    return counts


def _url(text: str) -> str:
    from urllib.parse import urlsplit

    parts = urlsplit(text)
    if parts.scheme not in ("http", "https", "file") or not (parts.netloc or parts.path.strip("/")):
        raise argparse.ArgumentTypeError(f"expects an http://, https:// or file:// URL; got {text!r}")
    return text


class Parser(argparse.ArgumentParser):
    """argparse with its errors on one line, in the command line's one form, exit status 2."""

    def error(self, message: str):
        message = message.replace("argument ", "", 1) if message.startswith("argument ") else message
        what = self.prog.removeprefix("scalebench").strip()
        self.exit(2, f"scalebench: {what + ': ' if what else ''}{message}; see {self.prog} --help\n")


def _whole(lo: int, hi: int):
    """An argparse type: a whole number in [lo, hi]."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number (expected {lo}-{hi})") from None
        if not lo <= value <= hi:
            raise argparse.ArgumentTypeError(f"{value} is out of range (expected {lo}-{hi})")
        return value
    return parse


def _number(lo: float, hi: float, *, open_low: bool = False):
    """An argparse type: a finite number in [lo, hi] (or (lo, hi] with open_low)."""
    import math

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
        if not math.isfinite(value) or value < lo or value > hi or (open_low and value == lo):
            low = f"more than {lo:g}" if open_low else f"at least {lo:g}"
            raise argparse.ArgumentTypeError(f"{text!r} is out of range (expected {low} and at most {hi:g})")
        return value
    return parse


OUTPUTS = ("table", "json", "csv")


@dataclass
class Listing:
    """What a listing command found: flat rows (table and CSV), the JSON document, notes under the table."""
    columns: list[str]
    rows: Sequence[Mapping[str, Any]]
    doc: Any = None                  # -o json prints this (default: the rows)
    notes: list[str] = field(default_factory=list)
    text: str | None = None          # a table rendered by its own module (compare), instead of the rows
    empty: str = "nothing to list"
    exit_code: int = 0               # non-zero: what it lists is a problem (an infeasible plan)

    def render(self, output: str) -> str:
        if output == "json":
            return json.dumps(self.rows if self.doc is None else self.doc, indent=2, default=str)
        if output == "csv":
            from scalebench.report.exports import to_csv

            return to_csv(self.columns, self.rows, extra=False).rstrip("\n")
        body = self.text if self.text is not None else (table(self.columns, self.rows) if self.rows else self.empty)
        return "\n".join([body, *self.notes])


def table(columns: list[str], rows: Sequence[Mapping[str, Any]]) -> str:
    """Aligned columns, one header line; a column of numbers right-aligned."""
    def number(v: Any) -> bool:
        return v is None or isinstance(v, (int, float)) and not isinstance(v, bool)

    def column(name: str) -> tables.Column:
        return tables.Column(name, lambda r: r.get(name), numeric=all(number(r.get(name)) for r in rows))
    return tables.text(tables.build([column(c) for c in columns], rows))


def cmd_configs(args, configs: Configs) -> Listing:
    doc = {"fleet": configs.fleet.model_dump(),
           "benchmarks": {bid: {**b.model_dump(), "resolved": {p: b.resolved(p).summary() for p in PROFILES}}
                          for bid, b in configs.benchmarks.items()}}
    rows = [{"benchmark": bid, "stack": b.stack, "model": b.model.get("architecture", ""), "dataset": b.dataset.name,
             "gpu_counts": b.gpu_counts, "per_gpu_batch": b.per_gpu_batch, "epochs": b.epochs,
             "schedule": b.schedule or "manual"}
            for bid, b in sorted(configs.benchmarks.items())]
    hosts = ", ".join(f"{h.name} ({h.kind}, {len(h.device_ids)} devices, queue {h.queue})" for h in configs.fleet.hosts)
    alerts, shifts = configs.alerts(), configs.acknowledged_shifts()
    stacks = set(configs.stacks.stacks)
    for i, route in enumerate(alerts.routes):  # a route that can never match is a typo
        for what, names, known in (("benchmarks", route.benchmarks, configs.benchmarks), ("stacks", route.stacks, stacks)):
            unknown = sorted(set(names) - set(known))
            if unknown:
                raise ConfigError(f"{configs.config_dir / ALERTS_FILE}: field 'routes.{i}.{what}': unknown {unknown}; "
                                  f"known: {sorted(known)}")
    for i, shift in enumerate(shifts):  # the report reads old entries too; validating names them
        if shift.benchmark not in configs.benchmarks:
            raise ConfigError(f"{configs.config_dir / SHIFTS_FILE}: field 'shifts.{i}.benchmark': unknown benchmark "
                              f"{shift.benchmark!r}; known: {sorted(configs.benchmarks)}")
    return Listing(list(rows[0]) if rows else [], rows, doc,
                   notes=[f"fleet: {hosts}", f"alerts: {alerts.notifier}", f"acknowledged shifts: {len(shifts)}"])


def cmd_stacks(args, configs: Configs) -> Listing | str:
    """The training stacks of include/configs/stacks.yaml; --build-order and --base-of serve make and scripts."""
    stacks = configs.stacks
    if args.base_of:
        if args.base_of not in stacks.stacks:
            raise ConfigError(f"unknown stack {args.base_of!r}; expected one of {sorted(stacks.stacks)}")
        return stacks.stacks[args.base_of].base or ""
    if args.build_order:
        return "\n".join(stacks.build_order())
    rows = [{"stack": name, "base": s.base, "launcher": s.launcher, "processes_per_device": s.processes_per_device,
             "formats": s.formats, "cpu_image": s.images.get("cpu"), "gpu_image": s.images.get("gpu")}
            for name, s in ((n, stacks.stacks[n]) for n in stacks.build_order())]
    return Listing(list(rows[0]), rows, stacks.model_dump())


def cmd_plan(args, configs: Configs) -> Listing:
    """The night's plan: per benchmark, GPU count and host, steps and seconds; per host the night."""
    from scalebench.core.assignment import ASSIGNED_PROFILES
    from scalebench.core.plan import assigned_plan, night_plan, stored_costs

    benches = {args.benchmark: configs.benchmark(args.benchmark)} if args.benchmark else configs.benchmarks
    stored_figures = _stored_figures()
    stored = stored_costs(stored_figures)
    assignment = None
    if args.profile in ASSIGNED_PROFILES and configs.fleet.hosts_of("gpu"):
        # decided over every benchmark, as the nights decide it; shown, not stored
        previous = _stored_assignment()
        # over every benchmark that loads: a broken file elsewhere must not stop one benchmark's plan
        everyone = configs.load_all()[0] if args.benchmark else configs.benchmarks
        _, assignment = assigned_plan(everyone, configs.fleet, args.profile, stored=stored, probe=configs.probe(),
                                      previous=previous)
    night = night_plan(benches, configs.fleet, args.profile, stored=stored, repeats=args.repeats, probe=configs.probe(),
                       assigned=assignment.hosts if assignment else None)
    rows = [{"benchmark": r.benchmark, "host": r.host, "gpus": r.gpus, "dtype": r.precision, "global_batch": r.global_batch,
             "lr": round(r.lr, 6), "steps/epoch": f"{r.steps_per_epoch}{' (cap)' if r.capped else ''}",
             "epochs": r.epochs, "warmup": r.warmup_steps, "timed": r.timed_steps, "basis": r.timing_basis,
             "cell_min": round(r.cell_s / 60, 1), "repeats": r.repeats, "cost": r.cost_source} for r in night.rows]
    notes = [f"host {h.host}: {h.minutes:.0f} min ({h.cell_minutes:.0f} cells + {h.rerun_minutes:.0f} rerun reserve) "
             f"of {h.budget_name} ({h.budget_minutes:g} min): {'fits' if h.fits else 'does NOT fit'}"
             for h in night.hosts]
    if assignment:
        notes += [f"assigned: {b} -> {assignment.hosts[b]} ({assignment.why[b]})" if b in assignment.hosts
                  else f"not assigned: {b}: {assignment.why[b]}" for b in sorted(benches)]
        notes += [f"moves: {m}" for m in assignment.moves(previous)]
    from scalebench.analysis.noise import MIN_NIGHTS

    noise = _noise_verdicts(benches, args.profile, stored_figures)
    if noise and all(v.nights == 0 for v in noise):
        notes.append(f"noise: no stored nights yet; repeats and reruns are judged against each host's noise from "
                     f"{MIN_NIGHTS} nights on")
    else:
        notes += [f"noise: {v.line()}" for v in noise]
    notes += [f"infeasible: {p}" for p in night.problems] or [f"feasible ({args.profile})"]
    doc = night.to_json() | ({"assignment": {b: {"host": assignment.hosts.get(b), "why": assignment.why[b]}
                                             for b in sorted(benches)}} if assignment else {})
    doc |= {"noise": [v.to_json() for v in noise]} if noise else {}
    return Listing(list(rows[0]) if rows else ["benchmark"], rows, doc, notes,
                   exit_code=0 if night.feasible else 1)


def cmd_rehearse(args, configs: Configs) -> Listing:
    """The nightly plan through the real DAGs on stand-in CPU hosts with the hold trainer."""
    from scalebench.tools.rehearsal import AccuracyDrop, Regression, rehearse

    from scalebench.core import paths

    work = Path(args.work) if args.work else paths.state_dir() / "rehearsal"
    regression = Regression.parse(args.regress) if args.regress else None
    if args.plant_accuracy and args.profile != "full":
        raise ConfigError("--plant-accuracy: plants the weekly run's accuracy; add --profile full")
    drop = AccuracyDrop.parse(args.plant_accuracy) if args.plant_accuracy else None
    r = rehearse(configs, work, benchmarks=args.benchmark, gpu_counts=args.gpus, repeats=args.repeats,
                 scale=args.scale, regression=regression, profile=args.profile, drop=drop,
                 log=lambda line: print(line, file=sys.stderr))
    rows = r.rows()
    bad = [x for x in rows if x["off_pct"] is None or abs(x["off_pct"]) > args.tolerance * 100]
    notes = [f"host {h['host']}: makespan {h['makespan_s']} s; the plan's estimate x {args.scale:g} = "
             f"{h['plan_estimate_s']} s; lower bound (the cells' planted steps) {h['lower_bound_s']} s"
             for h in r.hosts(args.scale)]
    notes.append(f"report: {r.report}")
    if regression:
        notes.append(f"planted regression ({regression.line()}): "
                     + (f"caught: confirmed by reruns: {r.confirmed[0]}" if r.caught else
                        "NOT caught; flagged: " + ("; ".join(r.flagged) or "nothing")))
    notes.append(f"{len(rows) - len(bad)} of {len(rows)} relative times within {args.tolerance:.0%} of the planted ones"
                 + ("" if not bad else "; off: " + ", ".join(f"{x['benchmark']} at {x['gpus']}" for x in bad)))
    misses = r.accuracy_misses()
    for b, acc in sorted(r.accuracy.items()):
        notes.append(f"weekly {b}: planted " + ", ".join(f"{v:g} at {n}" for n, v in sorted(acc["planted"].items()))
                     + f" -> {acc['answer']}")
    if r.weekly:
        notes.append("weekly accuracy: " + ("every verdict gives back the planted levels" if not misses else
                                            "NOT as planted: " + "; ".join(misses)))
    regressed = {"planted": regression.line(), "caught": r.caught, "flagged": r.flagged,
                 "confirmed": r.confirmed} if regression else None
    return Listing(list(rows[0]) if rows else ["benchmark"], rows,
                   {"rows": rows, "hosts": r.hosts(args.scale), "report": r.report, "regression": regressed,
                    "accuracy": r.accuracy, "accuracy_misses": misses}, notes,
                   exit_code=1 if bad or misses or (regression and not r.caught) else 0)


def _noise_verdicts(benches: dict, profile: str, figures: list) -> list:
    """Per benchmark and host, whether its repeats and reruns meet the detection goals at the
    noise its stored nights show (the nightly profile: the one judged for regressions)."""
    from scalebench.analysis.history import build_series
    from scalebench.analysis.noise import JUDGED_PROFILE, judge_noise

    if profile != JUDGED_PROFILE:
        return []
    settings = {b: (bench.schedule_repeats, bench.confirm_reruns) for b, bench in benches.items()}
    return judge_noise(build_series(figures, {}), settings)


def _stored_assignment() -> dict[str, str]:
    """The stored host assignment; none when there is no results store yet."""
    from scalebench.store.results import Store

    try:
        return {b: row["host"] for b, row in Store().assignments().items()}
    except (StoreNotReady, ProjectNotFound):
        return {}


def _stored_figures() -> list:
    """Stored figures for plan costs; none when there is no results store yet (a new deployment)."""
    from scalebench.store.results import Store

    try:
        return Store().figures()
    except (StoreNotReady, ProjectNotFound):
        return []


def cmd_cells(args, configs: Configs) -> Listing:
    from scalebench.core import cells as cellmod

    from scalebench.core.assignment import ASSIGNED_PROFILES
    from scalebench.core.plan import assigned_plan, stored_costs

    ids = [args.benchmark] if args.benchmark else sorted(configs.benchmarks)
    hosts = {}
    if args.profile in ASSIGNED_PROFILES and configs.fleet.hosts_of("gpu"):  # each on its assigned host, as tonight
        _, a = assigned_plan(configs.benchmarks, configs.fleet, args.profile, stored=stored_costs(_stored_figures()),
                             probe=configs.probe(), previous=_stored_assignment())
        hosts = {b: configs.fleet.host(h) for b, h in a.hosts.items()}
    cells = [c for bid in ids for c in cellmod.plan(configs.benchmark(bid), configs.fleet, profile=args.profile,
                                                   run_id=args.run_id, gpu_counts=args.gpus, repeats=args.repeats,
                                                   seed=args.seed, host=hosts.get(bid))]
    columns = ["benchmark", "host", "gpus", "epochs", "repeat", "profile", "global_batch", "lr", "key"]
    return Listing(columns, cells, {"cells": cells},
                   notes=[f"steps, seconds and the night's budget: scalebench plan --profile {args.profile}"])


def cmd_results(args, configs: Configs) -> Listing:
    from scalebench.store.results import Store

    cells = Store().cells(benchmark=args.benchmark, run_id=args.run_id, night=args.night, since=args.since)
    if args.failed:  # cells with no figure: failed, invalid or never started
        cells = [c for c in cells if c["figure"] is None]
    from scalebench.report.exports import RESULT_COLUMNS, result_row

    rows = [result_row(c) for c in cells]
    return Listing(RESULT_COLUMNS, rows, cells, empty="no stored cells" + (" without a valid result" if args.failed else ""))


def cmd_history(args, configs: Configs) -> Listing:
    """One benchmark's night summaries (what its history page shows): the terminal's table from the
    same columns as the page's; CSV and JSON as the page's downloads."""
    import datetime as dt

    from scalebench.report.exports import HISTORY_COLUMNS, history_row, history_table
    from scalebench.store.results import Store

    since = (dt.datetime.now(dt.timezone.utc).date() - dt.timedelta(days=args.nights - 1)).isoformat()
    summaries = Store().summaries(benchmark=args.benchmark, since=None if args.all else since)
    if not summaries and args.benchmark not in configs.load_all()[0]:
        configs.benchmark(args.benchmark)  # no night and no such benchmark: says which ones there are
    if args.gpus:
        summaries = [s for s in summaries if s["gpus"] == args.gpus]
    text = tables.text(tables.build(history_table(), summaries)) if summaries else None
    return Listing(HISTORY_COLUMNS, [history_row(s) for s in summaries], summaries, text=text,
                   empty=f"no night of {args.benchmark} summarized" + ("" if args.all else f" since {since}"))


def _night(text: str) -> str:
    import datetime as dt

    try:
        return dt.date.fromisoformat(text).isoformat()
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a night: expected YYYY-MM-DD") from None


def cmd_compare(args, configs: Configs) -> Listing:
    from dataclasses import asdict

    from scalebench.analysis.compare import (COMPARISON_COLUMNS, compare, compare_nights, comparison_rows, render,
                                             render_nights)
    from scalebench.store.results import Store

    store = Store()
    if args.nights:
        a, b = args.nights
        cmp = compare_nights(store.cells(night=a), store.cells(night=b), a, b, args.benchmark, args.margin)
        rows = [r for c in cmp.benchmarks for r in comparison_rows(c)]
        return Listing(COMPARISON_COLUMNS, rows, asdict(cmp), text=render_nights(cmp))
    if not (args.run_a and args.run_b):
        raise CompareError("give two run ids (RUN_A RUN_B) or --nights A B")
    runs = compare(store, args.run_a, args.run_b, args.benchmark, args.margin)
    return Listing(COMPARISON_COLUMNS, comparison_rows(runs), asdict(runs), text=render(runs))


def _packages_of(store, ref: str) -> dict | None:
    """An image's package list: kept in the store (by digest, reference or name), else read now from
    this machine's engine (and kept)."""
    from scalebench.cell.images import keep_image

    kept = store.image_packages(ref)
    if kept:
        return kept
    try:
        import docker

        digest, _ = keep_image(docker.APIClient(timeout=120), store, ref)
    except Exception:
        return None
    return store.image_packages(digest)


def cmd_diff(args, configs: Configs) -> str:
    """What changed between two images: Python, CUDA and Debian packages."""
    from scalebench.analysis.changes import package_diff, render_diff
    from scalebench.store.results import Store

    store = Store()
    a, b = _packages_of(store, args.image_a), _packages_of(store, args.image_b)
    for ref, kept in ((args.image_a, a), (args.image_b, b)):
        if kept is None:  # (one check for both images; the asserts below restate it for the checker)
            raise ConfigError(f"image {ref!r}: no package list in the results store and not on this Docker engine "
                              "(give a digest, a reference a cell ran, or an image this engine has)")
    assert a is not None and b is not None
    label = lambda ref, k: f"{ref} ({k['digest'][:19]})"  # noqa: E731
    return render_diff(label(args.image_a, a), label(args.image_b, b), package_diff(a["packages"], b["packages"]))


def cmd_bisect(args, configs: Configs) -> Listing:
    """Which image between --good and --bad first made the cell slower: A/B steps through the real DAG."""
    from scalebench.analysis.bisect import Bisection
    from scalebench.orchestration.dags.bisect import bisect, dags_test_runner, image_list
    from scalebench.store.results import Store

    bench = configs.benchmark(args.benchmark)
    if args.gpus not in bench.gpu_counts:
        raise ConfigError(f"--gpus {args.gpus}: {bench.id} runs on {bench.gpu_counts} GPUs; bisect one of them")
    kind: Literal["cpu", "gpu"] = "gpu" if args.profile != "smoke" else "cpu"
    images = image_list(bench, kind, args.good, args.bad, args.candidates)
    store = Store()
    b = Bisection(bench.id, args.gpus, images)
    log = lambda line: print(line, file=sys.stderr)  # noqa: E731

    def packages_of(ref: str) -> dict | None:
        kept = _packages_of(store, ref)
        return kept["packages"] if kept else None

    bisect_id, lines = bisect(store, b, dags_test_runner(bench.id, store), args.profile, args.pairs,
                              packages_of, log=log)
    rows = [{"step": s.number, "run_id": s.run_id, "images": " ".join(s.images), "verdicts": " | ".join(s.lines)}
            for s in b.steps]
    return Listing(["step", "run_id", "images", "verdicts"], rows, {"bisect_id": bisect_id, **b.to_json(),
                                                                    "lines": lines},
                   [f"bisect {bisect_id}: {len(b.steps)} step(s)"] + lines, exit_code=0 if b.culprits else 1)


def cmd_report(args, configs: Configs) -> str:
    from scalebench.report.build import write_report
    from scalebench.store.results import Store

    if args.out:
        _writable_folder(Path(args.out), "--out")  # before the work, not after it
    path = write_report(Store(), args.out, night=args.night)
    return f"report written: {path} (and report.html, table.json and plots beside it; index: {path.parent.parent / 'index.html'})"


def _writable_folder(path: Path, option: str) -> None:
    """Refuse a folder option that names a file, or a place this user cannot create or write."""
    if path.exists() and not path.is_dir():
        raise ConfigError(f"{option} {path}: is a file, not a folder; name a folder for the output")
    existing = next((p for p in (path, *path.parents) if p.exists()), Path("/"))
    if not existing.is_dir() or not os.access(existing, os.W_OK | os.X_OK):
        raise ConfigError(f"{option} {path}: {existing} is not writable; name a folder you can write")


def cmd_data(args, configs: Configs) -> dict:
    from scalebench.core.cells import host_for
    from scalebench.cell.datasets import prepare

    if args.fetch:
        return fetch_data(args, configs)
    if not args.benchmark:
        raise ConfigError("scalebench data: name a benchmark to check (or use --fetch to download datasets)")
    b = configs.benchmark(args.benchmark)
    return prepare(b, args.profile, host_for(b, args.profile, configs.fleet, b.gpu_counts))


def fetch_data(args, configs: Configs) -> dict:
    """Download the real datasets of one benchmark (or of every benchmark) into the data root."""
    from scalebench_kit import datasets as kit_datasets

    from scalebench.cell.fetch import fetch

    benches = ([configs.benchmark(args.benchmark)] if args.benchmark
               else [configs.benchmark(b) for b in sorted(configs.benchmarks)])
    roots = {h.data_root for h in configs.fleet.hosts if h.data_root}
    data_root = args.data_root or (roots.pop() if len(roots) == 1 else None)
    if not data_root:
        raise ConfigError("scalebench data --fetch: no data root; give --data-root PATH or set data_root on the "
                          f"host in the fleet config (hosts with one: {sorted(roots) or 'none'})")
    out = {}
    for b in benches:
        name, root = b.dataset.name, Path(data_root) / b.dataset.path
        if name in out:
            continue
        files = fetch(name, root, args.mirror, {n: d.archives for n, d in configs.stacks.datasets.items()})
        missing = kit_datasets.missing_files(root, b.dataset.format)
        out[name] = {"root": str(root), "archives": [f.name for f in files], "format": b.dataset.format,
                     "complete": not missing, "missing_examples": missing[:3]}
    return out


def cmd_pools(args, configs: Configs) -> Listing:
    """One Airflow pool per host, sized to its devices (pool_slots of a cell = its GPU count)."""
    wanted = {h.pool: len(h.device_ids) for h in configs.fleet.hosts}
    if args.apply:
        from airflow.models.pool import Pool

        from sqlalchemy.exc import DBAPIError

        try:
            for h in configs.fleet.hosts:
                Pool.create_or_update_pool(h.pool, len(h.device_ids), f"scalebench host {h.name} ({h.kind})", False)
        except DBAPIError as exc:
            from airflow.configuration import conf
            from sqlalchemy.engine import make_url

            url = make_url(conf.get("database", "sql_alchemy_conn")).render_as_string(hide_password=True)
            raise ConfigError(f"pools --apply: the Airflow metadata DB {url} refused the pools "
                              f"({str(exc.orig).splitlines()[0][:200]}); run `airflow db migrate` with this "
                              "AIRFLOW_HOME first (make airflow-db does)") from None
    rows = [{"pool": h.pool, "slots": len(h.device_ids), "host": h.name, "queue": h.queue} for h in configs.fleet.hosts]
    return Listing(["pool", "slots", "host", "queue"], rows, {"pools": wanted, "applied": bool(args.apply)},
                   notes=["applied to the Airflow metadata DB" if args.apply else "not applied (--apply writes them)"])


def cmd_prune(args, configs: Configs) -> dict:
    from scalebench.core import paths
    from scalebench.store.prune import held_cells, prune

    days = args.older_than if args.older_than is not None else configs.fleet.retention_days
    try:
        found = prune(paths.results_dir(), paths.airflow_logs_dir(), days, dry_run=args.dry_run, held=held_cells())
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    return found.summary(days, args.dry_run)


def cmd_repro(args, configs: Configs) -> str:
    from scalebench.tools import repro

    try:
        folder = repro.find_attempt(args.target)
        if not args.run:
            return repro.show(folder)
        rc, out = repro.run(folder)
    except repro.ReproError as exc:
        raise ConfigError(str(exc)) from None
    return f"exit code {rc}; results in {out} (not recorded in the store)"


def cmd_db(args, configs: Configs) -> str:
    from scalebench.core import paths
    from scalebench.store import backup
    from scalebench.store.db import summaries_outdated, upgrade

    url = paths.store_url()
    if args.action in ("backup", "restore"):
        if not args.file:
            raise ConfigError(f"scalebench db {args.action} needs a FILE")
        try:
            if args.action == "backup":
                return backup.backup(url, args.file, pg_container=args.pg_container)
            return backup.restore(args.file, url, pg_container=args.pg_container)
        except backup.BackupError as exc:
            raise ConfigError(str(exc)) from None
    if args.action == "summarize":
        return _summarize_all(url)
    before, after = upgrade(url)
    where = url.split("@")[-1]
    if before == after:
        return f"results store {where}: already at schema revision {after}"
    done = f"results store {where}: upgraded from {before or 'an empty database'} to schema revision {after}"
    if before is not None and after is not None and summaries_outdated(before, after):  # a new table or figure column
        done += "; " + _summarize_all(url)
    return done


def _summarize_all(url: str) -> str:
    from scalebench.report.summary import summarize_night
    from scalebench.store.results import Store

    store = Store(url)
    nights = store.cell_nights()
    rows = sum(summarize_night(store, bench, night) for bench, night in nights)
    return f"history summaries rebuilt: {rows} rows for {len(nights)} (benchmark, night) pairs"


def cmd_alerts(args, configs: Configs) -> Listing:
    """Alert groups: list (open first), show one with its figures and events, set a state / owner / note."""
    import getpass

    from scalebench.analysis.alert_groups import figure_line, progress
    from scalebench.core.alert_rules import AlertStateError
    from scalebench.store.alert_groups import AlertGroups
    from scalebench.store.results import Store

    groups = AlertGroups(Store())
    try:
        if args.action == "list":
            found = groups.groups(state=args.state, benchmark=args.benchmark, owner=args.owner)
        else:
            if args.id is None:
                raise ConfigError(f"alerts {args.action}: needs a group ID (scalebench alerts list shows them)")
            if args.action == "set":
                groups.set(args.id, args.who or getpass.getuser(), state=args.state, owner=args.owner, note=args.note)
            one = groups.group(args.id)
            if one is None:
                raise ConfigError(f"alerts {args.action}: no alert group #{args.id} (scalebench alerts list shows them)")
            found = [one]
    except AlertStateError as exc:
        raise ConfigError(f"alerts {args.action}: {exc}") from None
    rows = [{"id": g["id"], "state": g["state"], "owner": g["owner"] or "", "first": g["first_night"],
             "last": g["last_night"], "figures": len(g["figures"]), "benchmarks": " ".join(g["benchmarks"]),
             "suspect": (g["suspect"] or "none")[:60]} for g in found]
    notes = []
    if args.action != "list":
        g = found[0]
        notes = [x for x in [progress(g)] if x] + [f"- {figure_line(f)}" for f in g["figures"]]
        notes += [f"{e['at']} {e['who']}: {e['kind']}" + (f" {e['from'] or ''} -> {e['to']}" if e["to"] else "")
                  + (f": {e['note']}" if e["note"] else "") for e in g.get("events", [])]
    doc = found if args.action == "list" else found[0]
    return Listing(["id", "state", "owner", "first", "last", "figures", "benchmarks", "suspect"], rows, doc, notes,
                   empty="no alert group" + (f" in state {args.state}" if args.state else ""))


def _group_id(text: str) -> int:
    if not text.isdigit() or not 0 < int(text) < 2**31:
        raise argparse.ArgumentTypeError(f"expects a group number like 12 (scalebench alerts list); got {text!r}")
    return int(text)


def _listing(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
    p.add_argument("-o", "--output", choices=OUTPUTS, default="table", help="table (default), json or csv")
    p.add_argument("--json", dest="output", action="store_const", const="json",
                   help="the same as -o json (kept for one release)")
    return p


def main(argv: list[str] | None = None) -> int:
    parser = Parser(prog="scalebench", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--fleet", help="fleet YAML (default include/configs/fleet.yaml or $SCALEBENCH_FLEET)")
    sub = parser.add_subparsers(dest="cmd", required=True)
    _listing(sub.add_parser("configs", help="validate the configs: one row per benchmark (-o json: every resolved field)"))
    p = _listing(sub.add_parser("stacks", help="the training stacks (include/configs/stacks.yaml), in build order"))
    p.add_argument("--build-order", action="store_true", help="only the names, each after the stack it is built FROM")
    p.add_argument("--base-of", metavar="STACK", help="only the stack STACK is built FROM (empty: the base image)")
    p = _listing(sub.add_parser("plan", help="the night's plan: steps, timed steps and seconds per benchmark, GPU "
                                             "count and host; each host's night against its budget (exit 1: "
                                             "infeasible)"))
    p.add_argument("--benchmark", help="one benchmark (default: all)")
    p.add_argument("--profile", default="nightly", choices=PROFILES)
    p.add_argument("--repeats", type=_whole(1, 48), help="repeats per cell (default: each benchmark's schedule_repeats)")
    p.add_argument("--fleet", default=argparse.SUPPRESS, help="fleet YAML (as before the subcommand)")
    p = _listing(sub.add_parser("rehearse", help="run the nightly plan through the real DAGs on CPU hosts standing "
                                                 "in for the fleet's GPU hosts (hold trainer at planted step times); "
                                                 "exit 1 when a relative time misses the planted one"))
    p.add_argument("--benchmark", action="append", help="one benchmark (repeatable; default: all)")
    p.add_argument("--gpus", type=_gpus, help="GPU counts, e.g. 1,4 (default: each benchmark's)")
    p.add_argument("--repeats", type=_whole(1, 48), help="repeats per cell (default: each benchmark's schedule_repeats)")
    p.add_argument("--scale", type=_number(0, 10, open_low=True), default=0.05,
                   help="planted step time = the plan's x this (default 0.05)")
    p.add_argument("--tolerance", type=_number(0, 1, open_low=True), default=0.05,
                   help="relative times must be within this (default 0.05)")
    p.add_argument("--regress", metavar="BENCHMARK:GPUS:PERCENT",
                   help="also plant a regression (e.g. unet_torch_voc2007:4:20): the plan runs the night before, "
                        "its figures seed the baseline, then the benchmark runs slowed; exit 1 unless its reruns "
                        "confirm it")
    p.add_argument("--profile", default="nightly", choices=["nightly", "full"],
                   help="full: a rehearsed week, the nightly pass and then the weekly accuracy run at its plan's "
                        "sizes (3 repeats, full passes) with planted accuracies; exit 1 unless the report's verdicts "
                        "give them back")
    p.add_argument("--plant-accuracy", metavar="BENCHMARK:GPUS:POINTS",
                   help="with --profile full: that benchmark's accuracy that many points lower at GPUS (e.g. "
                        "unet_torch_voc2007:4:3); every other level equal")
    p.add_argument("--work", help="work folder (default .state/rehearsal)")
    p.add_argument("--fleet", default=argparse.SUPPRESS, help="fleet YAML (as before the subcommand)")
    p = _listing(sub.add_parser("cells", help="the cell matrix of one run (its costs: scalebench plan)"))
    p.add_argument("benchmark", nargs="?", help="benchmark id (default: all)")
    p.add_argument("--profile", default="smoke", choices=PROFILES)
    p.add_argument("--gpus", type=_gpus, help="GPU counts, e.g. 1,2 (default: the config's)")
    p.add_argument("--repeats", type=_whole(1, 48), default=1)
    p.add_argument("--seed", type=_whole(0, 2**31 - 1), default=0)
    p.add_argument("--run-id", default="preview")
    p = _listing(sub.add_parser("results", help="stored cells: the figure, or why the last attempt failed"))
    p.add_argument("--benchmark")
    p.add_argument("--run-id")
    when = p.add_mutually_exclusive_group()
    when.add_argument("--night", type=_night, metavar="YYYY-MM-DD", help="one night (a DAG run's logical date, UTC)")
    when.add_argument("--since", type=_night, metavar="YYYY-MM-DD", help="that night and every later one")
    p.add_argument("--failed", action="store_true", help="only cells without a valid result")
    p = _listing(sub.add_parser("history", help="one benchmark across nights: its figures per night, GPU count "
                                                "and precision (the history page's table)"))
    p.add_argument("benchmark")
    p.add_argument("--nights", type=_whole(1, 36500), default=30, help="the last N nights (default 30)")
    p.add_argument("--all", action="store_true", help="every summarized night")
    p.add_argument("--gpus", type=_whole(1, 1024), help="one GPU count")
    p = _listing(sub.add_parser("compare", help="a candidate run B against run A per cell: time ratio with its CI, "
                                                "throughput, accuracy equivalence (e.g. a new image tag)"))
    p.add_argument("run_a", nargs="?", help="reference run id (or --nights)")
    p.add_argument("run_b", nargs="?", help="candidate run id")
    p.add_argument("--nights", nargs=2, type=_night, metavar=("A", "B"),
                   help="two nights instead: per benchmark, the run each night's report reads")
    p.add_argument("--benchmark", help="one benchmark (needed when a run id belongs to several benchmarks' DAGs)")
    p.add_argument("--margin", type=_number(0, 1, open_low=True), default=0.01,
                   help="accuracy equivalence margin (default 0.01)")
    p = sub.add_parser("diff", help="what changed between two images: Python, CUDA and Debian packages with versions")
    p.add_argument("image_a", help="the earlier image: a digest, a reference a cell ran, or an image on this engine")
    p.add_argument("image_b", help="the later image")
    p = _listing(sub.add_parser("bisect", help="which image between --good and --bad first made a cell slower: "
                                               "A/B steps of the benchmark's DAG (airflow dags test)"))
    p.add_argument("benchmark")
    p.add_argument("--gpus", type=_whole(1, 1024), required=True, help="the regressed cell's GPU count")
    p.add_argument("--good", required=True, help="an image (tag of the benchmark's repository) that was fast")
    p.add_argument("--bad", required=True, help="an image that is slow")
    p.add_argument("--candidates", nargs="*", default=[], metavar="TAG", help="the images between them, in order")
    p.add_argument("--pairs", type=_whole(5, 10), default=5, help="cells per image per step (at least 5 for p <= 0.01)")
    p.add_argument("--profile", default="nightly", choices=["smoke", "nightly", "full"])
    p = sub.add_parser("report", help="write the report (Markdown, HTML, plot)")
    p.add_argument("--out", help="output folder (default .state/reports/<night>)")
    p.add_argument("--night", type=_night, help="night label, YYYY-MM-DD (default today, UTC)")
    p = sub.add_parser("data", help="check a benchmark's dataset (smoke: make its synthetic data), or --fetch the "
                                    "real ones")
    p.add_argument("benchmark", nargs="?", help="benchmark id (with --fetch: default every benchmark's dataset)")
    p.add_argument("--profile", default="smoke", choices=PROFILES)
    p.add_argument("--fetch", action="store_true", help="download the real archives (resumable, sha256-checked) "
                                                        "and unpack them into the data root")
    p.add_argument("--data-root", help="where datasets live (default: the fleet host's data_root)")
    p.add_argument("--mirror", type=_url, help="base URL serving the same archive names (default: the official mirrors; "
                                    "env SCALEBENCH_DATA_MIRROR)")
    p = _listing(sub.add_parser("pools", help="the Airflow pools of the fleet (one per host)"))
    p.add_argument("--apply", action="store_true", help="create or update them in the Airflow metadata DB")
    p = sub.add_parser("prune", help="remove bulky files older than the retention age (never a result row, "
                                     "an attempt's record files or a report)")
    p.add_argument("--older-than", type=_number(1, 36500), metavar="DAYS",
                   help="age in days (default: fleet retention_days)")
    p.add_argument("--dry-run", action="store_true", help="only count what would be removed")
    p = sub.add_parser("repro", help="the exact docker run of an attempt (image digest, mounts, env, devices, "
                                     "command); --run runs it into a new folder under a device lease")
    p.add_argument("target", help="an attempt folder, or a cell key (its newest attempt that started a container)")
    p.add_argument("--run", action="store_true", help="run it now (outside the store: nothing is recorded)")
    p = _listing(sub.add_parser("alerts", help="alert groups (one per change that regressed): list, show ID, "
                                               "set ID STATE [--owner] [--note]"))
    p.add_argument("action", choices=["list", "show", "set"])
    p.add_argument("id", nargs="?", type=_group_id, help="the group's number (show, set)")
    p.add_argument("state", nargs="?", choices=STATES, help="set: the new state")
    p.add_argument("--state", dest="state", choices=STATES + ("open",), help="list: only this state (open: new, "
                                                                          "triaged, investigating)")
    p.add_argument("--benchmark", help="list: only groups with this benchmark")
    p.add_argument("--owner", help="set: who owns it (needed for triaged); list: only theirs")
    p.add_argument("--note", help="set: a note for the event log")
    p.add_argument("--who", help="set: who makes the change (default: this user)")
    p = sub.add_parser("db", help="the results database")
    p.add_argument("action", choices=["upgrade", "backup", "restore", "summarize"],
                   help="upgrade: create or migrate the schema (idempotent, locked); backup FILE: the whole store to "
                        "a new file; restore FILE: a backup into an empty store (SCALEBENCH_STORE_URL); summarize: "
                        "rebuild the history pages' night summaries from the stored attempts")
    p.add_argument("file", nargs="?", help="the backup file (backup, restore)")
    p.add_argument("--pg-container", metavar="NAME", help="PostgreSQL: run pg_dump/pg_restore inside this container "
                                                          "(e.g. the compose stack's postgres service)")
    parser.add_argument("--debug", action="store_true", help="show the traceback of an error (or SCALEBENCH_DEBUG=1)")
    args = parser.parse_args(argv)
    debug = args.debug or os.environ.get("SCALEBENCH_DEBUG", "") not in ("", "0")
    try:
        configs = Configs(fleet_path=args.fleet)
        result = {"configs": cmd_configs, "stacks": cmd_stacks, "plan": cmd_plan, "rehearse": cmd_rehearse,
                  "cells": cmd_cells, "results": cmd_results, "history": cmd_history, "compare": cmd_compare,
                  "report": cmd_report, "data": cmd_data, "pools": cmd_pools, "db": cmd_db, "prune": cmd_prune,
                  "repro": cmd_repro, "diff": cmd_diff, "bisect": cmd_bisect, "alerts": cmd_alerts}[args.cmd](args, configs)
        if isinstance(result, Listing):
            print(result.render(args.output))
            return result.exit_code
        print(result if isinstance(result, str) else json.dumps(result, indent=2, default=str))
        return 0
    except BaseException as exc:  # the one error path: a line on stderr and an exit status, never a traceback
        if debug or isinstance(exc, SystemExit):
            raise
        line, status = explain(exc, args.cmd)
        if line:
            print(f"scalebench: {line}", file=sys.stderr)
        return status


def explain(exc: BaseException, cmd: str) -> tuple[str | None, int]:
    """(one line, exit status) for an error that reached the command line: 2 for bad input (a
    config, an argument, a file or store that cannot be used), 1 for a run that failed, 130 for an
    interrupt, and a broken pipe (a reader that stopped reading) ends quietly."""
    if isinstance(exc, BrokenPipeError):
        try:  # Python's advice: point stdout at devnull so the interpreter's final flush stays quiet
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        except OSError:
            pass
        return None, 1
    if isinstance(exc, KeyboardInterrupt):
        return f"{cmd}: interrupted", 130
    if isinstance(exc, RunFailed):
        return str(exc), 1
    if isinstance(exc, (ConfigError, DatasetError, FetchError, StoreNotReady, ProjectNotFound, CompareError)):
        return str(exc), 2
    from scalebench.store.db import store_error

    store = store_error(exc)
    if store:
        return store, 2
    if isinstance(exc, UnicodeDecodeError):
        return f"{cmd}: a file is not UTF-8 text ({exc.reason} at byte {exc.start}); save it as UTF-8", 2
    if isinstance(exc, OSError):
        what = f"{exc.filename}: " if exc.filename else ""
        return f"{cmd}: {what}{exc.strerror or exc}; check the path and its permissions", 2
    first = (str(exc).strip().splitlines() or [""])[0][:300]
    return (f"{cmd}: {type(exc).__name__}: {first}; this is a bug or an unexpected state: run it again with "
            "--debug (or SCALEBENCH_DEBUG=1) for the traceback"), 1


if __name__ == "__main__":
    sys.exit(main())
