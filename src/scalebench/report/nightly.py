"""The nightly report: the study's table regenerated from stored cells, with statistics,
conclusions written from the numbers, plots, regression alerts and checks on the table.

Compute, then render: `build` returns a `Report` (typed, every figure decided there, table
checks included); `render` writes it as Markdown, HTML, JSON and plots without computing
anything again. `build_report` reads the store once for a night; `write_report` does both.

What each figure means (relative time, verdicts, regressions, suspects) is defined once, in
docs/report.md.
"""
from __future__ import annotations

import datetime as dt
import html
import json
import statistics
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Callable

from scalebench_kit.names import (ACCURACY_METRICS, REPORT_HTML, REPORT_MD, REPORT_TABLE, REPORTS_INDEX_HTML,
                                  REPORTS_INDEX_JSON)

from scalebench.analysis import history
from scalebench.core import nights
from scalebench.core import paths
from scalebench.analysis.regress import Gates, Judgement, Shift, judge
from scalebench.analysis.stats import Verdict

STUDY_AVERAGE = {2: 0.662, 3: 0.557, 4: 0.512}
LOOKBACK_NIGHTS = 120  # history judged for a night's regressions (baselines use the last 20 of them)
PLOTS = ("speedup.png", "relative_time.png", "accuracy.png", "breakdown.png", "trend.png")
TIME_PARTS = ("setup_s", "warmup_s", "train_s", "eval_s")
STEP_PARTS = ("data_wait", "compute", "sync", "other")  # a steady step, as the kit's timing module splits it
FLAT = 0.03  # a step share that moves less than 3 points between GPU counts is called flat


@dataclass
class Options:
    margin: float = 0.01            # accuracy equivalence margin: ±1 point
    gates: Gates = field(default_factory=Gates)
    shifts: list[Shift] = field(default_factory=list)
    expected: list[str] = field(default_factory=list)   # benchmarks scheduled every night
    n_boot: int = 1000
    lineage: dict[str, str] = field(default_factory=dict)  # benchmark -> image name (not digest)
    lr_policies: dict[str, str] = field(default_factory=dict)  # benchmark -> "linear 0.01@256"
    metrics: dict[str, list[str]] = field(default_factory=dict)  # benchmark -> its configured accuracy metrics
    config_errors: dict[str, str] = field(default_factory=dict)  # file stem -> why its config does not load
    targets: dict[str, tuple[str, float]] = field(default_factory=dict)  # benchmark -> (metric, time-to-accuracy target)
    references: dict[str, dict[str, object]] = field(default_factory=dict)  # benchmark -> profile -> ReferenceAccuracy


@dataclass
class Row:
    """One benchmark's run of the night, every figure the report states about it."""
    benchmark: str
    run_id: str
    run_type: str
    profile: str
    scaling_mode: str
    lr_policy: str
    parameters: int | None
    global_batch: dict[int, int]
    train_epochs: dict[int, int]        # the epoch count train_s and iqr_s are taken at (the longest run)
    train_s: dict[int, float]           # median over repeats at train_epochs[n]
    iqr_s: dict[int, float]             # IQR over the same repeats
    relative_time: dict[int, float]
    relative_time_ci: dict[int, tuple[float, float]]
    speedup: dict[int, float]
    efficiency: dict[int, float]
    metrics: dict[str, dict[int, float]]
    metric_iqr: dict[str, dict[int, float]]
    verdicts: dict[str, dict[int, Verdict]]
    breakdown: dict[int, dict[str, float | None]]
    step_s: dict[int, dict[str, float | None]]       # median seconds per steady step of each STEP_PART (slowest rank)
    step_shares: dict[int, dict[str, float | None]]  # median share of the step; None: the framework does not expose it
    cells: int
    valid: int
    not_valid: list[dict]
    refused: list[str]
    steps_per_epoch: dict[int, int] = field(default_factory=dict)  # what an epoch was, per GPU count (contracts that say)
    epoch_mismatch: list[int] = field(default_factory=list)  # GPU counts whose epoch is not one pass over the split
    tta_target: str | None = None       # e.g. "IoU >= 0.5"; None when the config sets no target
    time_to_accuracy: dict[int, float | None] = field(default_factory=dict)  # median train s to the target; None: not reached
    suspect: dict[int, list[str]] = field(default_factory=dict)  # GPU count -> why its figures are not plausible


