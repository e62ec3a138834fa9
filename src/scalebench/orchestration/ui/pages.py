"""The browsing pages (history, night, run, compare, benchmarks, explanations) from data decided
elsewhere: night summaries, stored cells, comparisons. This module turns that data into plain
values (texts, links, table cells) and hands them to the Jinja2 templates in `templates/`, which
autoescape every value: no markup is assembled here. The routes are in `webapp`.

Pages are shown inside the Airflow UI (a tab in an iframe), so a link into Airflow's own pages
(a task's log) opens in the top window (pages.js hands it to the UI's router). Links between our
pages are relative to the plugin's mount (`base`), links into Airflow to its UI root (`ui`).
"""
from __future__ import annotations

import functools
from pathlib import Path
from urllib.parse import quote, urlencode

from scalebench.report.exports import result_row

TEMPLATES = Path(__file__).parent / "templates"


@functools.lru_cache(maxsize=1)
def _env():
    import jinja2

    env = jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES), autoescape=True,
                             undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    env.policies["json.dumps_kwargs"] = {"sort_keys": True, "default": str}  # dates in summaries as ISO text
    return env


def render(template: str, title: str, base: str, **values) -> str:
    return _env().get_template(template).render(title=title, base=base, **values)


# The parts a line of prose or a table cell is made of (macros.html writes their markup).
def text(value: str, muted: bool = False) -> dict:
    return {"text": value, "muted": muted}


def link(href: str, label: str, top: bool = False) -> dict:
    return {"href": href, "text": label, "top": top}


def code(value: str) -> dict:
    return {"code": value}


def cell(value: str | None = "", numeric: bool = False) -> dict:
    return {"parts": [text(value or "")], "n": numeric}


def row(cells: list[dict], cls: str = "") -> dict:
    return {"cells": cells, "cls": cls}


def _num(v, fmt: str = "{:.3g}") -> str:
    return "–" if v is None else fmt.format(v)


def downloads(base: str, path: str, query: dict | None = None) -> dict:
    q = "?" + urlencode({k: v for k, v in query.items() if v}) if query else ""
    return {"csv": f"{base}{path}.csv{q}", "json": f"{base}{path}.json{q}"}


def log_link(ui: str, cell_: dict, attempt: dict) -> dict:
    """The attempt's task instance log in the Airflow UI (opens in the top window), or why there is none."""
    if not attempt.get("task_id"):
        return text("no task recorded", muted=True)
    path = (f"{ui}/dags/{quote(cell_['dag_id'], safe='')}/runs/{quote(cell_['run_id'], safe='')}"
            f"/tasks/{quote(attempt['task_id'], safe='')}")
    if attempt.get("map_index") is not None and attempt["map_index"] >= 0:
        path += f"/mapped/{attempt['map_index']}"
    if attempt.get("try_number"):
        path += f"?try_number={attempt['try_number']}"
    return link(path, f"attempt {attempt['attempt']} log", top=True)


def _logs(ui: str, c: dict) -> dict:
    return {"parts": [log_link(ui, c, a) for a in c["attempts"]], "n": False}


def cell_sections(ui: str, cells: list[dict]) -> list[dict]:
    """The cells without a valid result first, with their reason line; then every cell with its figure."""
    failed = [c for c in cells if c["figure"] is None]
    out = []
    if failed:
        out.append({"id": "failed", "title": f"Cells without a valid result ({len(failed)})",
                    "headers": ["benchmark", "run", "cell", "reason", "task logs"],
                    "rows": [row([cell(c["benchmark"]), cell(c["run_id"]), cell(c["label"]),
                                  cell(result_row(c)["detail"]), _logs(ui, c)], "failed") for c in failed]})
    rows = []
    for c in cells:
        f = c["figure"]
        rows.append(row([cell(c["benchmark"]), cell(c["run_id"]), cell(c["label"]), cell(c["status"]),
                         cell(_num(f and f["train_s"], "{:.2f}"), True), cell(_num(f and f["images_per_s"], "{:.1f}"), True),
                         cell(", ".join(f"{k} {v:.3g}" for k, v in sorted((f["metrics"] or {}).items())) if f else ""),
                         _logs(ui, c)], "" if f else "failed"))
    out.append({"id": "", "title": f"Cells ({len(cells)})", "rows": rows,
                "headers": ["benchmark", "run", "cell", "status", "train s", "images/s", "metrics", "task logs"]})
    return out


def night_page(base: str, ui: str, night: str, cells: list[dict], has_report: bool, previous: str | None) -> str:
    links = [link(f"{base}/{night}/report.html", "the night's report") if has_report
             else text("no report for this night yet", muted=True)]
    if previous:
        links.append(link(f"{base}/compare?" + urlencode({"a": previous, "b": night}), f"compare with {previous}"))
    links += [link(f"{base}/benchmarks/{quote(b, safe='')}", f"{b} history") for b in sorted({c["benchmark"] for c in cells})]
    return render("night.html", f"Night {night}", base, links=links, downloads=downloads(base, f"/api/nights/{night}/cells"),
                  sections=cell_sections(ui, cells) if cells else [])


