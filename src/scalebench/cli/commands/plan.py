"""The night's plan, the cell matrix of one run, and the plan rehearsed through the real DAGs."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from scalebench.cli.arguments import Command, arg, gpus, number, whole
from scalebench.cli.listing import Listing
from scalebench.core.config import PROFILES, ConfigError, Configs
from scalebench.core.paths import ProjectNotFound
from scalebench.store.db import StoreNotReady


def cmd_plan(args, configs: Configs) -> Listing:
    """The night's plan: per benchmark, GPU count and host, steps and seconds; per host the night."""
    from scalebench.core.assignment import ASSIGNED_PROFILES
    from scalebench.core.plan import assigned_plan, night_plan

    benches = {args.benchmark: configs.benchmark(args.benchmark)} if args.benchmark else configs.benchmarks
    stored, previous = _stored()
    assignment = None
    if args.profile in ASSIGNED_PROFILES and configs.fleet.hosts_of("gpu"):
        # decided over every benchmark, as the nights decide it; shown, not stored
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
    notes += [f"host {h.host}: a new image on a short baseline (a series' first nights, after a restart or an "
              f"improvement) adds an A/B at every GPU count: {h.ab_cells} cells, {round(h.ab_minutes)} min against "
              f"{max(0.0, h.budget_minutes - h.cell_minutes):.0f} min the cells leave: "
              + ("fits" if h.cell_minutes + h.ab_minutes <= h.budget_minutes else
                 "the DAG runs the A/Bs that fit each benchmark's share, largest GPU count first; the rest are not "
                 "judged that night")
              for h in night.hosts if h.ab_minutes and args.profile == "nightly"]
    notes += [f"host {h.host}: an A/B profiles its last pair (a profiling window in each of its two cells, after the "
              f"timed steps), within the A/B minutes above: "
              + "; ".join(f"{b} " + ", ".join(f"{m * 60:.0f} s at {n}" for n, m in sorted(per.items()))
                          for b, per in sorted(h.ab_profile.items()) if per) + " (estimated)"
              for h in night.hosts if any(h.ab_profile.values()) and args.profile != "full"]
    if assignment:
        notes += [f"assigned: {b} -> {assignment.hosts[b]} ({assignment.why[b]})" if b in assignment.hosts
                  else f"not assigned: {b}: {assignment.why[b]}" for b in sorted(benches)]
        notes += [f"moves: {m}" for m in assignment.moves(previous)]
    from scalebench.analysis.noise import MIN_NIGHTS

    noise = _noise_verdicts(benches, args.profile, _stored_figures())
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


def cmd_cells(args, configs: Configs) -> Listing:
    from scalebench.core import cells as cellmod

    from scalebench.core.assignment import ASSIGNED_PROFILES
    from scalebench.core.plan import assigned_plan

    ids = [args.benchmark] if args.benchmark else sorted(configs.benchmarks)
    hosts = {}
    if args.profile in ASSIGNED_PROFILES and configs.fleet.hosts_of("gpu"):  # each on its assigned host, as tonight
        stored, previous = _stored()
        _, a = assigned_plan(configs.benchmarks, configs.fleet, args.profile, stored=stored, probe=configs.probe(),
                             previous=previous)
        hosts = {b: configs.fleet.host(h) for b, h in a.hosts.items()}
    cells = [c for bid in ids for c in cellmod.plan(configs.benchmark(bid), configs.fleet, profile=args.profile,
                                                   run_id=args.run_id, gpu_counts=args.gpus, repeats=args.repeats,
                                                   seed=args.seed, host=hosts.get(bid))]
    columns = ["benchmark", "host", "gpus", "epochs", "repeat", "profile", "global_batch", "lr", "key"]
    return Listing(columns, cells, {"cells": cells},
                   notes=[f"steps, seconds and the night's budget: scalebench plan --profile {args.profile}"])


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


def _stored() -> tuple[dict, dict[str, str]]:
    """What the nights read from the results store for a plan (core.plan.stored_inputs); nothing
    when there is no results store yet (a new deployment)."""
    from scalebench.core.plan import stored_inputs
    from scalebench.store.results import Store

    try:
        return stored_inputs(Store())
    except (StoreNotReady, ProjectNotFound):
        return {}, {}


def _stored_figures() -> list:
    """Every stored figure, for the noise lines; none when there is no results store yet."""
    from scalebench.store.results import Store

    try:
        return Store().figures()
    except (StoreNotReady, ProjectNotFound):
        return []


FLEET = arg("--fleet", default=argparse.SUPPRESS, help="fleet YAML (as before the subcommand)")
REPEATS = arg("--repeats", type=whole(1, 48), help="repeats per cell (default: each benchmark's schedule_repeats)")
PLAN = Command("plan", "the night's plan: steps, timed steps and seconds per benchmark, GPU count and host; each host's "
                       "night against its budget (exit 1: infeasible)", cmd_plan, (
    arg("--benchmark", help="one benchmark (default: all)"),
    arg("--profile", default="nightly", choices=PROFILES),
    REPEATS,
    FLEET,
), listing=True)
REHEARSE = Command("rehearse", "run the nightly plan through the real DAGs on CPU hosts standing in for the fleet's GPU "
                               "hosts (hold trainer at planted step times); exit 1 when a relative time misses the "
                               "planted one", cmd_rehearse, (
    arg("--benchmark", action="append", help="one benchmark (repeatable; default: all)"),
    arg("--gpus", type=gpus, help="GPU counts, e.g. 1,4 (default: each benchmark's)"),
    REPEATS,
    arg("--scale", type=number(0, 10, open_low=True), default=0.05,
        help="planted step time = the plan's x this (default 0.05)"),
    arg("--tolerance", type=number(0, 1, open_low=True), default=0.05,
        help="relative times must be within this (default 0.05)"),
    arg("--regress", metavar="BENCHMARK:GPUS:PERCENT",
        help="also plant a regression (e.g. unet_torch_voc2007:4:20): the plan runs the night before, its figures "
             "seed the baseline, then the benchmark runs slowed; exit 1 unless its reruns confirm it"),
    arg("--profile", default="nightly", choices=["nightly", "full"],
        help="full: a rehearsed week, the nightly pass and then the weekly accuracy run at its plan's sizes (3 "
             "repeats, full passes) with planted accuracies; exit 1 unless the report's verdicts give them back"),
    arg("--plant-accuracy", metavar="BENCHMARK:GPUS:POINTS",
        help="with --profile full: that benchmark's accuracy that many points lower at GPUS (e.g. "
             "unet_torch_voc2007:4:3); every other level equal"),
    arg("--work", help="work folder (default .state/rehearsal)"),
    FLEET,
), listing=True)
CELLS = Command("cells", "the cell matrix of one run (its costs: scalebench plan)", cmd_cells, (
    arg("benchmark", nargs="?", help="benchmark id (default: all)"),
    arg("--profile", default="smoke", choices=PROFILES),
    arg("--gpus", type=gpus, help="GPU counts, e.g. 1,2 (default: the config's)"),
    arg("--repeats", type=whole(1, 48), default=1),
    arg("--seed", type=whole(0, 2**31 - 1), default=0),
    arg("--run-id", default="preview"),
), listing=True)