@dataclass
class Report:
    night: str
    generated: str
    complete: bool
    expected: list[str]
    missing: list[str]
    source: str                         # "scheduled" or "manual": which runs feed the table
    manual_runs: list[dict]
    config_errors: dict[str, str]
    gpu_counts: list[int]
    metrics: list[str]                  # accuracy metrics shown, in the names module's order
    rows: list[Row]
    average: dict[int, float]
    conclusions: list[str]
    alerts: list[str]
    flagged: list[str]
    cleared: list[str]                  # flags the same night's reruns cleared
    changes: list[str]                  # series whose system fingerprint changed tonight: baseline restarted
    diagnoses: list[str]                # scaling vs compute regressions, per benchmark
    alert_details: list[dict]           # each alert as data (figure, baseline, reruns): what a notifier sends
    judged: list[Judgement]             # every night of every series (the trend plot marks alerts)
    series: int
    table_checks: list[str]
    plots: tuple[str, ...] = PLOTS

    def to_json(self) -> dict:
        """table.json: the same figures, with verdicts as their texts."""
        doc = {f.name: getattr(self, f.name) for f in fields(self) if f.name not in ("rows", "judged")}
        doc["rows"] = []
        for r in self.rows:
            row = {k: v for k, v in asdict(r).items() if k != "verdicts"}
            row["verdicts_text"] = {m: {n: {"kind": v.kind, "text": v.text(), "ci": v.ci, "diff": v.diff}
                                        for n, v in per.items()} for m, per in r.verdicts.items()}
            doc["rows"].append(row)
        doc["plots"] = list(self.plots)
        return doc


def _med(xs):
    return statistics.median(xs) if xs else None


def choose_runs(cells: list[dict], night: str) -> tuple[dict[str, str], str]:
    """(per benchmark, the run that feeds the table; where they come from). When the night has
    scheduled runs, only those (the last per benchmark); a night with only manual runs (a demo, a
    trial) is reported from the last manual run per benchmark, marked 'manual'."""
    tonight = [c for c in cells if c["night"] == night]
    source = "scheduled" if any(c["run_type"] == "scheduled" for c in tonight) else "manual"
    chosen: dict[str, str] = {}
    for c in tonight:  # cells come in recording order: the last run wins
        if source == "manual" or c["run_type"] == "scheduled":
            chosen[c["benchmark"]] = c["run_id"]
    return chosen, source


def manual_runs(cells: list[dict], night: str) -> list[dict]:
    """Every manual run of the night with its counts and the cells that have no valid result."""
    runs: dict[tuple[str, str], dict] = {}
    for c in cells:
        if c["night"] != night or c["run_type"] == "scheduled":
            continue
        r = runs.setdefault((c["benchmark"], c["run_id"]), {"benchmark": c["benchmark"], "run_id": c["run_id"],
                                                            "cells": 0, "valid": 0, "not_valid": []})
        r["cells"] += 1
        if c["figure"] is not None:
            r["valid"] += 1
        else:
            r["not_valid"].append({"label": c["label"], "status": c["status"], "reason": c["reason"] or "never started"})
    return list(runs.values())


def _baseline_ok(cell: dict, ones: list[dict]) -> bool:
    f = cell["figure"]
    return any(o["figure"]["image_digest"] == f["image_digest"] and o["figure"]["config_sha"] == f["config_sha"]
               and o["profile"] == cell["profile"] for o in ones)


