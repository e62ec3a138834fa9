"""Night summaries: what the history pages plot, one row per (benchmark, night, GPU count,
precision), written when a run is recorded. Each row is a projection of the report's own row
(`figures.bench_row` over the run `nights.choose_runs` picks), so a history point and that
night's report never disagree; the night's report then adds its marks (alerts, baseline
restarts, cleared flags) to the rows it judged.
"""
from __future__ import annotations

import datetime as dt

from scalebench.core.verdicts import VERDICTS
from scalebench.core.figures import HISTORY_FIGURES
from scalebench.core.records import FigureRow, Mark, NightSummary
from scalebench.core.nights import choose_runs
from scalebench.report.figures import bench_row, precision_order
from scalebench.report.model import Options, Report

MARK_KINDS = ("alert", "flagged", "cleared", "restart", "change", "move")  # what a history point can be marked with


def summarize(cells: list[FigureRow], night: str, opts: Options | None = None) -> list[NightSummary]:
    """The summaries of one benchmark's night from its cells (every run of that night)."""
    opts = opts or Options()
    measured = [c for c in cells if c["night"] == night and c.get("role", "measure") == "measure"]
    reruns = [c for c in cells if c["night"] == night and c.get("role") in ("rerun", "ab_previous")]
    out: list[NightSummary] = []
    for bench, run in sorted(choose_runs(measured, night)[0].items()):
        mine = [c for c in measured if c["benchmark"] == bench and c["run_id"] == run]
        for precision in sorted({c["precision"] for c in mine}, key=precision_order):
            cells_p = [c for c in mine if c["precision"] == precision]
            row = bench_row(bench, cells_p, opts)
            for n in sorted({c["gpus"] for c in cells_p}):
                at_n = [c for c in cells_p if c["gpus"] == n]
                shown = next((c["figure"] for c in at_n if c["figure"]), None)
                ci = row.relative_time_ci.get(n)
                out.append({
                    "benchmark": bench, "night": night, "gpus": n, "precision": precision, "dag_id": at_n[0]["dag_id"],
                    "run_id": run, "run_type": at_n[0]["run_type"], "profile": at_n[0]["profile"],
                    "host": at_n[0]["host"], "cells": len(at_n), "valid": sum(c["figure"] is not None for c in at_n),
                    "retried": sum(bool(c.get("others")) for c in at_n),
                    "reruns": sum(c["gpus"] == n and c["precision"] == precision and c["benchmark"] == bench
                                  for c in reruns),
                    "basis": row.key.timing_basis if row.key.timing_basis != "mixed" else None,
                    "figures": {f.name: row.figure(f, n) for f in HISTORY_FIGURES},
                    "relative_time_ci": list(ci) if ci else None,
                    "metrics": {m: per[n] for m, per in row.metrics.items() if n in per} or None,
                    "step_shares": {k: v for k, v in (row.step_shares.get(n) or {}).items() if v is not None} or None,
                    "image_digest": shown["image_digest"] if shown else None,
                    "fingerprint": shown["fingerprint"] if shown else None,
                })
    return out


def summarize_night(store, benchmark: str, night: str) -> int:
    """Write one benchmark's summaries of one night from the store's cells; returns the rows."""
    rows = summarize(store.figures(up_to_night=night, since_night=night, benchmark=benchmark), night)
    store.save_summaries(benchmark, night, rows)
    return len(rows)


def marks_of(rep: Report) -> dict[tuple[str, int, str], list[Mark]]:
    """The night's judgements as marks on its summaries: (benchmark, gpus, precision) -> [{kind, text}]."""
    night = dt.date.fromisoformat(rep.night)
    out: dict[tuple[str, int, str], list[Mark]] = {}
    for j in rep.judged:
        if j.night != night:
            continue
        kind = ("restart" if j.changed_with else "alert" if j.alert else "fixed" if j.kind and VERDICTS[j.kind].ends
                else "cleared" if j.confirmed_by_reruns is False else "flagged" if j.flagged
                else "change" if j.news else None)
        if kind:
            out.setdefault((j.key.benchmark, j.key.gpus, j.key.precision), []).append({"kind": kind, "text": j.line()})
    for m in rep.moves:  # a benchmark moved to another host: its series start there, the first night marked
        if not m["from"]:
            continue  # a first assignment starts the series; nothing moved
        text = f"moved from {m['from']} to {m['to']} ({m['reason']}): its series start on {m['to']}"
        for r in rep.rows:
            if r.benchmark == m["benchmark"]:
                for n in r.train_s:
                    out.setdefault((r.benchmark, n, r.key.precision), []).append({"kind": "move", "text": text})
    return out
