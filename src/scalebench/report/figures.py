"""The report's figures, decided once per night: which runs feed the table, each row's times,
ratios, intervals, verdicts and step breakdown, the average row, and each alert as data."""
from __future__ import annotations

import statistics
from typing import Callable

from scalebench_kit.names import ACCURACY_METRICS, PRECISIONS

from scalebench.analysis.profile_diff import ab_words
from scalebench.analysis.regress import Change, Judgement
from scalebench.core.alert_rules import group_key
from scalebench.core.cells import ACCURACY
from scalebench.core.records import FigureRow, RowKey, figure_of
from scalebench.core.verdicts import SEVERITY
from scalebench.report.model import STEP_PARTS, TIME_PARTS, Options, Row


def precision_order(p: str) -> tuple[int, str]:
    """fp32, tf32, bf16, fp16, then anything older ("framework default")."""
    return (PRECISIONS.index(p) if p in PRECISIONS else len(PRECISIONS), p)


def _med(xs):
    return statistics.median(xs) if xs else None


def latest_accuracy_runs(cells: list[FigureRow]) -> dict[str, str]:
    """Per benchmark, its latest weekly accuracy run among `cells` (the lookback window)."""
    latest: dict[str, tuple[str, str]] = {}
    for c in cells:  # recording order within a night: the last run of the latest night wins
        if c["run_type"] == ACCURACY and c["night"] >= latest.get(c["benchmark"], ("", ""))[0]:
            latest[c["benchmark"]] = (c["night"], c["run_id"])
    return {b: run for b, (_, run) in latest.items()}


def manual_runs(cells: list[FigureRow], night: str) -> list[dict]:
    """Every manual run of the night with its counts and the cells that have no valid result."""
    runs: dict[tuple[str, str], dict] = {}
    for c in cells:
        if c["night"] != night or c["run_type"] in ("scheduled", ACCURACY):
            continue
        r = runs.setdefault((c["benchmark"], c["run_id"]), {"benchmark": c["benchmark"], "run_id": c["run_id"],
                                                            "cells": 0, "valid": 0, "not_valid": []})
        r["cells"] += 1
        if c["figure"] is not None:
            r["valid"] += 1
        else:
            r["not_valid"].append({"label": c["label"], "status": c["status"], "reason": c["reason"] or "never started"})
    return list(runs.values())


def _baseline_ok(cell: FigureRow, ones: list[FigureRow]) -> bool:
    f = figure_of(cell)
    return any(figure_of(o)["image_digest"] == f["image_digest"] and figure_of(o)["config_sha"] == f["config_sha"]
               and o["profile"] == cell["profile"] for o in ones)