def bench_row(bench: str, mine: list[dict], opts: Options, parameters: int | None = None) -> Row:
    from scalebench.analysis.stats import bootstrap_mean_ratio_ci, equivalence, iqr

    valid = [c for c in mine if c["figure"] is not None]
    ones = [c for c in valid if c["gpus"] == 1]
    refused = [c for c in valid if c["gpus"] > 1 and not _baseline_ok(c, ones)]
    usable = [c for c in valid if c not in refused]
    times: dict[tuple[int, int], list[float]] = {}
    for c in usable:
        times.setdefault((c["epochs"], c["gpus"]), []).append(c["figure"]["train_s"])
    gpus = sorted({g for _, g in times})
    epochs = sorted({e for e, _ in times})
    rel, ci = {}, {}
    for n in gpus:
        pairs = [(times[(e, 1)], times[(e, n)]) for e in epochs if (e, 1) in times and (e, n) in times]
        if not pairs:
            continue
        rel[n] = statistics.fmean(statistics.median(tn) / statistics.median(t1) for t1, tn in pairs)
        interval = bootstrap_mean_ratio_ci(pairs, n_boot=opts.n_boot) if n > 1 else None
        if interval:
            ci[n] = interval
    train_epochs = {n: max(e for e, g in times if g == n) for n in gpus}
    last = max(epochs) if epochs else None
    names = opts.metrics.get(bench) or [m for m in ACCURACY_METRICS
                                        if any(m in (c["figure"]["metrics"] or {}) for c in usable)]
    timings = {n: [c["figure"]["timing"] or {} for c in usable if c["gpus"] == n] for n in gpus}
    target = opts.targets.get(bench)
    steps = {n: step_figures(ts) for n, ts in timings.items()}  # each decided once
    epochs_seen, epoch_mismatch = epoch_check(timings)
    values = {m: {n: [c["figure"]["metrics"][m] for c in usable if c["gpus"] == n and c["epochs"] == last
                      and m in (c["figure"]["metrics"] or {})] for n in gpus} for m in names}
    return Row(
        benchmark=bench, run_id=mine[0]["run_id"], run_type=mine[0]["run_type"], profile=mine[0]["profile"],
        scaling_mode=mine[0]["scaling_mode"], lr_policy=opts.lr_policies.get(bench, ""), parameters=parameters,
        global_batch={c["gpus"]: c["global_batch"] for c in mine}, train_epochs=train_epochs,
        train_s={n: statistics.median(times[(e, n)]) for n, e in train_epochs.items()},
        iqr_s={n: iqr(times[(e, n)]) for n, e in train_epochs.items()},
        relative_time=rel, relative_time_ci=ci,
        speedup={n: 1 / r for n, r in rel.items()}, efficiency={n: 1 / r / n for n, r in rel.items()},
        metrics={m: {n: statistics.median(v) for n, v in per.items() if v} for m, per in values.items()},
        metric_iqr={m: {n: iqr(v) for n, v in per.items() if v} for m, per in values.items()},
        verdicts={m: {n: equivalence(v.get(1, []), v[n], opts.margin) for n in gpus if n > 1 and v.get(n)}
                  for m, v in values.items()},
        breakdown={n: {k: _med([t[k] for t in ts if t.get(k) is not None]) for k in TIME_PARTS}
                   for n, ts in timings.items()},
        step_s={n: f[0] for n, f in steps.items()}, step_shares={n: f[1] for n, f in steps.items()},
        steps_per_epoch=epochs_seen, epoch_mismatch=epoch_mismatch,
        tta_target=f"{ACCURACY_METRICS[target[0]].display} >= {target[1]:g}" if target else None,
        time_to_accuracy={n: _med([x for x in (time_to_target(t, *target) for t in ts if t.get("evaluations"))
                                   if x is not None]) for n, ts in timings.items()
                          if any(t.get("evaluations") for t in ts)} if target else {},
        cells=len(mine), valid=len(valid),
        not_valid=[{"label": c["label"], "status": c["status"], "reason": c["reason"] or "never started"}
                   for c in mine if c["figure"] is None],
        refused=[c["label"] for c in refused],
    )


def plausibility(row: Row, reference=None) -> dict[int, list[str]]:
    """Per GPU count, why its figures are not physically plausible: efficiency above 1, an epoch
    that is not one pass over the split, an accuracy far from the benchmark's reference at the
    global batch. Such figures are shown as suspect and left out of the average."""
    out: dict[int, list[str]] = {}
    for n, e in row.efficiency.items():
        if n > 1 and e > 1.0:
            out.setdefault(n, []).append(f"efficiency {e:.2f} is above 1 (faster than linear scaling)")
    for n in row.epoch_mismatch:
        out.setdefault(n, []).append(f"{row.steps_per_epoch.get(n)} steps per epoch do not match one pass over the "
                                     "train split at this global batch")
    if reference is not None:
        for n, v in row.metrics.get(reference.metric, {}).items():
            expected = reference.expected(row.global_batch.get(n, 0))
            if abs(v - expected) > reference.tolerance:
                out.setdefault(n, []).append(
                    f"{ACCURACY_METRICS[reference.metric].display} {v:.3f} is far from the reference {expected:.3f} "
                    f"(±{reference.tolerance:g}) at global batch {row.global_batch.get(n)}")
    return out


def step_figures(timings: list[dict]) -> tuple[dict[str, float | None], dict[str, float | None]]:
    """(median seconds per steady step, median share) of each step part over cells' breakdowns;
    a part is None when no cell measured it."""
    per_step: dict[str, list[float]] = {p: [] for p in STEP_PARTS}
    shares: dict[str, list[float]] = {p: [] for p in STEP_PARTS}
    for t in timings:
        b = t.get("breakdown") or {}
        steps = b.get("timed_steps") or 0
        for part in STEP_PARTS:
            if b.get(f"{part}_s") is not None and steps:
                per_step[part].append(b[f"{part}_s"] / steps)
            if (b.get("shares") or {}).get(part) is not None:
                shares[part].append(b["shares"][part])
    return {p: _med(v) for p, v in per_step.items()}, {p: _med(v) for p, v in shares.items()}


