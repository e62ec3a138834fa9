"""The browsing pages (history, night, run, compare, benchmarks, explanations) from data decided
elsewhere: night summaries, stored cells, comparisons. This module turns that data into plain
values (texts, links, table cells) and hands them to the Jinja2 templates in `templates/`, which
autoescape every value: no markup is assembled here. The routes are in `browsing`, `triage`
(which also builds the alert pages' values, with these parts) and `reports`.

Pages are shown inside the Airflow UI (a tab in an iframe), so a link into Airflow's own pages
(a task's log) opens in the top window (pages.js hands it to the UI's router). Links between our
pages are relative to the plugin's mount (`base`), links into Airflow to its UI root (`ui`).
"""
from __future__ import annotations

import functools
from pathlib import Path
from typing import Sequence
from urllib.parse import quote, urlencode

from markupsafe import Markup

from scalebench.analysis.compare import COLUMNS as COMPARE_COLUMNS
from scalebench.core import tables
from scalebench.core.figures import FIGURE_NAMES, HISTORY_FIGURES
from scalebench.core.tables import Column, Link
from scalebench.core.records import NightSummary
from scalebench.report.exports import history_table, result_row

TEMPLATES = Path(__file__).parent / "templates"
STATIC = Path(__file__).parent / "static"
STATIC_FILES = {"history.js": STATIC / "history.js", "pages.js": STATIC / "pages.js", "pages.css": STATIC / "pages.css",
                "uPlot.iife.min.js": STATIC / "vendor" / "uPlot.iife.min.js",
                "uPlot.min.css": STATIC / "vendor" / "uPlot.min.css"}


@functools.lru_cache(maxsize=16)
def static_hash(name: str) -> str:
    """The first 12 hex digits of a static file's sha256 ("missing" when it is not there)."""
    import hashlib

    path = STATIC_FILES[name]
    return hashlib.sha256(path.read_bytes()).hexdigest()[:12] if path.is_file() else "missing"


def static_url(base: str, name: str) -> str:
    """A static file's address under its content's hash: a new file is a new address, so a browser
    may keep each one for good."""
    return f"{base}/static/{name}?v={static_hash(name)}"


@functools.lru_cache(maxsize=1)
def _env():
    import jinja2

    env = jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES), autoescape=True, finalize=_shown,
                             undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    env.policies["json.dumps_kwargs"] = {"sort_keys": True, "default": str}  # dates in summaries as ISO text
    env.globals["static"] = static_url
    return env


def _shown(value):
    """Every value a template writes: a bidirectional control in stored text shown, not obeyed
    (markup a macro made is already made of shown values)."""
    return tables.visible(value) if isinstance(value, str) and not isinstance(value, Markup) else value


def render(template: str, title: str, base: str, **values) -> str:
    return _env().get_template(template).render(title=title, base=base, **values)


# The parts a line of prose or a table cell is made of (macros.html writes their markup).
Part = dict | Link


def text(value: str, muted: bool = False) -> dict:
    return {"text": value, "muted": muted}


def link(href: str, label: str, top: bool = False) -> Link:
    return Link(label, href, top)


def code(value: str) -> dict:
    return {"code": value}


def _num(v, fmt: str = "{:.3g}") -> str:
    return "–" if v is None else fmt.format(v)


def downloads(base: str, path: str, query: dict | None = None) -> dict:
    q = "?" + urlencode({k: v for k, v in query.items() if v}) if query else ""
    return {"csv": f"{base}{path}.csv{q}", "json": f"{base}{path}.json{q}"}


def log_link(ui: str, cell_: dict, attempt: dict) -> Link | None:
    """The attempt's task instance log in the Airflow UI (opens in the top window); None where
    no task was recorded for it."""
    if not attempt.get("task_id"):
        return None
    path = (f"{ui}/dags/{quote(cell_['dag_id'], safe='')}/runs/{quote(cell_['run_id'], safe='')}"
            f"/tasks/{quote(attempt['task_id'], safe='')}")
    if attempt.get("map_index") is not None and attempt["map_index"] >= 0:
        path += f"/mapped/{attempt['map_index']}"
    if attempt.get("try_number"):
        path += f"?try_number={attempt['try_number']}"
    return Link(f"attempt {attempt['attempt']} log", path, top=True)


def _log_column(ui: str) -> Column[dict]:
    def logs(c: dict) -> list[Link]:
        return [link for a in c["attempts"] if (link := log_link(ui, c, a))]
    return Column("task logs", lambda c: "" if logs(c) else "no task recorded", links=logs)


