"""The HTML of the browsing pages (history, night, run, compare), from data decided elsewhere:
night summaries, stored cells, comparisons. Rendering only; the routes are in `webapp`.

Pages are shown inside the Airflow UI (a tab in an iframe), so a link into Airflow's own pages
(a task's log) opens in the top window (pages.js hands it to the UI's router). Links between our
pages are relative to the plugin's mount (`base`), links into Airflow to its UI root (`ui`).
"""
from __future__ import annotations

import json
from html import escape
from urllib.parse import quote, urlencode

from scalebench.report.exports import result_row

STYLE = """body{font:14px system-ui,sans-serif;margin:16px 24px;color:#1d2430}h1{font-size:20px}h2{font-size:16px;margin-top:28px}
table{border-collapse:collapse;margin:8px 0}td,th{border:1px solid #d5d9e0;padding:3px 8px;text-align:left;vertical-align:top}
th{background:#f2f4f7}td.n{text-align:right;font-variant-numeric:tabular-nums}.failed td{background:#fff1f0}
nav a{margin-right:14px}.muted{color:#667085}.chart{margin:6px 0 18px}.tip{min-height:3.2em;font-size:13px;white-space:pre-line;
background:#f8f9fb;border:1px solid #e4e7ec;padding:4px 8px;max-width:1100px}.marks li{margin:2px 0}
.k-alert{color:#c4320a}.k-restart{color:#175cd3}.k-change{color:#0e9384}.k-flagged{color:#b54708}.k-cleared{color:#067647}.k-shift{color:#6941c6}
.k-rerun,.k-retried,.k-manual{color:#475467}"""


def page(title: str, base: str, body: str, head: str = "") -> str:
    nav = (f'<nav><a href="{base}/">nights</a><a href="{base}/benchmarks">benchmarks</a>'
           f'<a href="{base}/compare">compare nights</a><a href="{base}/latest">latest report</a></nav>')
    return (f"<!doctype html><html><head><meta charset=utf-8><title>{escape(title)}</title><style>{STYLE}</style>{head}"
            f'<script src="{base}/static/pages.js"></script></head><body>{nav}<h1>{escape(title)}</h1>{body}</body></html>')


def _num(v, fmt: str = "{:.3g}") -> str:
    return "–" if v is None else fmt.format(v)


def _table(headers: list[str], rows: list[list[str]], classes: list[str] | None = None) -> str:
    head = "".join(f"<th>{escape(h)}</th>" for h in headers)
    body = "".join(f'<tr class="{(classes or [""] * len(rows))[i]}">' + "".join(rows[i]) + "</tr>" for i in range(len(rows)))
    return f"<table><tr>{head}</tr>{body}</table>"


def _td(text: str, numeric: bool = False) -> str:
    return f'<td class="n">{escape(text)}</td>' if numeric else f"<td>{escape(text)}</td>"


def downloads(base: str, path: str, query: dict | None = None) -> str:
    q = escape("?" + urlencode({k: v for k, v in (query or {}).items() if v})) if query else ""
    return (f'<p>Download: <a download href="{base}{path}.csv{q}">CSV</a> · '
            f'<a download href="{base}{path}.json{q}">JSON</a></p>')


def log_link(ui: str, cell: dict, attempt: dict) -> str:
    """The attempt's task instance log in the Airflow UI (opens in the top window), or why there is none."""
    if not attempt.get("task_id"):
        return '<span class="muted">no task recorded</span>'
    path = f"{ui}/dags/{quote(cell['dag_id'], safe='')}/runs/{quote(cell['run_id'], safe='')}/tasks/{quote(attempt['task_id'], safe='')}"
    if attempt.get("map_index") is not None and attempt["map_index"] >= 0:
        path += f"/mapped/{attempt['map_index']}"
    if attempt.get("try_number"):
        path += f"?try_number={attempt['try_number']}"
    return f'<a class="log" target="_top" href="{escape(path)}">attempt {attempt["attempt"]} log</a>'


def cells_section(ui: str, cells: list[dict]) -> str:
    """The cells without a valid result first, with their reason line; then every cell with its figure."""
    failed = [c for c in cells if c["figure"] is None]
    out = []
    if failed:
        rows = [[_td(c["benchmark"]), _td(c["run_id"]), _td(c["label"]), _td(result_row(c)["detail"]),
                 "<td>" + " ".join(log_link(ui, c, a) for a in c["attempts"]) + "</td>"] for c in failed]
        out.append(f"<h2 id=failed>Cells without a valid result ({len(failed)})</h2>"
                   + _table(["benchmark", "run", "cell", "reason", "task logs"], rows, ["failed"] * len(rows)))
    rows, classes = [], []
    for c in cells:
        f = c["figure"]
        rows.append([_td(c["benchmark"]), _td(c["run_id"]), _td(c["label"]), _td(c["status"]),
                     _td(_num(f and f["train_s"], "{:.2f}"), True), _td(_num(f and f["images_per_s"], "{:.1f}"), True),
                     _td(", ".join(f"{k} {v:.3g}" for k, v in sorted((f["metrics"] or {}).items())) if f else ""),
                     "<td>" + " ".join(log_link(ui, c, a) for a in c["attempts"]) + "</td>"])
        classes.append("" if f else "failed")
    out.append(f"<h2>Cells ({len(cells)})</h2>" + _table(["benchmark", "run", "cell", "status", "train s", "images/s",
                                                           "metrics", "task logs"], rows, classes))
    return "".join(out)