def epoch_check(timings: dict[int, list[dict]]) -> tuple[dict[int, int], list[int]]:
    """(steps per epoch per GPU count, the GPU counts where it does not follow the global batch):
    one pass over the same split takes steps(1) x batch(1) / batch(n) steps, give or take one for
    the dropped remainder; a step-based trainer whose 'epoch' stays fixed fails this."""
    plans = {n: [t["epoch"] for t in ts if t.get("epoch")] for n, ts in timings.items()}
    steps = {n: int(statistics.median(p["steps_per_epoch"] for p in ps)) for n, ps in plans.items() if ps}
    if 1 not in steps:
        return steps, []
    one = plans[1][0]
    bad = []
    for n, ps in plans.items():
        if n == 1 or not ps or ps[0].get("capped_by_max_steps_per_epoch") or one.get("capped_by_max_steps_per_epoch"):
            continue
        expected = one["steps_per_epoch"] * one["global_batch"] / ps[0]["global_batch"]
        if abs(steps[n] - expected) > 1:
            bad.append(n)
    return steps, sorted(bad)


def time_to_target(timing: dict, metric: str, target: float) -> float | None:
    """Training seconds until the first evaluation with metric >= target; None if none reached it."""
    for ev in timing.get("evaluations") or []:
        if (ev.get("metrics") or {}).get(metric, -1) >= target:
            return ev["train_s"]
    return None


def average_row(relative_times: list[dict[int, float]]) -> dict[int, float]:
    """Mean relative time per GPU count over the benchmarks that have it."""
    counts = sorted({n for rt in relative_times for n in rt})
    return {n: statistics.fmean([rt[n] for rt in relative_times if n in rt]) for n in counts}


def step_sentence(row: Row) -> str | None:
    """One sentence on what grows with the GPU count in a benchmark's steady step, led by the
    part whose share grows most; None without two GPU counts that have a breakdown."""
    counts = sorted(n for n, sh in row.step_shares.items() if any(v is not None for v in sh.values()))
    if len(counts) < 2:
        return None
    lo, hi = counts[0], counts[-1]
    a, b = row.step_shares[lo], row.step_shares[hi]
    names = {"data_wait": "data wait", "compute": "compute", "sync": "sync", "other": "unattributed time"}
    known = [p for p in STEP_PARTS if a.get(p) is not None and b.get(p) is not None]
    if not known:
        return None
    lead = max(known, key=lambda p: b[p] - a[p])
    unit = lambda n: f"{n} device{'s' if n != 1 else ''}"  # noqa: E731
    if b[lead] - a[lead] < FLAT:
        parts = ["no part of the step grows with the GPU count (" +
                 ", ".join(f"{names[p]} {100 * b[p]:.0f}%" for p in known) + f" at {unit(hi)})"]
    else:
        parts = [f"{names[lead]} is {100 * b[lead]:.0f}% of the step at {unit(hi)}, {100 * a[lead]:.0f}% at {lo}"]
        for p in known:
            if p == lead:
                continue
            d = b[p] - a[p]
            parts.append(f"{names[p]} flat ({100 * b[p]:.0f}%)" if abs(d) < FLAT else
                         f"{names[p]} {'grows' if d > 0 else 'falls'} from {100 * a[p]:.0f}% to {100 * b[p]:.0f}%")
    unmeasured = [names[p] for p in STEP_PARTS if p not in known]
    tail = f" ({', '.join(unmeasured)} not exposed by this framework)" if unmeasured else ""
    return f"{row.benchmark}: " + "; ".join(parts) + tail + "."