def _metrics(c: dict) -> str:
    f = c["figure"]
    return ", ".join(f"{k} {v:.3g}" for k, v in sorted((f["metrics"] or {}).items())) if f else ""


def cell_sections(ui: str, cells: list[dict]) -> list[dict]:
    """The cells without a valid result first, with their reason line; then every cell with its figure."""
    failed = [c for c in cells if c["figure"] is None]
    who: list[Column[dict]] = [Column("benchmark", lambda c: c["benchmark"]), Column("run", lambda c: c["run_id"]),
                               Column("cell", lambda c: c["label"])]
    out = []
    if failed:
        columns = [*who, Column("reason", lambda c: result_row(c)["detail"]), _log_column(ui)]
        out.append({"id": "failed", "title": f"Cells without a valid result ({len(failed)})",
                    "table": tables.build(columns, failed, lambda c: "failed")})
    columns = [*who, Column("status", lambda c: c["status"]),
               Column("train s", lambda c: _num(c["figure"] and c["figure"]["train_s"], "{:.2f}"), numeric=True),
               Column("images/s", lambda c: _num(c["figure"] and c["figure"]["images_per_s"], "{:.1f}"), numeric=True),
               Column("metrics", _metrics), _log_column(ui)]
    out.append({"id": "", "title": f"Cells ({len(cells)})",
                "table": tables.build(columns, cells, lambda c: "" if c["figure"] else "failed")})
    return out


def night_page(base: str, ui: str, night: str, cells: list[dict], has_report: bool, previous: str | None) -> str:
    links = [link(f"{base}/{night}/report.html", "the night's report") if has_report
             else text("no report for this night yet", muted=True)]
    if previous:
        links.append(link(f"{base}/compare?" + urlencode({"a": previous, "b": night}), f"compare with {previous}"))
    links += [link(f"{base}/benchmarks/{quote(b, safe='')}", f"{b} history") for b in sorted({c["benchmark"] for c in cells})]
    return render("night.html", f"Night {night}", base, links=links, downloads=downloads(base, f"/api/nights/{night}/cells"),
                  sections=cell_sections(ui, cells) if cells else [])


def run_page(base: str, ui: str, dag_id: str, run_id: str, cells: list[dict], first: Sequence[dict] = ()) -> str:
    """The run's cells; `first`: sections shown above them (each profiled A/B's diff: profile_sections)."""
    if not cells:
        return render("run.html", f"Run {run_id}", base, dag_id=dag_id, run_id=run_id, sections=[])
    night, bench = cells[0]["night"], cells[0]["benchmark"]
    links = [text(f"{dag_id}, night "), link(f"{base}/nights/{night}", night),
             link(f"{base}/benchmarks/{quote(bench, safe='')}", f"{bench} history")]
    return render("run.html", f"Run {run_id}", base, dag_id=dag_id, run_id=run_id, links=links,
                  downloads=downloads(base, "/api/runs/cells", {"dag_id": dag_id, "run_id": run_id}),
                  sections=[*first, *cell_sections(ui, cells)])


def explain_page(base: str, title: str, parts: list[Part]) -> str:
    """A page of one explanation: `parts` are text, links and code (see text(), link(), code())."""
    return render("explain.html", title, base, parts=parts)


def benchmarks_page(base: str, latest: dict[str, str]) -> str:
    columns: list[Column[tuple[str, str]]] = [
        Column("benchmark", lambda bn: bn[0], links=lambda bn: [Link(bn[0], f"{base}/benchmarks/{quote(bn[0], safe='')}")]),
        Column("latest night", lambda bn: bn[1])]
    return render("benchmarks.html", "Benchmarks", base, table=tables.build(columns, sorted(latest.items())))


CHART_FIELDS = ("night", "gpus", "precision", "cells", "valid", "retried", "reruns", "basis", "figures", "metrics",
                "step_shares", "marks")  # what history.js reads of each summary ("figures": each figure by its name)
RUN_FIELDS = ("run_id", "run_type", "image_digest")  # sent once per night (every row of a night is one run)
_PLAIN = [k for k in CHART_FIELDS if k != "figures"]
CHART_COLUMNS = [*_PLAIN, *FIGURE_NAMES]  # a chart row's values, in order (history.js: doc.fields)
RUN_FIELDS_WITH_NIGHT = ("night", *RUN_FIELDS)
HISTORY_NIGHTS = 365  # the history page's default window; ?nights=N or ?all=1 for another

