"""One night's report: figures from the store over the lookback window, decided once into a
`Report` (figures, prose, checks), then written by `render`. `build_report` reads the store once
for a night; `publish` writes it into reports/<night>/ with the index; `write_report` does either.

What each figure means (relative time, verdicts, regressions, suspects) is defined once, in
docs/report.md.
"""
from __future__ import annotations

import datetime as dt
import sys
from pathlib import Path
from typing import Callable, Sequence

from scalebench_kit.names import ACCURACY_METRICS

from scalebench.analysis import history
from scalebench.analysis.basis import TRAIN_TIME
from scalebench.analysis.regress import judge
from scalebench.core import nights, paths
from scalebench.core.cells import AB_PREVIOUS, RERUN
from scalebench.core.dag_ids import PROBE_DAG_ID
from scalebench.core.nights import choose_runs
from scalebench.core.records import FigureRow
from scalebench.core.verdicts import ENDED, FIXED, IMPROVEMENT, NO_BETTER, PARTLY_FIXED, VERDICTS
from scalebench.report import predictions
from scalebench.report.checks import plausibility, table_checks
from scalebench.analysis.changes import diff_line, package_diff
from scalebench.analysis.profile_diff import ab_diff
from scalebench.analysis.regress import Change
from scalebench.report.figures import (alert_detail, alert_line, average_row, back_detail, bench_row, changes_tonight,
                                       improved_detail, latest_accuracy_runs, manual_runs, moved_detail,
                                       precision_order)
from scalebench.report.model import LOOKBACK_NIGHTS, Options, Report
from scalebench.report.prose import conclusions
from scalebench.report.render import render, render_plots, write_index

AB_ROLES = (AB_PREVIOUS, RERUN)  # an A/B's cells: the previous image's and tonight's
# A process's first report checks its table in a process of its own (GX loads beside the report);
# one that publishes again (a CLI loop, a DAG test of several nights) loads GX once, here
_FIRST_REPORT = {"apart": True}