def bench_row(bench: str, mine: list[FigureRow], opts: Options, parameters: int | None = None) -> Row:
    from scalebench.analysis.basis import basis_of, time_value
    from scalebench.analysis.stats import bootstrap_mean_ratio_ci, epochs_to_target, equivalence, iqr

    valid = [c for c in mine if c["figure"] is not None]
    ones = [c for c in valid if c["gpus"] == 1]
    refused = [c for c in valid if c["gpus"] > 1 and not _baseline_ok(c, ones)]
    usable = [c for c in valid if c not in refused]
    basis, mixed = basis_of(usable)
    times: dict[tuple[int, int], list[float]] = {}
    seconds: dict[tuple[int, int], list[float]] = {}
    for c in usable:
        seconds.setdefault((c["epochs"], c["gpus"]), []).append(figure_of(c)["train_s"])
        if basis:
            times.setdefault((c["epochs"], c["gpus"]), []).append(time_value(c, basis))
    gpus = sorted({g for _, g in seconds})
    epochs = sorted({e for e, _ in seconds})
    rel, ci = {}, {}
    for n in gpus if basis else []:
        pairs = [(times[(e, 1)], times[(e, n)]) for e in epochs if (e, 1) in times and (e, n) in times]
        if not pairs:
            continue
        rel[n] = statistics.fmean(statistics.median(tn) / statistics.median(t1) for t1, tn in pairs)
        interval = bootstrap_mean_ratio_ci(pairs, n_boot=opts.n_boot) if n > 1 else None
        if interval:
            ci[n] = interval
    train_epochs = {n: max(e for e, g in seconds if g == n) for n in gpus}
    last = max(epochs) if epochs else None
    names = opts.metric_names(bench) or [m for m in ACCURACY_METRICS
                                        if any(m in (figure_of(c)["metrics"] or {}) for c in usable)]
    timings = {n: [figure_of(c)["timing"] or {} for c in usable if c["gpus"] == n] for n in gpus}
    target = opts.target(bench)
    steps = {n: step_figures(ts) for n, ts in timings.items()}  # each decided once
    epochs_seen, samples_seen, epoch_mismatch = epoch_check(timings)
    firsts = ({n: [first_reaching(t, *target) for t in ts if t.get("evaluations")] for n, ts in timings.items()}
              if target else {})  # per GPU count, each evaluated cell's first evaluation at the target
    reached: dict[int, list[int | None]] = {n: [ev["epoch"] if ev else None for ev in evs] for n, evs in firsts.items()}
    values = {m: {n: [(figure_of(c)["metrics"] or {})[m] for c in usable if c["gpus"] == n and c["epochs"] == last
                      and m in (figure_of(c)["metrics"] or {})] for n in gpus} for m in names}
    return Row(
        key=RowKey(bench, mine[0]["profile"], mine[0]["host"], mine[0]["precision"], timing_basis=basis or "mixed"),
        benchmark=bench, run_id=mine[0]["run_id"], run_type=mine[0]["run_type"], profile=mine[0]["profile"],
        scaling_mode=mine[0]["scaling_mode"], lr_policy=opts.lr_policy(bench), parameters=parameters,
        global_batch={c["gpus"]: c["global_batch"] for c in mine}, train_epochs=train_epochs,
        train_s={n: statistics.median(seconds[(e, n)]) for n, e in train_epochs.items()},
        iqr_s={n: iqr(seconds[(e, n)]) for n, e in train_epochs.items()},
        images_per_s={n: statistics.median(figure_of(c)["images_per_s"] for c in usable if c["gpus"] == n)
                      for n in gpus},
        basis_refusal=mixed,
        relative_time=rel, relative_time_ci=ci,
        speedup={n: 1 / r for n, r in rel.items()}, efficiency={n: 1 / r / n for n, r in rel.items()},
        metrics={m: {n: statistics.median(v) for n, v in per.items() if v} for m, per in values.items()},
        metric_iqr={m: {n: iqr(v) for n, v in per.items() if v} for m, per in values.items()},
        verdicts={m: {n: equivalence(v.get(1, []), v[n], opts.margin) for n in gpus if n > 1 and v.get(n)}
                  for m, v in values.items()},
        breakdown={n: {k: _med([t[k] for t in ts if t.get(k) is not None]) for k in TIME_PARTS}
                   for n, ts in timings.items()},
        step_s={n: f[0] for n, f in steps.items()}, step_shares={n: f[1] for n, f in steps.items()},
        steps_per_epoch=epochs_seen, samples_per_epoch=samples_seen, epoch_mismatch=epoch_mismatch,
        tta_target=f"{ACCURACY_METRICS[target[0]].display} >= {target[1]:g}" if target else None,
        time_to_accuracy={n: _med([ev["train_s"] for ev in evs if ev]) for n, evs in firsts.items() if evs},
        convergence={n: epochs_to_target(reached[1], got) for n, got in reached.items()
                     if n > 1 and got and reached.get(1)},
        cells=len(mine), valid=len(valid),
        not_valid=[{"label": c["label"], "status": c["status"], "reason": c["reason"] or "never started"}
                   for c in mine if c["figure"] is None],
        refused=[c["label"] for c in refused],
        retried=[{"label": c["label"], "figure": figure_of(c)["attempt"] if c["figure"] else None,
                  "others": c["others"]} for c in mine if c.get("others")],
        teardown=[{"label": c["label"], "message": figure_of(c)["teardown"]} for c in valid if figure_of(c).get("teardown")],
    )


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


def epoch_check(timings: dict[int, list[dict]]) -> tuple[dict[int, int], dict[int, int], list[int]]:
    """(steps per epoch, samples an epoch covered, the GPU counts whose epoch covers a different
    part of the split than at 1 GPU, by more than 1 % of the split). The kit's plan records the
    images an epoch covered (the whole split; repeats are not coverage). A cell from before it
    dropped its remainder and covered floor(N / batch) x batch samples, fewer at a larger global
    batch (UNet on VOC2007's 209 images: 180 at 1-3 GPUs, 120 at 4); a step-based trainer whose
    'epoch' stays fixed covers more. Capped epochs are timed by throughput and skipped."""
    plans = {n: [t["epoch"] for t in ts if t.get("epoch")] for n, ts in timings.items()}
    steps = {n: int(statistics.median(p["steps_per_epoch"] for p in ps)) for n, ps in plans.items() if ps}
    samples = {n: int(statistics.median(p.get("covered_images", p["steps_per_epoch"] * p["global_batch"])
                                        for p in ps)) for n, ps in plans.items() if ps}
    if 1 not in steps or plans[1][0].get("capped_by_max_steps_per_epoch"):
        return steps, samples, []
    split = plans[1][0].get("train_images") or samples[1]
    bad = [n for n, ps in plans.items() if n != 1 and ps and not ps[0].get("capped_by_max_steps_per_epoch")
           and abs(samples[n] - samples[1]) > 0.01 * split]
    return steps, samples, sorted(bad)


def first_reaching(timing: dict, metric: str, target: float) -> dict | None:
    """The first per-epoch evaluation with metric >= target ({epoch, train_s, metrics}); None if none did."""
    return next((ev for ev in timing.get("evaluations") or [] if (ev.get("metrics") or {}).get(metric, -1) >= target),
                None)