# the charts of dicts of figures, after one chart per charted figure of core.figures (history.js draws them)
OTHER_CHARTS = [{"id": "accuracy", "title": "Accuracy per night (largest GPU count)", "note": ""},
                {"id": "steps", "title": "Where a step's time goes (share of the step, largest GPU count)", "note": ""}]


def _history_table(base: str, summaries: list[NightSummary]) -> tables.Table:
    """The last nights, newest first, each night linked to its page."""
    columns = history_table(lambda s: [Link(s["night"], f"{base}/nights/{s['night']}")])
    return tables.build(columns, summaries)


def chart_row(s: NightSummary) -> list:
    """One summary as history.js reads it: CHART_FIELDS but figures, then each figure by name."""
    return [s.get(k) for k in _PLAIN] + [s["figures"][f] for f in FIGURE_NAMES]


def predicted_rows(predicted: Sequence[dict]) -> list[list]:
    """Frozen predictions as history.js reads them: (night, GPUs, precision, images/s, their line)."""
    return [[p["night"], p["gpus"], p["precision"], p["images_per_s"], p["line"]] for p in predicted]


def history_page(base: str, benchmark: str, summaries: list[NightSummary], shifts: list[dict], charts: bool,
                 since: str | None, first: str | None, predicted: Sequence[dict] = (), more: str | None = None) -> str:
    """A benchmark across nights since `since` (None: all; `first`: its first summarized night):
    the charts (drawn by history.js from the embedded summaries, then from the older nights at
    `more`, page after page), the marked nights in words, and the last nights as a table."""
    title = f"{benchmark}: history"
    if not summaries:
        return render("history.html", title, base, table=None, charts=False)
    here = f"{base}/benchmarks/{quote(benchmark, safe='')}"
    shown = (f"nights since {since} (its first: {first})" if since and first and since > first
             else f"every night since {first}")
    windows = [link(f"{here}?{q}", label) for label, q in (("last 90 nights", "nights=90"), ("last year", "nights=365"),
                                                           ("all", "all=1"))]
    runs: dict[str, dict] = {}
    for s in summaries:
        runs.setdefault(s["night"], {k: s.get(k) for k in RUN_FIELDS})
    data = {"benchmark": benchmark, "shifts": shifts, "runs": runs, "fields": CHART_COLUMNS,
            "figures": [{"name": f.name, "unit": f.unit, "from_gpus": f.from_gpus, "percent": f.fmt.endswith("%")}
                        for f in HISTORY_FIGURES if f.chart],
            "rows": [chart_row(s) for s in summaries], "more": more,
            # frozen predictions: points beside the measured images/s
            "predicted": [p for p in predicted_rows(predicted) if p[0] in runs]}
    marks = {(s["night"], m["kind"], m["text"]) for s in summaries for m in s.get("marks") or []}
    marks |= {(sh["since"], "shift", f"acknowledged shift: {sh['reason']}") for sh in shifts}
    table = _history_table(base, list(reversed(summaries[-60:])))
    charts_shown = [{"id": f.name, "title": f.title(), "note": f.note} for f in HISTORY_FIGURES if f.chart]
    return render("history.html", title, base, charts=charts, shown=shown, windows=windows, data=data,
                  downloads=downloads(base, f"/api/benchmarks/{quote(benchmark, safe='')}/history"),
                  chart_list=charts_shown + OTHER_CHARTS, table=table, marks_from=summaries[0]["night"] if more else None,
                  marks=[{"night": n, "kind": k, "text": t, "href": f"{base}/nights/{n}"}
                         for n, k, t in sorted(marks, reverse=True)])


NIGHTS_MENU = 400  # nights the compare page's menus offer (the newest; any other night by its address)


def compare_page(base: str, nights: list[str], a: str | None, b: str | None, benchmark: str | None, cmp,
                 error: str | None) -> str:
    benchmarks = []
    for c in cmp.benchmarks if cmp is not None else []:
        benchmarks.append({"name": c.benchmark, "run_a": c.run_a, "run_b": c.run_b,
                           "table": tables.build(COMPARE_COLUMNS, c.cells) if c.cells else None,
                           "changed": f"systems differ in: {c.changed}" if c.changed else "same system fingerprint"})
    only_on = [(name, only) for name, only in (("A", cmp.only_a), ("B", cmp.only_b)) if only] if cmp is not None else []
    return render("compare.html", "Compare nights", base, nights=list(reversed(nights)), a=a, b=b, benchmark=benchmark,
                  error=error, benchmarks=benchmarks, only_on=only_on,
                  downloads=downloads(base, "/api/compare", {"a": a, "b": b, "benchmark": benchmark}) if cmp else None)
