"""The report: the study's table regenerated from stored cells (Markdown, HTML, one plot).

Definitions (DESIGN.md): relative time r(n) = T(n)/T(1), speedup S(n) = T(1)/T(n),
efficiency E(n) = S(n)/n. T is steady training time (warm-up, set-up and eval excluded), the
median over repeats; r(n) is taken per epoch count and averaged over epoch counts.
"""
from __future__ import annotations

import datetime as dt
import html
import statistics
from pathlib import Path

from . import paths

METRICS = ("precision", "recall", "iou")


def latest_runs(cells: list[dict]) -> dict[str, str]:
    """The newest run with at least one valid cell, per benchmark."""
    newest: dict[str, tuple[str, str]] = {}
    for c in cells:
        if c["figure"] is None:
            continue
        stamp = c["created_at"]
        if c["benchmark"] not in newest or stamp > newest[c["benchmark"]][0]:
            newest[c["benchmark"]] = (stamp, c["run_id"])
    return {b: run for b, (_, run) in newest.items()}


def scaling_rows(cells: list[dict]) -> list[dict]:
    """One row per benchmark (its latest run): relative time, speedup, efficiency, metrics per GPU count."""
    runs = latest_runs(cells)
    rows = []
    for bench, run_id in sorted(runs.items()):
        mine = [c for c in cells if c["benchmark"] == bench and c["run_id"] == run_id]
        valid = [c for c in mine if c["figure"] is not None]
        times: dict[tuple[int, int], list[float]] = {}
        for c in valid:
            times.setdefault((c["epochs"], c["gpus"]), []).append(c["figure"]["train_s"])
        med = {k: statistics.median(v) for k, v in times.items()}
        gpus = sorted({g for _, g in med})
        rel: dict[int, float] = {}
        for n in gpus:
            ratios = [med[(e, n)] / med[(e, 1)] for (e, g) in med if g == n and (e, 1) in med]
            if ratios:
                rel[n] = statistics.fmean(ratios)
        metrics: dict[int, dict[str, float]] = {}
        for n in gpus:
            for m in METRICS:
                vals = [c["figure"]["metrics"][m] for c in valid if c["gpus"] == n and m in (c["figure"]["metrics"] or {})]
                if vals:
                    metrics.setdefault(n, {})[m] = statistics.median(vals)
        rows.append({
            "benchmark": bench, "run_id": run_id, "profile": mine[0]["profile"], "scaling_mode": mine[0]["scaling_mode"],
            "global_batch": {c["gpus"]: c["global_batch"] for c in mine},
            "train_s": {n: statistics.median([v for (e, g), v in med.items() if g == n]) for n in gpus},
            "relative_time": rel,
            "speedup": {n: 1 / r for n, r in rel.items()},
            "efficiency": {n: 1 / r / n for n, r in rel.items()},
            "metrics": metrics,
            "cells": len(mine), "valid": len(valid),
            "not_valid": [{"label": c["label"], "status": c["status"],
                           "reason": (c["attempts"][-1]["reason"] if c["attempts"] else "no attempt")}
                          for c in mine if c["figure"] is None],
        })
    return rows


def average_row(rows: list[dict]) -> dict[int, float]:
    """Mean relative time per GPU count over the benchmarks that have it."""
    counts = sorted({n for r in rows for n in r["relative_time"]})
    return {n: statistics.fmean([r["relative_time"][n] for r in rows if n in r["relative_time"]]) for n in counts}


def _pct(v: float | None) -> str:
    return "–" if v is None else f"{100 * v:.1f}%"