def night_page(base: str, ui: str, night: str, cells: list[dict], has_report: bool, previous: str | None) -> str:
    links = [f'<a href="{base}/{night}/report.html">the night\'s report</a>' if has_report
             else '<span class="muted">no report for this night yet</span>']
    if previous:
        links.append(f'<a href="{escape(base + "/compare?" + urlencode({"a": previous, "b": night}))}">compare with {previous}</a>')
    benches = sorted({c["benchmark"] for c in cells})
    links += [f'<a href="{base}/benchmarks/{quote(b)}">{escape(b)} history</a>' for b in benches]
    body = "<p>" + " · ".join(links) + "</p>" + downloads(base, f"/api/nights/{night}/cells")
    body += cells_section(ui, cells) if cells else "<p>No cell was recorded on this night.</p>"
    return page(f"Night {night}", base, body)


def run_page(base: str, ui: str, dag_id: str, run_id: str, cells: list[dict]) -> str:
    if not cells:
        body = (f"<p>The run <code>{escape(run_id)}</code> of <code>{escape(dag_id)}</code> has no recorded cell: it is "
                "still running, planned nothing, or failed before its record step.</p>")
        return page(f"Run {run_id}", base, body)
    night = cells[0]["night"]
    body = (f'<p>{escape(dag_id)}, night <a href="{base}/nights/{night}">{night}</a> · '
            f'<a href="{base}/benchmarks/{quote(cells[0]["benchmark"])}">{escape(cells[0]["benchmark"])} history</a></p>'
            + downloads(base, "/api/runs/cells", {"dag_id": dag_id, "run_id": run_id}) + cells_section(ui, cells))
    return page(f"Run {run_id}", base, body)


def explain_page(base: str, title: str, text: str) -> str:
    return page(title, base, f"<p>{text}</p>")


def benchmarks_page(base: str, latest: dict[str, str]) -> str:
    if not latest:
        return page("Benchmarks", base, "<p>No night is summarized yet: the record step of a benchmark run writes one "
                                        "(or <code>scalebench db summarize</code> for an older store).</p>")
    rows = [[f'<td><a href="{base}/benchmarks/{quote(b)}">{escape(b)}</a></td>', _td(n)] for b, n in sorted(latest.items())]
    return page("Benchmarks", base, _table(["benchmark", "latest night"], rows))


CHART_FIELDS = ("night", "gpus", "precision", "cells", "valid", "retried", "reruns", "basis", "relative_time",
                "images_per_s", "metrics", "step_shares", "marks")  # what history.js reads of each summary
RUN_FIELDS = ("run_id", "run_type", "image_digest")  # sent once per night (every row of a night is one run)
HISTORY_NIGHTS = 365  # the history page's default window; ?nights=N or ?all=1 for another

HISTORY_CHARTS = [  # (id, title, what the y axis is)
    ("relative", "Relative time per GPU count, on each night's basis (train time: T(n) / T(1) of the same epochs; "
                 "throughput: X(1) / X(n) of steady steps; lower is better)", "relative time"),
    ("throughput", "Throughput per GPU count (images/s)", "images/s"),
    ("accuracy", "Accuracy per night (largest GPU count)", "metric"),
    ("steps", "Where a step's time goes (share of the step, largest GPU count)", "% of step"),
]