def build(cells: list[FigureRow], night: str, opts: Options, runs: list[dict],
          model_size: Callable[[str, str], int | None] = lambda bench, run_id: None,
          packages: Callable[[str], dict | None] = lambda digest: None, moves: Sequence[dict] = (),
          profiles: Callable[[list[str]], dict[str, dict]] = lambda keys: {}, checker=None) -> Report:
    """Everything the report says about one night, decided once. `cells` are the store's figures
    over the lookback window; `model_size(benchmark, run_id)` gives a run's parameter count;
    `packages(digest)` an image's kept package list (what changed between two images); `moves` the
    recorded host assignment changes (those of this night are marked on the history pages);
    `profiles(keys)` the stored op profiles of those cells (an alert's A/B names its operations);
    `checker` a started TableChecker: the GX table checks' rows are sent to it and its answer is
    the caller's to collect (else they run here, before this returns)."""
    # reruns confirm flags and the host probe makes night factors: neither fills the table
    measured = [c for c in cells if c.get("role", "measure") == "measure"]
    chosen, source = choose_runs(measured, night)
    def rows_of(b: str, run: str):
        """One row per precision of the run (a matrix axis: like is compared only with like)."""
        mine = [c for c in measured if c["benchmark"] == b and c["run_id"] == run]
        return [bench_row(b, [c for c in mine if c["precision"] == p], opts, model_size(b, run))
                for p in sorted({c["precision"] for c in mine}, key=precision_order)]

    rows = [r for b, run in sorted(chosen.items()) for r in rows_of(b, run)]
    accuracy_rows = [r for b, run in sorted(latest_accuracy_runs(measured).items()) for r in rows_of(b, run)]
    for r in rows + accuracy_rows:
        r.suspect = plausibility(r, opts.reference(r.benchmark, r.profile))
    avg = average_row([{n: v for n, v in r.relative_time.items() if n not in r.suspect} for r in rows])
    # the study timed the same epochs at every GPU count: only weekly rows with full passes compare with it
    study_rows = [r for r in accuracy_rows if r.key.timing_basis == TRAIN_TIME]
    study_avg = average_row([{n: v for n, v in r.relative_time.items() if n not in r.suspect} for r in study_rows])
    runs = [r for r in runs if r["dag_id"] != PROBE_DAG_ID]  # the probe's run is not its benchmark's
    recorded = {r["benchmark"] for r in runs if r["night"] == night and r["run_type"] == "scheduled"}
    skipped = {r["benchmark"]: r["counts"]["skipped"] for r in runs
               if r["night"] == night and r["run_type"] == "scheduled" and (r["counts"] or {}).get("skipped")}
    expected = opts.scheduled()
    missing = sorted(set(expected) - recorded)
    today = dt.date.fromisoformat(night)
    series = history.build_series(cells, opts.lineage(), opts.gates)
    judged = [j for s in series for j in judge(s, opts.gates, opts.shifts, opts.config_alerts(s.key.benchmark),
                                               opts.invalid.get((s.key.benchmark, s.key.gpus, s.key.precision,
                                                                 s.key.metric), ()))]
    tonight = [j for j in judged if j.night == today]

    diff_of: dict[tuple, str] = {}  # per (digest before, digest after, config changed): many figures share one

    def what_changed(change: Change | None) -> str | None:
        if change is None or change.kind != "image":
            return None
        key = (change.before.get("image_digest"), change.after.get("image_digest"),
               change.before.get("config_sha") != change.after.get("config_sha"))
        if key not in diff_of:
            diff_of[key] = diff_line(package_diff(*(packages(d) if d else None for d in key[:2])), key[2])
        return diff_of[key]
    def ab_profile(j) -> dict | None:
        """Where the alert's A/B's step time went (its profiled pair), None without an A/B profile."""
        if j.ab is None:
            return None
        mine = [c for c in cells if c["night"] == night and c["benchmark"] == j.key.benchmark
                and c["gpus"] == j.key.gpus and c["precision"] == j.key.precision and c.get("role") in AB_ROLES]
        return ab_diff(mine, profiles([c["key"] for c in mine])) if mine else None

    profiled = {id(j): ab_profile(j) for j in tonight if j.alert}
    rep = Report(
        night=night, generated=dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        complete=not missing, expected=expected, missing=missing, source=source,
        manual_runs=manual_runs(measured, night), config_errors=dict(opts.config_errors),
        gpu_counts=sorted({n for r in rows for n in r.train_s}) or [1],
        metrics=[m for m in ACCURACY_METRICS if any(m in r.metrics for r in rows)],
        rows=rows, average=avg, skipped=skipped, accuracy_rows=accuracy_rows,
        accuracy_metrics=[m for m in ACCURACY_METRICS if any(m in r.metrics for r in accuracy_rows)],
        conclusions=conclusions(rows, avg, opts, accuracy_rows, study_rows, study_avg),
        study_rows=study_rows, study_average=study_avg,
        alerts=[alert_line(j, what_changed(j.blamed), profiled[id(j)]) for j in tonight if j.alert],
        flagged=[j.line() for j in tonight if j.flagged and not j.alert],
        cleared=[j.line() for j in tonight if j.confirmed_by_reruns is False],
        fixed=[{"verdict": j.verdict, "line": j.line()} for j in tonight  # each said once: the night it is decided
               if j.verdict in (FIXED, ENDED, PARTLY_FIXED, NO_BETTER)],
        fixed_details=[back_detail(j) for j in tonight if j.kind and VERDICTS[j.kind].ends]
        + [improved_detail(j) for j in tonight if j.kind == IMPROVEMENT],
        moved_details=[moved_detail(j) for j in tonight if j.flagged and j.image  # alerted into another group too
                       and not (j.alert and j.blamed is not None and j.blamed.new_image == j.image)],
        changes=[j.line() for j in tonight if j.changed_with], diagnoses=history.diagnose(tonight),
        alert_details=[alert_detail(j, what_changed(j.blamed), profiled[id(j)]) for j in tonight if j.alert],
        changes_tonight=changes_tonight(tonight, what_changed),
        judged=judged, series=len(series), table_checks=[],
        moves=[m for m in moves if nights.night_at(dt.datetime.fromisoformat(m["at"])) == night],
    )
    if checker is None:
        rep.table_checks = table_checks(rep)
    else:  # the rows go to the checking process now; publish collects its answer after the plots
        from scalebench.cell.validation import table_rows

        checker.send(table_rows(rep))
    return rep


def options_from_configs() -> Options:
    """The loaded configs (one bad file must not stop the report of the others) and the shifts."""
    from scalebench.analysis.regress import gates_for, load_shifts
    from scalebench.core.config import SHIFTS_FILE, Configs

    configs = Configs()
    good, broken = configs.load_all()
    return Options(benchmarks=good, shifts=load_shifts(configs.config_dir / SHIFTS_FILE), gates=gates_for(configs.fleet),
                   config_errors={stem: str(err) for stem, err in broken.items()},
                   links={h.name: h.link_gbps for h in configs.fleet.hosts if h.link_gbps})