def markdown(rows: list[dict], generated: str) -> str:
    counts = sorted({n for r in rows for n in r["relative_time"]}) or [1]
    out = [f"# scalebench report\n", f"Generated {generated}. Training time relative to 1 GPU (median over repeats; "
           "speedup S = T1/Tn, efficiency E = S/n).\n"]
    head = ["benchmark", "profile", "scaling"] + [f"{n} GPU" for n in counts]
    out.append("| " + " | ".join(head) + " |")
    out.append("|" + "---|" * len(head))
    for r in rows:
        out.append("| " + " | ".join([r["benchmark"], r["profile"], r["scaling_mode"]] +
                                     [_pct(r["relative_time"].get(n)) for n in counts]) + " |")
    avg = average_row(rows)
    partial = any(len(r["relative_time"]) < len(counts) for r in rows)
    out.append("| " + " | ".join(["average" + (" (incomplete rows)" if partial else ""), "", ""] +
                                 [_pct(avg.get(n)) for n in counts]) + " |")
    out.append("\n## Speedup, efficiency and accuracy per GPU count\n")
    out.append("| benchmark | GPUs | global batch | train s | speedup | efficiency | precision | recall | IoU |")
    out.append("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        for n in sorted(r["train_s"]):
            m = r["metrics"].get(n, {})
            fmt = lambda k: f"{m[k]:.3f}" if k in m else "–"  # noqa: E731
            sp, ef = r["speedup"].get(n), r["efficiency"].get(n)
            out.append(f"| {r['benchmark']} | {n} | {r['global_batch'].get(n, '–')} | {r['train_s'][n]:.2f} | "
                       f"{'–' if sp is None else f'{sp:.2f}x'} | {_pct(ef)} | {fmt('precision')} | {fmt('recall')} | {fmt('iou')} |")
    bad = [(r["benchmark"], x) for r in rows for x in r["not_valid"]]
    out.append("\n## Cells missing or invalid\n")
    out.extend([f"- {b}: {x['label']}: {x['status']} ({x['reason']})" for b, x in bad] or ["None."])
    out.append("\n![speedup](speedup.png)\n")
    return "\n".join(out) + "\n"


def plot_speedup(rows: list[dict], path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4), dpi=100)
    top = max([max(r["speedup"], default=1) for r in rows] + [2])
    ax.plot([1, top], [1, top], "k--", linewidth=1, label="ideal")
    for r in rows:
        ns = sorted(r["speedup"])
        ax.plot(ns, [r["speedup"][n] for n in ns], marker="o", label=r["benchmark"])
    ax.set_xlabel("GPUs (devices)")
    ax.set_ylabel("speedup T1/Tn")
    ax.set_title("Training speedup vs GPUs")
    ax.set_xticks(range(1, top + 1))
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path


def to_html(md: str) -> str:
    """A dependency-free rendering of the Markdown tables, lists and image above."""
    lines, body, table = md.splitlines(), [], []

    def flush():
        if table:
            rows = [[html.escape(c.strip()) for c in t.strip("|").split("|")] for t in table if not set(t) <= set("|-")]
            body.append("<table><thead><tr>" + "".join(f"<th>{c}</th>" for c in rows[0]) + "</tr></thead><tbody>" +
                        "".join("<tr>" + "".join(f"<td>{c}</td>" for c in r) + "</tr>" for r in rows[1:]) + "</tbody></table>")
            table.clear()

    for line in lines:
        if line.startswith("|"):
            table.append(line)
            continue
        flush()
        if line.startswith("## "):
            body.append(f"<h2>{html.escape(line[3:])}</h2>")
        elif line.startswith("# "):
            body.append(f"<h1>{html.escape(line[2:])}</h1>")
        elif line.startswith("- "):
            body.append(f"<li>{html.escape(line[2:])}</li>")
        elif line.startswith("!["):
            body.append(f'<img src="{html.escape(line[line.index("(") + 1:-1])}" alt="plot">')
        elif line.strip():
            body.append(f"<p>{html.escape(line)}</p>")
    flush()
    style = "body{font-family:sans-serif;margin:2em}table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:4px 8px}"
    return f"<!doctype html><html><head><meta charset='utf-8'><title>scalebench report</title><style>{style}</style></head><body>{''.join(body)}</body></html>"


def write_report(cells: list[dict], out_dir: Path | str | None = None, night: str | None = None) -> Path:
    """Write report.md, report.html, speedup.png and table.json; returns the Markdown path."""
    import json

    now = dt.datetime.now(dt.timezone.utc)
    night = night or now.date().isoformat()
    out = Path(out_dir or paths.reports_dir() / night)
    out.mkdir(parents=True, exist_ok=True)
    rows = scaling_rows(cells)
    md = markdown(rows, now.isoformat(timespec="seconds"))
    (out / "report.md").write_text(md)
    (out / "report.html").write_text(to_html(md))
    plot_speedup(rows, out / "speedup.png")
    (out / "table.json").write_text(json.dumps({"rows": rows, "average": average_row(rows)}, indent=2, default=str))
    return out / "report.md"