def history_page(base: str, benchmark: str, summaries: list[dict], shifts: list[dict], charts: bool,
                 since: str | None, first: str | None) -> str:
    """A benchmark across nights since `since` (None: all; `first`: its first summarized night):
    the charts (drawn by history.js from the embedded summaries), the marked nights in words, and
    the last nights as a table."""
    if not summaries:
        return page(f"{benchmark}: history", base, "<p>No night of this benchmark is summarized yet.</p>")
    shown = (f"nights since {since} (its first: {first})" if since and first and since > first
             else f"every night since {first}")
    windows = " · ".join(f'<a href="{base}/benchmarks/{quote(benchmark)}?{q}">{label}</a>'
                         for label, q in (("last 90 nights", "nights=90"), ("last year", "nights=365"), ("all", "all=1")))
    runs = {}
    for s in summaries:
        runs.setdefault(s["night"], {k: s[k] for k in RUN_FIELDS})
    data = {"benchmark": benchmark, "shifts": shifts, "runs": runs, "fields": CHART_FIELDS,
            "rows": [[s[k] for k in CHART_FIELDS] for s in summaries]}
    blob = json.dumps(data, default=str).replace("</", "<\\/")
    head = (f'<link rel="stylesheet" href="{base}/static/uPlot.min.css">'
            f'<script src="{base}/static/uPlot.iife.min.js"></script>' if charts else "")
    body = [f"<p>Showing {shown}: {windows}</p>", downloads(base, f"/api/benchmarks/{quote(benchmark)}/history"),
            '<p class="muted">Drag across a chart to zoom (double-click to reset); click a legend entry to hide '
            "or show its series; hover a night for its run, image and cells.</p>"]
    if not charts:
        body.append('<p class="muted">The charts need the vendored uPlot script (<code>make ui-vendor</code> restores it); '
                    "the tables below hold the same figures.</p>")
    for cid, title, _ in HISTORY_CHARTS:
        body.append(f'<h2>{escape(title)}</h2><div class="chart" id="chart-{cid}"></div><div class="tip" id="tip-{cid}"></div>')
    marks = [(s["night"], m["kind"], m["text"]) for s in summaries for m in s.get("marks") or []]
    marks += [(sh["since"], "shift", f"acknowledged shift: {sh['reason']}") for sh in shifts]
    body.append("<h2>Marked nights</h2>" + ("<ul class=marks>" + "".join(
        f'<li class="k-{k}"><a href="{base}/nights/{n}">{n}</a> {k}: {escape(t)}</li>'
        for n, k, t in sorted(set(marks), reverse=True)) + "</ul>" if marks else "<p>No alert, flag, baseline restart "
                                                                                 "or acknowledged shift.</p>"))
    last = summaries[-60:]
    rows = [[f'<td><a href="{base}/nights/{s["night"]}">{s["night"]}</a></td>', _td(str(s["gpus"]), True),
             _td(s["precision"]), _td(s["run_id"]), _td(s.get("basis") or "–"), _td(_num(s["relative_time"], "{:.3f}"), True),
             _td(_num(s["images_per_s"], "{:.1f}"), True), _td(f"{s['valid']}/{s['cells']}", True),
             _td((s.get("image_digest") or "")[:19])] for s in reversed(last)]
    body.append(f"<h2>Last {len(last)} summaries</h2>" + _table(
        ["night", "GPUs", "precision", "run", "timed by", "relative time", "images/s", "valid cells", "image"], rows))
    body.append(f'<script type="application/json" id="history-data">{blob}</script>')
    if charts:
        body.append(f'<script src="{base}/static/history.js"></script>')
    return page(f"{benchmark}: history", base, "".join(body), head)


def compare_page(base: str, nights: list[str], a: str | None, b: str | None, benchmark: str | None, cmp,
                 error: str | None) -> str:
    def select(name: str, chosen: str | None) -> str:
        opts = "".join(f'<option{" selected" if n == chosen else ""}>{n}</option>' for n in reversed(nights))
        return f'<select name="{name}">{opts}</select>'

    body = [f'<form method="get" action="{base}/compare">night A {select("a", a)} night B {select("b", b)} '
            f'benchmark <input name="benchmark" value="{escape(benchmark or "")}" placeholder="all"> '
            '<button type="submit">compare</button></form>']
    if error:
        body.append(f"<p>{escape(error)}</p>")
    if cmp is not None:
        body.append(downloads(base, "/api/compare", {"a": a, "b": b, "benchmark": benchmark}))
        for c in cmp.benchmarks:
            body.append(f"<h2>{escape(c.benchmark)}</h2><p>A = {escape(c.run_a)}, B = {escape(c.run_b)}; "
                        + (f"systems differ in: {escape(c.changed)}" if c.changed else "same system fingerprint") + "</p>")
            rows = [[_td(str(d.gpus), True), _td(d.precision), _td(str(d.epochs), True),
                     _td(f"{d.repeats[0]}/{d.repeats[1]}", True), _td(f"{d.train_s[0]:.2f}", True),
                     _td(f"{d.train_s[1]:.2f}", True), _td(f"{d.ratio:.3f}", True),
                     _td(f"{d.ratio_ci[0]:.3f}–{d.ratio_ci[1]:.3f}" if d.ratio_ci else "–"), _td(d.verdict),
                     _td("; ".join(f"{m}: {v.text()}" for m, v in d.accuracy.items()))] for d in c.cells]
            body.append(_table(["GPUs", "precision", "epochs", "repeats A/B", "train s A", "train s B", "B/A", "95% CI",
                                "verdict", "accuracy"], rows) if rows else
                        "<p>No (GPU count, precision, epochs) cell has a valid result on both nights.</p>")
        for name, only in (("A", cmp.only_a), ("B", cmp.only_b)):
            if only:
                body.append(f"<p>Only on night {name}: {escape(', '.join(only))}</p>")
    return page("Compare nights", base, "".join(body))