def average_row(relative_times: list[dict[int, float]]) -> dict[int, float]:
    """Mean relative time per GPU count over the benchmarks that have it."""
    counts = sorted({n for rt in relative_times for n in rt})
    return {n: statistics.fmean([rt[n] for rt in relative_times if n in rt]) for n in counts}


def alert_detail(j: Judgement, what_changed: str | None = None, profile_diff: dict | None = None) -> dict:
    """An alert as data. `what_changed`: the package and config diff of its suspect change;
    `profile_diff`: where its A/B's step time went (analysis.profile_diff.ab_diff)."""
    confirmed_by = "A/B" if j.ab is not None else "reruns" if j.confirmed_by_reruns else "next night"
    doc = {"benchmark": j.key.benchmark, "gpus": j.key.gpus, "precision": j.key.precision, "metric": j.key.metric,
           "host": j.key.host_class,
           "night": j.night.isoformat(), "value": j.value, "baseline": j.baseline, "change": j.worse_by, "z": j.z,
           "reruns": list(j.reruns), "rerun_p": j.rerun_p, "confirmed_by": confirmed_by,
           "line": alert_line(j, what_changed, profile_diff)}
    if profile_diff:
        doc["profile_diff"] = profile_diff
    if j.blamed is not None:  # the regression's change, which names its alert group
        doc["suspect"] = {"kind": j.blamed.kind, "text": j.blamed.text, "previous_image": j.blamed.previous_image,
                          "new_image": j.blamed.new_image, "what_changed": what_changed}
    if j.ab is not None:
        doc["ab"] = {"verdict": j.ab.verdict, "previous": list(j.ab.a), "new": list(j.ab.b), "p": j.ab.p(True),
                     "line": j.ab.line()}
    return doc


def alert_line(j: Judgement, what_changed: str | None = None, profile_diff: dict | None = None) -> str:
    return (j.line() + (f"; what changed: {what_changed}" if what_changed and j.blamed is not None else "")
            + ab_words(profile_diff))


def blamed_doc(j: Judgement) -> dict | None:
    return {"kind": j.blamed.kind, "new_image": j.blamed.new_image, "text": j.blamed.text} if j.blamed else None


def back_detail(j: Judgement) -> dict:
    """A figure back at the level before its regression (fixed, or ended by itself), as data: the
    alert group it belongs to (by the regression's change) and the figure."""
    return {"key": group_key(blamed_doc(j), j.key.benchmark), "benchmark": j.key.benchmark, "gpus": j.key.gpus,
            "precision": j.key.precision, "metric": j.key.metric, "verdict": j.verdict, "line": j.line()}


def moved_detail(j: Judgement) -> dict:
    """A figure flagged tonight, as data: it joins the open alert group of the image it ran on, if
    that group holds its benchmark (the figures a change moved, not only those whose alert blamed it)."""
    return {"key": group_key({"kind": "image", "new_image": j.image}, j.key.benchmark), "benchmark": j.key.benchmark,
            "gpus": j.key.gpus, "precision": j.key.precision, "metric": j.key.metric, "change": j.worse_by,
            "line": j.line()}


def improved_detail(j: Judgement) -> dict:
    """A figure judged better by a change, as back data with no group key: it is back in whichever
    open group holds it (a figure that joined a group flagged, whose baseline took the slow level)."""
    return {**back_detail(j), "key": None}


# a change's verdict: its most severe figure's (core.verdicts orders them)
NOT_JUDGED = "not judged (a short baseline and no decided A/B)"


def changes_tonight(tonight: list[Judgement], what_changed: Callable[[Change], str | None]) -> list[dict]:
    """One verdict per change under test that appeared or was decided tonight (benchmark, what
    changed), from its figures' verdicts, with the numbers it rests on and what changed."""
    by_change: dict[tuple[str, str], list[Judgement]] = {}
    for j in tonight:
        if j.suspect is not None and j.news:
            by_change.setdefault((j.key.benchmark, j.suspect.text), []).append(j)
    out = []
    for (bench, text), js in sorted(by_change.items()):
        decided = [j.verdict for j in js if j.verdict is not None]
        # a change on a short baseline whose A/B did not decide (or did not run): nothing is judged
        verdict = min(decided, key=SEVERITY.index) if decided else NOT_JUDGED
        moved = sorted((j for j in js if j.verdict == (verdict if decided else None)),
                       key=lambda j: (j.key.metric, j.key.gpus, j.key.precision))
        numbers = [(f"{j.head} {j.value:.4g} vs {j.baseline:.4g} ({-(j.worse_by or 0.0) * 100:+.1f}%)"
                    + (f"; A/B: {j.ab.line()}" if j.ab is not None else "") + (f"; {j.note}" if j.note else ""))
                   if j.baseline is not None else j.line() for j in moved]
        suspect = js[0].suspect
        assert suspect is not None  # grouped above by their suspect
        out.append({"benchmark": bench, "kind": suspect.kind, "change": text, "verdict": verdict,
                    "alerted": any(j.alert for j in js), "figures": len(js), "numbers": numbers,
                    "what_changed": what_changed(suspect)})
    return out