def conclusions(rows: list[Row], avg: dict[int, float], opts: Options) -> list[str]:
    from scalebench.analysis.stats import spearman

    out = []
    if not rows:
        return ["No benchmark has valid results for this night."]
    multi = [n for n in sorted(avg) if n > 1]
    if not multi:
        out.append("No benchmark has valid results at more than one GPU count this night, so no scaling is compared.")
    if multi:
        figs = ", ".join(f"{100 * avg[n]:.1f}% at {n} GPUs" for n in multi)
        study = ", ".join(f"{100 * STUDY_AVERAGE[n]:.1f}%" for n in multi if n in STUDY_AVERAGE)
        k = len([r for r in rows if r.relative_time])
        out.append(f"Averaged over {k} benchmark{'s' if k != 1 else ''}, training took {figs} of the 1-GPU time "
                   f"(the study reported {study}).")
        best = min(((r.relative_time[n], n, r) for r in rows for n in r.relative_time if n > 1), key=lambda x: x[0])
        r_, n_, row = best
        figure = f"{100 * r_:.1f}% of the 1-GPU time (speedup {1 / r_:.2f}x, efficiency {100 / r_ / n_:.0f}%)"
        if r_ < 1:
            out.append(f"The largest saving: {row.benchmark} at {n_} GPUs, {figure}.")
        else:
            out.append(f"No benchmark trained faster with more devices; the smallest slow-down: {row.benchmark} "
                       f"at {n_} GPUs, {figure}.")
        top = max(multi)
        pts = [(r.parameters, r.efficiency[top]) for r in rows if top in r.efficiency and r.parameters]
        rho = spearman([p for p, _ in pts], [e for _, e in pts])
        if rho is None:
            out.append(f"Whether more complex models gain more cannot be tested: {len(pts)} benchmark(s) with "
                       f"parameter counts and {top}-GPU results (Spearman's test needs 3).")
        elif rho[1] is None:
            same = "parameter count" if len({p for p, _ in pts}) == 1 else f"{top}-GPU efficiency"
            out.append(f"Whether more complex models gain more cannot be tested: all {len(pts)} benchmarks have the "
                       f"same {same}, so the rank correlation is undefined (no rho, no p-value).")
        else:
            verdict = "supported" if rho[0] > 0 and rho[1] < 0.05 else "not supported"
            out.append(f"More complex models gain more: {verdict} (Spearman's rho between parameter count and "
                       f"{top}-GPU efficiency {rho[0]:+.2f}, p = {rho[1]:.2f}, {len(pts)} benchmarks).")
    verdicts = [(r.benchmark, m, n, v) for r in rows for m, per in r.verdicts.items() for n, v in per.items()]
    if verdicts:
        eq = sum(v.kind == "equivalent" for *_, v in verdicts)
        worse = [f"{b} {m} at {n} GPUs ({v.text()})" for b, m, n, v in verdicts if v.kind == "worse"]
        inconcl = sum(v.kind == "inconclusive" for *_, v in verdicts)
        s = (f"Accuracy: {eq} of {len(verdicts)} comparisons with 1 GPU are equivalent within ±{100 * opts.margin:.0f} "
             f"point{'s' if opts.margin != 0.01 else ''} (two one-sided tests, 90% CI)")
        s += f"; worse: {'; '.join(worse)}" if worse else "; none is significantly worse"
        s += f"; {inconcl} inconclusive." if inconcl else "."
        out.append(s)
    out += [x for x in map(step_sentence, rows) if x]
    for r in rows:
        if r.epoch_mismatch:
            figs = ", ".join(f"{r.steps_per_epoch[n]} at {n} GPUs" for n in sorted(r.steps_per_epoch))
            out.append(f"{r.benchmark}: an epoch is not one pass over the train split at {', '.join(map(str, r.epoch_mismatch))} "
                       f"GPUs (steps per epoch: {figs}; expected to fall with the global batch): its training times "
                       "are not comparable across GPU counts.")
    return out


# -- rendering -------------------------------------------------------------------------------
def _pct(v):
    return "–" if v is None else f"{100 * v:.1f}%"


def _verdict_cell(per: dict) -> str:
    if not per:
        return "–"
    kinds = {v.kind for v in per.values()}
    if kinds == {"equivalent"}:
        return "equivalent"
    worst = next((k for k in ("worse", "inconclusive", "better") if k in kinds), "equivalent")
    return f"{worst} at " + ", ".join(str(n) for n, v in sorted(per.items()) if v.kind == worst)