def with_alert_groups(opts: Options, store) -> Options:
    """The options with what closed alert groups do to the baselines (accepted: a shift; invalid:
    nights never flagged)."""
    from dataclasses import replace

    from scalebench.analysis.alert_groups import baseline_effects
    from scalebench.store.alert_groups import AlertGroups

    groups = AlertGroups(store)
    shifts, invalid = baseline_effects(groups.closed_as("accepted"), groups.closed_as("invalid"))
    return replace(opts, shifts=[*opts.shifts, *shifts], invalid={**opts.invalid, **invalid})


def build_report(store, night: str | None = None, opts: Options | None = None,
                 cells: list[FigureRow] | None = None, checker=None, fit: predictions.Fits | None = None) -> Report:
    """The report of one night (default: today, UTC) from the store: figures over the lookback
    window, the night's runs, and each chosen run's model size from its contract."""
    night = night or nights.today()
    opts = with_alert_groups(opts or options_from_configs(), store)
    since = (dt.date.fromisoformat(night) - dt.timedelta(days=LOOKBACK_NIGHTS)).isoformat()
    if cells is None:  # publish reads them once for the predictions and the report
        cells = store.figures(up_to_night=night, since_night=since)

    def model_size(bench: str, run_id: str) -> int | None:
        key = next((c["key"] for c in cells if c["benchmark"] == bench and c["run_id"] == run_id
                    and c["figure"] is not None), None)
        contract = store.contract(key) if key else None
        return ((contract or {}).get("model") or {}).get("parameters")

    def packages(digest: str) -> dict | None:
        kept = store.image_packages(digest)
        return kept["packages"] if kept else None

    def profiles(keys: list[str]) -> dict[str, dict]:
        from scalebench.store.profiles import cells_profiles

        return cells_profiles(store.engine, keys)

    rep = build(cells, night, opts, store.runs(night), model_size, packages, store.assignment_moves(), profiles,
                checker)
    rep.predictions = predictions.section(store, fit or predictions.fits(store, night, cells, opts.links))
    rep.undelivered = undelivered_lines(store)
    return rep


def undelivered_lines(store) -> list[str]:
    """Each alert channel whose latest message of a group failed (retried every night until it takes it)."""
    from scalebench.store.alert_groups import AlertGroups

    return [f"alert channel {u['channel']}: group #{u['group_id']}'s {u['reason']} message not delivered since "
            f"{u['since']} ({u['error']}); retried each night" for u in AlertGroups(store).undelivered()]


def publish(store, night: str | None = None, opts: Options | None = None) -> tuple[Report, Path]:
    """Build one night's report into reports/<night>/ and refresh the index of nights beside it."""
    from scalebench.report.checker import TableChecker
    from scalebench.report.summary import marks_of

    # GX loads on another core while the report reads and decides (_FIRST_REPORT)
    apart = _FIRST_REPORT["apart"] and "great_expectations" not in sys.modules
    _FIRST_REPORT["apart"] = False
    checker = TableChecker().start() if apart else None
    try:
        night = night or nights.today()
        opts = opts or options_from_configs()
        # tonight's predictions are frozen from the nights before it, then tonight's cells judge them
        since = (dt.date.fromisoformat(night) - dt.timedelta(days=LOOKBACK_NIGHTS)).isoformat()
        cells = store.figures(up_to_night=night, since_night=since)
        fit = predictions.fits(store, night, cells, opts.links)
        predictions.freeze(store, fit)
        predictions.judge(store, fit)
        rep = build_report(store, night, opts, cells, checker, fit)
        out = paths.reports_dir() / rep.night
        render_plots(rep, out)  # drawn while the other process checks the table
        if checker is not None:
            rep.table_checks = checker.result()
    finally:
        if checker is not None:
            checker.close()
    store.save_marks(rep.night, marks_of(rep))  # the history pages mark what this report judged
    path = render(rep, out, plots=False)
    write_index(paths.reports_dir(), rep.night)
    return rep, path


def write_report(store, out_dir: Path | str | None = None, night: str | None = None,
                 opts: Options | None = None) -> Path:
    """Build and render one night's report: published by default; with `out_dir`, into that
    folder only (no index). Returns the path of report.md."""
    if out_dir is None:
        return publish(store, night, opts)[1]
    return render(build_report(store, night, opts), Path(out_dir))