def run_page(base: str, ui: str, dag_id: str, run_id: str, cells: list[dict]) -> str:
    if not cells:
        return render("run.html", f"Run {run_id}", base, dag_id=dag_id, run_id=run_id, sections=[])
    night, bench = cells[0]["night"], cells[0]["benchmark"]
    links = [text(f"{dag_id}, night "), link(f"{base}/nights/{night}", night),
             link(f"{base}/benchmarks/{quote(bench, safe='')}", f"{bench} history")]
    return render("run.html", f"Run {run_id}", base, dag_id=dag_id, run_id=run_id, links=links,
                  downloads=downloads(base, "/api/runs/cells", {"dag_id": dag_id, "run_id": run_id}),
                  sections=cell_sections(ui, cells))


def explain_page(base: str, title: str, parts: list[dict]) -> str:
    """A page of one explanation: `parts` are text, links and code (see text(), link(), code())."""
    return render("explain.html", title, base, parts=parts)


def benchmarks_page(base: str, latest: dict[str, str]) -> str:
    rows = [row([{"parts": [link(f"{base}/benchmarks/{quote(b, safe='')}", b)], "n": False}, cell(n)])
            for b, n in sorted(latest.items())]
    return render("benchmarks.html", "Benchmarks", base, rows=rows)


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
    title = f"{benchmark}: history"
    if not summaries:
        return render("history.html", title, base, rows=[], charts=False)
    here = f"{base}/benchmarks/{quote(benchmark, safe='')}"
    shown = (f"nights since {since} (its first: {first})" if since and first and since > first
             else f"every night since {first}")
    windows = [link(f"{here}?{q}", label) for label, q in (("last 90 nights", "nights=90"), ("last year", "nights=365"),
                                                           ("all", "all=1"))]
    runs: dict[str, dict] = {}
    for s in summaries:
        runs.setdefault(s["night"], {k: s[k] for k in RUN_FIELDS})
    data = {"benchmark": benchmark, "shifts": shifts, "runs": runs, "fields": CHART_FIELDS,
            "rows": [[s[k] for k in CHART_FIELDS] for s in summaries]}
    marks = {(s["night"], m["kind"], m["text"]) for s in summaries for m in s.get("marks") or []}
    marks |= {(sh["since"], "shift", f"acknowledged shift: {sh['reason']}") for sh in shifts}
    last = summaries[-60:]
    rows = [row([{"parts": [link(f"{base}/nights/{s['night']}", s["night"])], "n": False}, cell(str(s["gpus"]), True),
                 cell(s["precision"]), cell(s["run_id"]), cell(s.get("basis") or "–"),
                 cell(_num(s["relative_time"], "{:.3f}"), True), cell(_num(s["images_per_s"], "{:.1f}"), True),
                 cell(f"{s['valid']}/{s['cells']}", True), cell((s.get("image_digest") or "")[:19])]) for s in reversed(last)]
    return render("history.html", title, base, charts=charts, shown=shown, windows=windows, data=data,
                  downloads=downloads(base, f"/api/benchmarks/{quote(benchmark, safe='')}/history"),
                  chart_list=[{"id": cid, "title": t} for cid, t, _ in HISTORY_CHARTS], rows=rows,
                  marks=[{"night": n, "kind": k, "text": t, "href": f"{base}/nights/{n}"}
                         for n, k, t in sorted(marks, reverse=True)])


def compare_page(base: str, nights: list[str], a: str | None, b: str | None, benchmark: str | None, cmp,
                 error: str | None) -> str:
    benchmarks = []
    for c in cmp.benchmarks if cmp is not None else []:
        rows = [row([cell(str(d.gpus), True), cell(d.precision), cell(str(d.epochs), True),
                     cell(f"{d.repeats[0]}/{d.repeats[1]}", True), cell(f"{d.train_s[0]:.2f}", True),
                     cell(f"{d.train_s[1]:.2f}", True), cell(f"{d.ratio:.3f}", True),
                     cell(f"{d.ratio_ci[0]:.3f}–{d.ratio_ci[1]:.3f}" if d.ratio_ci else "–"), cell(d.verdict),
                     cell("; ".join(f"{m}: {v.text()}" for m, v in d.accuracy.items()))]) for d in c.cells]
        benchmarks.append({"name": c.benchmark, "run_a": c.run_a, "run_b": c.run_b, "rows": rows,
                           "changed": f"systems differ in: {c.changed}" if c.changed else "same system fingerprint"})
    only_on = [(name, only) for name, only in (("A", cmp.only_a), ("B", cmp.only_b)) if only] if cmp is not None else []
    return render("compare.html", "Compare nights", base, nights=list(reversed(nights)), a=a, b=b, benchmark=benchmark,
                  error=error, benchmarks=benchmarks, only_on=only_on,
                  downloads=downloads(base, "/api/compare", {"a": a, "b": b, "benchmark": benchmark}) if cmp else None)