def markdown(rep: Report) -> str:
    rows, counts, mets = rep.rows, rep.gpu_counts, rep.metrics
    out = [f"# scalebench report: night {rep.night}", ""]
    if rep.complete:
        out.append(f"Complete: every scheduled benchmark ({len(rep.expected)}) has recorded its run for this night.")
    else:
        out.append(f"**Partial report**: scheduled runs not yet recorded for this night: {', '.join(rep.missing) or '–'}. "
                   "Regression alerts wait for the complete report.")
    if rep.source == "manual" and rows:
        out += ["", "**Manual runs only**: this night has no scheduled run, so the table below is made from manual "
                "runs (the last one per benchmark); they never feed the regression baseline."]
    for stem, err in sorted(rep.config_errors.items()):
        out += ["", f"**Config error**: benchmark `{stem}` does not load and did not run: {err}"]
    out += ["", f"Generated {rep.generated}. Relative training time T(n)/T(1): median over repeats per epoch count, "
            "averaged over epoch counts; 95% bootstrap CI of that average in the detail table.", ""]
    display = [ACCURACY_METRICS[m].display for m in mets]
    head = ["benchmark", *[f"{d} verdict" for d in display], *[f"{n} GPU" for n in counts]]
    out += ["## The study's table", "", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        out.append("| " + " | ".join([r.benchmark, *[_verdict_cell(r.verdicts.get(m, {})) for m in mets],
                                     *[_pct(r.relative_time.get(n)) + (" (suspect)" if n in r.suspect else "")
                                       for n in counts]]) + " |")
    incomplete = [n for n in counts if sum(n in r.relative_time for r in rows) < len(rows)]
    label = "average" + (f" (incomplete rows at {', '.join(map(str, incomplete))} GPUs)" if incomplete else "")
    out.append("| " + " | ".join([label, *[""] * len(mets), *[_pct(rep.average.get(n)) for n in counts]]) + " |")
    out += ["", "## Conclusions", ""] + [f"- {x}" for x in rep.conclusions]
    cols = ["benchmark", "GPUs", "scaling", "global batch", "LR policy", "epochs", "train s, median (IQR)",
            "relative time (95% CI)", "speedup", "efficiency", *display]
    out += ["", "## Detail per GPU count", "", "Train s is steady training time at the longest epoch count run, "
            "median and interquartile range over repeats.", "", "| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for r in rows:
        for n in sorted(r.train_s):
            ci = r.relative_time_ci.get(n)
            rel = _pct(r.relative_time.get(n)) + (f" ({100 * ci[0]:.0f}-{100 * ci[1]:.0f}%)" if ci else "")
            sp, ef = r.speedup.get(n), r.efficiency.get(n)
            eff = _pct(ef) + (" (super-linear)" if ef and ef > 1 else "")
            values = [f"{r.metrics[m][n]:.3f}" if n in r.metrics.get(m, {}) else "–" for m in mets]
            out.append("| " + " | ".join([r.benchmark, str(n), r.scaling_mode, str(r.global_batch.get(n, "–")),
                                          r.lr_policy, str(r.train_epochs[n]), f"{r.train_s[n]:.2f} ({r.iqr_s[n]:.2f})",
                                          rel, "–" if sp is None else f"{sp:.2f}x", eff, *values]) + " |")
    out += ["", "## Where a steady step goes", "", "Seconds per steady step of the slowest rank, median over "
            "cells (share of the step in brackets); – where the framework does not expose the part.", "",
            "| benchmark | GPUs | " + " | ".join(p.replace("_", " ") for p in STEP_PARTS) + " |",
            "|" + "---|" * (2 + len(STEP_PARTS))]
    for r in rows:
        for n in sorted(r.step_s):
            vals = [("–" if r.step_s[n][p] is None else f"{r.step_s[n][p]:.3f}"
                     + ("" if r.step_shares[n][p] is None else f" ({100 * r.step_shares[n][p]:.0f}%)"))
                    for p in STEP_PARTS]
            out.append("| " + " | ".join([r.benchmark, str(n), *vals]) + " |")
    out += ["", "## Time to accuracy", ""]
    tta = [r for r in rows if r.time_to_accuracy]
    for r in tta:
        figs = ", ".join(f"{n} GPU{'s' if n != 1 else ''}: " + ("not reached" if v is None else
                                                                 f"{v:.1f} s (training {r.train_s.get(n, 0):.1f} s)")
                         for n, v in sorted(r.time_to_accuracy.items()))
        out.append(f"- {r.benchmark} ({r.tta_target}): {figs}")
    if not tta:
        out.append("- not measured this night (per-epoch evaluation runs in the full profile of benchmarks with a "
                   "time_to_accuracy target)")
    out += ["", "## Accuracy verdicts (vs 1 GPU)", ""]
    lines = [f"- {r.benchmark} {ACCURACY_METRICS[m].display} at {n} GPUs: {v.text()}"
             for r in rows for m, per in r.verdicts.items() for n, v in per.items()]
    out += lines or ["- none (needs the 1-GPU cell and at least one more GPU count)"]
    out += ["", "## Regressions", ""]
    out += [f"- ALERT: {a}" for a in rep.alerts]
    out += [f"- {d}" for d in rep.diagnoses]
    out += [f"- flagged, awaiting confirmation: {a}" for a in rep.flagged]
    out += [f"- cleared by reruns: {a}" for a in rep.cleared]
    out += [f"- {a}" for a in rep.changes]
    if not (rep.alerts or rep.flagged or rep.cleared or rep.changes):
        out.append(f"- none ({rep.series} series judged against their baselines)")
    out += ["", "## Suspect figures", ""]
    sus = [f"- {r.benchmark} at {n} GPU{'s' if n != 1 else ''}: {'; '.join(why)}" for r in rows
           for n, why in sorted(r.suspect.items())]
    out += sus or ["- none (efficiency at most 1, epochs consistent, accuracy near its reference where one is set)"]
    out += ["", "## Table checks (Great Expectations)", ""]
    out += [f"- {x}" for x in rep.table_checks] or ["- all passed"]
    out += ["", "## Cells missing, invalid or refused", ""]
    bad = [f"- {r.benchmark}: {x['label']}: {x['status']} ({x['reason']})" for r in rows for x in r.not_valid]
    bad += [f"- {r.benchmark}: {lab}: refused (no 1-GPU baseline with the same image, config and profile)"
            for r in rows for lab in r.refused]
    out += bad or ["- none"]
    out += ["", "## Manual runs of this night", ""]
    for m in rep.manual_runs:
        out.append(f"- {m['benchmark']} run {m['run_id']}: {m['valid']} of {m['cells']} cells valid")
        out += [f"  - {x['label']}: {x['status']} ({x['reason']})" for x in m["not_valid"]]
    if not rep.manual_runs:
        out.append("- none")
    out += ["", "## Plots", ""] + [f"![{p}]({p})" for p in rep.plots]
    return "\n".join(out) + "\n"


def to_html(md: str, title: str = "scalebench report") -> str:
    """The report's Markdown rendered by markdown-it-py (CommonMark plus tables)."""
    from markdown_it import MarkdownIt

    body = MarkdownIt("commonmark", {"html": False}).enable("table").render(md)
    style = ("body{font-family:sans-serif;margin:1.5em;max-width:1200px}table{border-collapse:collapse;margin:.5em 0}"
             "td,th{border:1px solid #ccc;padding:3px 8px;font-size:14px}img{max-width:48%;margin:4px}")
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
            f"<style>{style}</style></head><body>{body}</body></html>")


def build(cells: list[dict], night: str, opts: Options, runs: list[dict],
          model_size: Callable[[str, str], int | None] = lambda bench, run_id: None) -> Report:
    """Everything the report says about one night, decided once. `cells` are the store's figures
    over the lookback window; `model_size(benchmark, run_id)` gives a run's parameter count."""
    from scalebench.cell.validation import validate_table

    measured = [c for c in cells if c.get("role", "measure") != "rerun"]  # reruns confirm flags, never fill the table
    chosen, source = choose_runs(measured, night)
    rows = [bench_row(b, [c for c in measured if c["benchmark"] == b and c["run_id"] == run], opts, model_size(b, run))
            for b, run in sorted(chosen.items())]
    for r in rows:
        r.suspect = plausibility(r, opts.references.get(r.benchmark, {}).get(r.profile))
    avg = average_row([{n: v for n, v in r.relative_time.items() if n not in r.suspect} for r in rows])
    recorded = {r["benchmark"] for r in runs if r["night"] == night and r["run_type"] == "scheduled"}
    missing = sorted(set(opts.expected) - recorded)
    today = dt.date.fromisoformat(night)
    series = history.build_series(cells, opts.lineage, opts.gates)
    judged = [j for s in series for j in judge(s, opts.gates, opts.shifts)]
    tonight = [j for j in judged if j.night == today]
    rep = Report(
        night=night, generated=dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        complete=not missing, expected=sorted(opts.expected), missing=missing, source=source,
        manual_runs=manual_runs(measured, night), config_errors=dict(opts.config_errors),
        gpu_counts=sorted({n for r in rows for n in r.train_s}) or [1],
        metrics=[m for m in ACCURACY_METRICS if any(m in r.metrics for r in rows)],
        rows=rows, average=avg, conclusions=conclusions(rows, avg, opts),
        alerts=[j.line() for j in tonight if j.alert], flagged=[j.line() for j in tonight if j.flagged and not j.alert],
        cleared=[j.line() for j in tonight if j.confirmed_by_reruns is False],
        changes=[j.line() for j in tonight if j.changed_with], diagnoses=history.diagnose(tonight),
        alert_details=[alert_detail(j) for j in tonight if j.alert],
        judged=judged, series=len(series), table_checks=[],
    )
    rep.table_checks = validate_table(rep)
    return rep


def alert_detail(j: Judgement) -> dict:
    return {"benchmark": j.key.benchmark, "gpus": j.key.gpus, "metric": j.key.metric, "host": j.key.host_class,
            "night": j.night.isoformat(), "value": j.value, "baseline": j.baseline, "change": j.change, "z": j.z,
            "reruns": list(j.reruns), "rerun_p": j.rerun_p,
            "confirmed_by": "reruns" if j.confirmed_by_reruns else "next night", "line": j.line()}


def render(rep: Report, out: Path) -> Path:
    """Write the report's files into `out` (and nothing outside it): report.md, report.html,
    table.json and the plots. Returns the path of report.md."""
    from scalebench.report import plots

    out.mkdir(parents=True, exist_ok=True)
    plots.render_all(rep, out)
    md = markdown(rep)
    (out / REPORT_MD).write_text(md)
    (out / REPORT_HTML).write_text(to_html(md, f"scalebench report {rep.night}"))
    (out / REPORT_TABLE).write_text(json.dumps(rep.to_json(), indent=2, default=str))
    return out / REPORT_MD


def write_index(root: Path) -> Path:
    """reports/index.html: every night kept, newest first, with its status and alerts."""
    nights = []
    for d in sorted((p for p in root.iterdir() if (p / REPORT_TABLE).exists()), reverse=True):
        t = json.loads((d / REPORT_TABLE).read_text())
        nights.append({"night": d.name, "complete": t["complete"], "alerts": len(t["alerts"]),
                       "benchmarks": len(t["rows"])})
    (root / REPORTS_INDEX_JSON).write_text(json.dumps(nights, indent=2))
    items = "".join(f"<tr><td><a href='{n['night']}/{REPORT_HTML}'>{n['night']}</a></td>"
                    f"<td>{'complete' if n['complete'] else 'partial'}</td><td>{n['benchmarks']}</td>"
                    f"<td>{n['alerts']}</td></tr>" for n in nights)
    (root / REPORTS_INDEX_HTML).write_text(
        "<!doctype html><html><head><meta charset='utf-8'><title>scalebench reports</title></head><body>"
        "<h1>scalebench reports</h1><table border='1' cellpadding='4'><thead><tr><th>night</th><th>status</th>"
        f"<th>benchmarks</th><th>alerts</th></tr></thead><tbody>{items}</tbody></table></body></html>")
    return root / REPORTS_INDEX_HTML


def options_from_configs() -> Options:
    from scalebench.analysis.regress import load_shifts
    from scalebench.core.config import PROFILES, SHIFTS_FILE, Configs

    configs = Configs()
    good, broken = configs.load_all()  # one bad config file must not stop the report of the others
    return Options(expected=[b for b, c in good.items() if c.schedule],
                   shifts=load_shifts(configs.config_dir / SHIFTS_FILE),
                   lineage={b: c.images.get("gpu", "") for b, c in good.items()},
                   lr_policies={b: f"{c.lr_policy.rule} {c.lr_policy.base_lr:g}@{c.lr_policy.reference_batch}"
                                for b, c in good.items()},
                   metrics={b: list(c.metrics) for b, c in good.items()},
                   targets={b: (c.time_to_accuracy.metric, c.time_to_accuracy.target) for b, c in good.items()
                            if c.time_to_accuracy},
                   references={b: {p: c.resolved(p).reference_accuracy for p in PROFILES
                                   if c.resolved(p).reference_accuracy} for b, c in good.items()},
                   config_errors={stem: str(err) for stem, err in broken.items()})


def build_report(store, night: str | None = None, opts: Options | None = None) -> Report:
    """The report of one night (default: today, UTC) from the store: figures over the lookback
    window, the night's runs, and each chosen run's model size from its contract."""
    night = night or nights.today()
    opts = opts or options_from_configs()
    since = (dt.date.fromisoformat(night) - dt.timedelta(days=LOOKBACK_NIGHTS)).isoformat()
    cells = store.figures(up_to_night=night, since_night=since)

    def model_size(bench: str, run_id: str) -> int | None:
        key = next((c["key"] for c in cells if c["benchmark"] == bench and c["run_id"] == run_id
                    and c["figure"] is not None), None)
        contract = store.contract(key) if key else None
        return ((contract or {}).get("model") or {}).get("parameters")

    return build(cells, night, opts, store.runs(night), model_size)


def publish(store, night: str | None = None, opts: Options | None = None) -> tuple[Report, Path]:
    """Build one night's report into reports/<night>/ and refresh the index of nights beside it."""
    rep = build_report(store, night, opts)
    path = render(rep, paths.reports_dir() / rep.night)
    write_index(paths.reports_dir())
    return rep, path


def write_report(store, out_dir: Path | str | None = None, night: str | None = None,
                 opts: Options | None = None) -> Path:
    """Build and render one night's report: published by default; with `out_dir`, into that
    folder only (no index). Returns the path of report.md."""
    if out_dir is None:
        return publish(store, night, opts)[1]
    return render(build_report(store, night, opts), Path(out_dir))
