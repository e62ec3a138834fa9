"""The report written out, computing nothing: Markdown (its tables built from lists of columns),
HTML, table.json, the plots, and the index of nights."""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

from scalebench_kit.names import (ACCURACY_METRICS, REPORT_HTML, REPORT_MD, REPORT_TABLE, REPORTS_INDEX_HTML,
                                  REPORTS_INDEX_JSON)

from scalebench.core.figures import HISTORY_FIGURES, FigureField
from scalebench.core import tables
from scalebench.core.tables import Column
from scalebench.core.verdicts import COMPARISONS, EQUIVALENT, FIX_LABELS, REGRESSION, UNINFORMATIVE
from scalebench.report.model import LOOKBACK_NIGHTS, STEP_PARTS, STUDY_AVERAGE, Report, Row


def _pct(v):
    return "–" if v is None else f"{100 * v:.1f}%"


def _verdict_cell(per: dict | None) -> str:
    if per is None:
        return ""
    if not per:
        return "–"
    kinds = {v.kind for v in per.values()}
    if len(kinds) == 1 and kinds <= {EQUIVALENT, UNINFORMATIVE}:
        return kinds.pop()
    worst = next(k for k in COMPARISONS if k in kinds or k == EQUIVALENT)
    return f"{worst} at " + ", ".join(str(n) for n, v in sorted(per.items()) if v.kind == worst)


def table(columns: Sequence[Column], items: Sequence) -> list[str]:
    return tables.markdown(tables.build(columns, items))


@dataclass(frozen=True)
class StudyLine:
    """A line of the study's table: a benchmark's row, or the average (no verdicts)."""
    label: str
    verdicts: dict | None
    relative_time: dict
    suspect: dict
    basis: str = ""
    precision: str = ""


def _lines(rows: list, average: dict) -> list[StudyLine]:
    """A table's rows, then its average line (saying at which GPU counts some rows have no figure)."""
    counts = sorted({n for r in rows for n in r.train_s})
    incomplete = [n for n in counts if sum(n in r.relative_time for r in rows) < len(rows)]
    avg = StudyLine("average" + (f" (incomplete rows at {', '.join(map(str, incomplete))} GPUs)" if incomplete else ""),
                    None, average, {})
    return [StudyLine(r.benchmark, r.verdicts, r.relative_time, r.suspect, r.key.timing_basis, r.key.precision)
            for r in rows] + [avg]


def study_columns(rep: Report, metrics: list[str] | None = None, gpu_counts: list[int] | None = None) -> list[Column]:
    """The scaling table's columns: benchmark, dtype, basis, a verdict per metric, a relative time per GPU count."""
    def verdict(m: str) -> Callable[[StudyLine], str]:
        return lambda s: _verdict_cell(None if s.verdicts is None else s.verdicts.get(m, {}))

    def time(n: int) -> Callable[[StudyLine], str]:
        return lambda s: _pct(s.relative_time.get(n)) + (" (suspect)" if n in s.suspect else "")

    verdicts = [Column(f"{ACCURACY_METRICS[m].display} verdict", verdict(m))
                for m in (rep.metrics if metrics is None else metrics)]
    times = [Column(f"{n} GPU", time(n)) for n in (rep.gpu_counts if gpu_counts is None else gpu_counts)]
    return [Column("benchmark", lambda s: s.label), Column("dtype", lambda s: s.precision),
            Column("timed by", lambda s: s.basis), *verdicts, *times]


def figure_column(f: FigureField) -> Column:
    """A history figure (core.figures) per (row, GPU count), with its interval where it declares one."""
    def value(item: tuple[Row, int]) -> str:
        r, n = item
        spread = r.spread(f, n)
        if isinstance(spread, tuple):
            return f"{f.text(r.figure(f, n))} ({f.text(spread[0])}–{f.text(spread[1])})"
        return f.text(r.figure(f, n)) + ("" if spread is None else f" ({f.text(spread)})")
    return Column(f.label + (f" ({f.spread[1]})" if f.spread else ""), value, numeric=True)


def detail_columns(rep: Report) -> list[Column]:
    """Per (row, GPU count): the run's setup, every history figure, ratios and accuracy at the longest epoch count."""
    def eff(item):
        ef = item[0].efficiency.get(item[1])
        return _pct(ef) + (" (super-linear)" if ef and ef > 1 else "")

    sp = lambda item: item[0].speedup.get(item[1])  # noqa: E731
    def metric_of(m: str) -> Callable[[tuple[Row, int]], float | None]:
        return lambda it: it[0].metrics.get(m, {}).get(it[1])

    metric = [Column(ACCURACY_METRICS[m].display, metric_of(m), lambda v: "–" if v is None else f"{v:.3f}")
              for m in rep.metrics]
    return [Column("benchmark", lambda it: it[0].benchmark), Column("dtype", lambda it: it[0].key.precision),
            Column("GPUs", lambda it: it[1]), Column("scaling", lambda it: it[0].scaling_mode),
            Column("global batch", lambda it: it[0].global_batch.get(it[1], "–")),
            Column("LR policy", lambda it: it[0].lr_policy), Column("epochs", lambda it: it[0].train_epochs[it[1]]),
            Column("timed by", lambda it: it[0].key.timing_basis), *map(figure_column, HISTORY_FIGURES),
            Column("speedup", sp, lambda v: "–" if v is None else f"{v:.2f}x"), Column("efficiency", eff), *metric]


def accuracy_columns(rep: Report) -> list[Column]:
    """Per (weekly accuracy row, GPU count): the run, its training, time to accuracy and each metric
    at the longest epoch count with its verdict against 1 GPU."""
    def tta(it):
        r, n = it
        if n not in r.time_to_accuracy:
            return "–"
        v = r.time_to_accuracy[n]
        return "not reached" if v is None else f"{v:.0f} s"

    def metric(m):
        def value(it):
            r, n = it
            v, verdict = r.metrics.get(m, {}).get(n), r.verdicts.get(m, {}).get(n)
            return ("–" if v is None else f"{v:.3f}") + (f" ({verdict.kind})" if verdict else "")
        return Column(ACCURACY_METRICS[m].display, value)
    return [Column("benchmark", lambda it: it[0].benchmark), Column("dtype", lambda it: it[0].key.precision),
            Column("run", lambda it: it[0].run_id),
            Column("GPUs", lambda it: it[1]), Column("epochs", lambda it: it[0].train_epochs[it[1]]),
            Column("train s", lambda it: f"{it[0].train_s[it[1]]:.0f}"),
            Column("time to accuracy", lambda it: (it[0].tta_target or "") + (": " if it[0].tta_target else "") + tta(it)),
            Column("epochs to target vs 1 GPU", lambda it: it[0].convergence[it[1]].text()
                   if it[1] in it[0].convergence else "–"),
            *[metric(m) for m in rep.accuracy_metrics]]


def step_columns() -> list[Column]:
    """Per (row, GPU count): seconds per steady step of each part, its share in brackets."""
    def part(p):
        def value(it):
            r, n = it
            s, share = r.step_s[n][p], r.step_shares[n][p]
            return "–" if s is None else f"{s:.3f}" + ("" if share is None else f" ({100 * share:.0f}%)")
        return Column(p.replace("_", " "), value)
    return [Column("benchmark", lambda it: it[0].benchmark), Column("dtype", lambda it: it[0].key.precision),
            Column("GPUs", lambda it: it[1]), *[part(p) for p in STEP_PARTS]]


def _header(rep: Report) -> list[str]:
    rows = rep.rows
    out = [f"# scalebench report: night {rep.night}", ""]
    if rep.complete:
        out.append(f"Complete: every scheduled benchmark ({len(rep.expected)}) has recorded its run for this night.")
    else:
        out.append(f"**Partial report**: scheduled runs not yet recorded for this night: {', '.join(rep.missing) or '–'}. "
                   "Regression alerts wait for the complete report.")
    if rep.source == "manual" and rows:
        out += ["", "**Manual runs only**: this night has no scheduled run, so the table below is made from manual "
                "runs (the last one per benchmark); they never feed the regression baseline."]
    for bench, why in sorted(rep.skipped.items()):
        out += ["", f"**Skipped**: {bench}'s scheduled run planned no cells ({why})."]
    for stem, err in sorted(rep.config_errors.items()):
        out += ["", f"**Config error**: benchmark `{stem}` does not load and did not run: {err}"]
    out += ["", f"Generated {rep.generated}. Relative training time per row on its timing basis: *train time*, "
            "T(n)/T(1) where every GPU count makes full passes over the split; *throughput*, X(1)/X(n) from steady "
            "samples per second (slowest rank) where epochs are capped to the same steps at every GPU count. "
            "Median over repeats per epoch count, averaged over epoch counts; 95% bootstrap CI of that average "
            "in the detail table.", ""]
    return out


def _study(rep: Report) -> list[str]:
    out: list[str] = []
    study = rep.study_rows
    out += ["## The study's table: time to train the same epochs (weekly run, full passes)", "",
            "Each benchmark's latest weekly accuracy run whose every GPU count made full passes over the split: "
            "T(n)/T(1) of the same epochs, the quantity the study averaged (" +
            ", ".join(f"{100 * v:.1f}% at {n} GPUs" for n, v in sorted(STUDY_AVERAGE.items())) + ").", ""]
    out += (table(study_columns(rep, rep.accuracy_metrics, sorted({n for r in study for n in r.train_s}) or [1]),
                  _lines(study, rep.study_average)) if study else
            [f"- no weekly run with full passes in the last {LOOKBACK_NIGHTS} nights"])
    return out


def _nightly(rep: Report) -> list[str]:
    rows = rep.rows
    out: list[str] = []
    out += ["", "## Nightly table: steady-state throughput scaling", "",
            "This night's runs. The nightly profile caps every GPU count to the same steps, so its relative time is "
            "X(1)/X(n) of steady throughput: how well a step scales, not the study's time to train the same epochs, "
            "and its average is never set beside the study's. Rows timed by *train time* (smoke or manual runs) "
            "made full passes. The accuracy verdicts here are a smoke signal only (a few dozen steps); whether "
            "accuracy suffers is the weekly run's question.", "",
            *table(study_columns(rep, rep.metrics, rep.gpu_counts), _lines(rows, rep.average))]
    return out


def _conclusions(rep: Report) -> list[str]:
    out: list[str] = []
    out += ["", "## Conclusions", ""] + [f"- {x}" for x in rep.conclusions]
    return out


def _weekly_accuracy(rep: Report) -> list[str]:
    out: list[str] = []
    out += ["", "## Weekly accuracy run (full profile)", "", "Each benchmark's latest run of its weekly accuracy "
            "DAG (`scalebench_<benchmark>_accuracy`: the full profile on the real dataset, cut to its "
            "`accuracy_cut`), metrics at its longest epoch count with the verdict against 1 GPU.", ""]
    if rep.accuracy_rows:
        out += table(accuracy_columns(rep), [(r, n) for r in rep.accuracy_rows for n in sorted(r.train_s)])
        out += [f"- {r.name} at {n} GPU{'s' if n != 1 else ''}: {'; '.join(why)}" for r in rep.accuracy_rows
                for n, why in sorted(r.suspect.items())]
        out += [f"- {r.name} weekly run {r.run_id}: {x['label']}: {x['status']} ({x['reason']})"
                for r in rep.accuracy_rows for x in r.not_valid]
    else:
        out.append(f"- none recorded in the last {LOOKBACK_NIGHTS} nights")
    return out


def _detail(rep: Report) -> list[str]:
    rows = rep.rows
    out: list[str] = []
    out += ["", "## Detail per GPU count", "", "Train s is steady training time at the longest epoch count run, "
            "median and interquartile range over repeats.", "",
            *table(detail_columns(rep), [(r, n) for r in rows for n in sorted(r.train_s)])]
    return out


def _step_parts(rep: Report) -> list[str]:
    rows = rep.rows
    out: list[str] = []
    out += ["", "## Where a steady step goes", "", "Seconds per steady step of the slowest rank, median over "
            "cells (share of the step in brackets); – where the framework does not expose the part.", "",
            *table(step_columns(), [(r, n) for r in rows for n in sorted(r.step_s)])]
    return out


def _predictions(rep: Report) -> list[str]:
    out: list[str] = []
    out += ["", "## What more GPUs would give", "", "Predicted from each series' nights so far on its current image "
            "and profile (a model of the step: compute, data wait, the all-reduce measured on the host; "
            "docs/prediction.md), with the part that limits it. Each night also freezes predictions before its "
            "cells count; the first night that measures a target judges them.", ""]
    out += _prediction_lines(rep.predictions)
    return out


def _time_to_accuracy(rep: Report) -> list[str]:
    rows = rep.rows
    out: list[str] = []
    out += ["", "## Time to accuracy", ""]
    tta = [r for r in rows if r.time_to_accuracy]
    for r in tta:
        figs = ", ".join(f"{n} GPU{'s' if n != 1 else ''}: " + ("not reached" if v is None else
                                                                 f"{v:.1f} s (training {r.train_s.get(n, 0):.1f} s)")
                         for n, v in sorted(r.time_to_accuracy.items()))
        out.append(f"- {r.name} ({r.tta_target}): {figs}")
    if not tta:
        out.append("- not measured this night (per-epoch evaluation runs in the full profile of benchmarks with a "
                   "time_to_accuracy target)")
    return out


def _accuracy_verdicts(rep: Report) -> list[str]:
    rows = rep.rows
    out: list[str] = []
    out += ["", "## Accuracy verdicts (vs 1 GPU)", ""]
    lines = [f"- {r.name} {ACCURACY_METRICS[m].display} at {n} GPUs: {v.text()}"
             for r in rows for m, per in r.verdicts.items() for n, v in per.items()]
    out += lines or ["- none (needs the 1-GPU cell and at least one more GPU count)"]
    return out


def _changes_tonight(rep: Report) -> list[str]:
    out: list[str] = []
    out += ["", "## Changes tonight", "", "A new image or config is judged against the baseline before it (not a "
            "fresh start): regression (confirmed), improvement, no effect, or inconclusive (the next night or "
            "a same-night A/B decides).", ""]
    for c in rep.changes_tonight:
        out.append(f"- **{c['benchmark']}**: {c['change']}: **{c['verdict']}**"
                   + (" (alerted)" if c["alerted"] else " (reported, not alerted: a config change)"
                      if c["verdict"] == REGRESSION and c["kind"] == "config" else ""))
        out += [f"  - {n}" for n in c["numbers"]]
        if c["what_changed"]:
            out.append(f"  - what changed: {c['what_changed']}")
    if not rep.changes_tonight:
        out.append("- none (no image or config changed tonight)")
    return out


def _regressions(rep: Report) -> list[str]:
    out: list[str] = []
    out += ["", "## Regressions", ""]
    out += [f"- ALERT: {a}" for a in rep.alerts]
    out += [f"- {FIX_LABELS[f['verdict']]}: {f['line']}" for f in rep.fixed]
    out += [f"- {d}" for d in rep.diagnoses]
    out += [f"- flagged, awaiting confirmation: {a}" for a in rep.flagged]
    out += [f"- cleared by reruns: {a}" for a in rep.cleared]
    out += [f"- {a}" for a in rep.changes]
    out += [f"- NOT DELIVERED: {code_span(u)}" for u in rep.undelivered]
    if not (rep.alerts or rep.fixed or rep.flagged or rep.cleared or rep.changes or rep.undelivered):
        out.append(f"- none ({rep.series} series judged against their baselines)")
    return out


def _suspects(rep: Report) -> list[str]:
    rows = rep.rows
    out: list[str] = []
    out += ["", "## Suspect figures", ""]
    sus = [f"- {r.name}{run} at {n} GPU{'s' if n != 1 else ''}: {'; '.join(why)}"
           for run, rs in (("", rows), (" (weekly run)", rep.accuracy_rows)) for r in rs
           for n, why in sorted(r.suspect.items())]
    out += sus or ["- none (efficiency at most 1, epochs consistent, accuracy near its reference where one is set)"]
    return out


def _table_checks(rep: Report) -> list[str]:
    out: list[str] = []
    out += ["", "## Table checks (Great Expectations)", ""]
    out += [f"- {x}" for x in rep.table_checks] or ["- all passed"]
    return out


def _cells_not_valid(rep: Report) -> list[str]:
    rows = rep.rows
    out: list[str] = []
    out += ["", "## Cells missing, invalid or refused", ""]
    bad = [f"- {r.name}: {x['label']}: {x['status']} ({x['reason']})" for r in rows for x in r.not_valid]
    bad += [f"- {r.name}: {lab}: refused (no 1-GPU baseline with the same image, config and profile)"
            for r in rows for lab in r.refused]
    bad += [f"- {r.name}: every ratio refused ({r.basis_refusal})" for r in rows if r.basis_refusal]
    out += bad or ["- none"]
    return out


def _retried(rep: Report) -> list[str]:
    rows = rep.rows
    out: list[str] = []
    out += ["", "## Cells with more than one attempt", "", "Every attempt is kept; a cell's figure is its newest "
            "valid attempt.", ""]
    out += [f"- {r.name}: {x['label']}: " + (f"attempt {x['figure']} is the figure; " if x["figure"] else "")
            + "; ".join(x["others"]) for r in rows for x in r.retried] or ["- none"]
    return out


def _teardown(rep: Report) -> list[str]:
    rows = rep.rows
    out: list[str] = []
    out += ["", "## Cells valid after a crash at teardown", "", "Every rank had logged its run_stop success; the "
            "result validated, so the cell counts and was not retried.", ""]
    out += [f"- {r.name}: {x['label']}: {code_span(x['message'])}" for r in rows for x in r.teardown] or ["- none"]
    return out


def _manual_runs(rep: Report) -> list[str]:
    out: list[str] = []
    out += ["", "## Manual runs of this night", ""]
    for m in rep.manual_runs:
        out.append(f"- {m['benchmark']} run {m['run_id']}: {m['valid']} of {m['cells']} cells valid")
        out += [f"  - {x['label']}: {x['status']} ({x['reason']})" for x in m["not_valid"]]
    if not rep.manual_runs:
        out.append("- none")
    return out


def _plots(rep: Report) -> list[str]:
    out: list[str] = []
    out += ["", "## Plots", ""] + [f"![{p}]({p})" for p in rep.plots]
    return out


# the report's sections in order: (name, render); a new section is one function and one entry
SECTIONS = (
    ("header", _header),
    ("study", _study),
    ("nightly", _nightly),
    ("conclusions", _conclusions),
    ("weekly_accuracy", _weekly_accuracy),
    ("detail", _detail),
    ("step_parts", _step_parts),
    ("predictions", _predictions),
    ("time_to_accuracy", _time_to_accuracy),
    ("accuracy_verdicts", _accuracy_verdicts),
    ("changes_tonight", _changes_tonight),
    ("regressions", _regressions),
    ("suspects", _suspects),
    ("table_checks", _table_checks),
    ("cells_not_valid", _cells_not_valid),
    ("retried", _retried),
    ("teardown", _teardown),
    ("manual_runs", _manual_runs),
    ("plots", _plots),
)


def markdown(rep: Report) -> str:
    return "\n".join(line for _, render in SECTIONS for line in render(rep)) + "\n"


def _prediction_lines(section: dict) -> list[str]:
    out = []
    for r in section.get("rows", []):
        counts = ", ".join(str(n) for n in r["counts"])
        out.append(f"- **{r['benchmark']}** on {r['host']} ({r['precision']}; {r['nights']} night(s) at {counts} "
                   f"GPU(s)): " + "; ".join(p["line"] for p in r["predictions"]))
    out = out or ["- none (no valid measured cell yet)"]
    errors = section.get("errors", [])
    out += [f"- frozen predictions of {e['benchmark']}, judged: {e['judged']}, median error "
            + (f"{e['median_abs_points']:.1f} points of efficiency, " if e["median_abs_points"] is not None else "")
            + f"{e['median_abs_pct']:.1f}% of images/s (last: {e['last']})" for e in errors]
    if section.get("rows") and not errors:
        out.append("- no frozen prediction judged yet (a later night that measures its GPU count judges it)")
    return out


def code_span(text: str) -> str:
    """Text from outside (a container's last lines, an exception) as a Markdown code span: shown
    literally in report.md and report.html, never a link, an image or markup. The fence is longer
    than any run of backticks inside; a newline would end the list item, so it is shown as ⏎."""
    import re

    text = text.replace("\r", "").replace("\n", " ⏎ ")
    fence = "`" * (max((len(m) for m in re.findall(r"`+", text)), default=0) + 1)
    return f"{fence} {text} {fence}"


def to_html(md: str, title: str = "scalebench report") -> str:
    """The report's Markdown rendered by markdown-it-py (CommonMark plus tables, raw HTML off) in
    the report template."""
    from markdown_it import MarkdownIt

    body = MarkdownIt("commonmark", {"html": False}).enable("table").render(md)
    return template("report.html").render(title=title, body=body)


def template(name: str):
    import jinja2

    env = jinja2.Environment(loader=jinja2.FileSystemLoader(Path(__file__).parent / "templates"), autoescape=True,
                             undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    return env.get_template(name)


def render_plots(rep: Report, out: Path) -> None:
    """The report's plots into `out` (they draw what was decided; the table checks are not in them)."""
    from scalebench.report import plots

    out.mkdir(parents=True, exist_ok=True)
    plots.render_all(rep, out)


def render(rep: Report, out: Path, plots: bool = True) -> Path:
    """Write the report's files into `out` (and nothing outside it): report.md, report.html,
    table.json and (`plots`; else drawn already by `render_plots`) the plots. Returns the path of
    report.md."""
    if plots:
        render_plots(rep, out)
    out.mkdir(parents=True, exist_ok=True)
    md = markdown(rep)
    (out / REPORT_MD).write_text(md)
    (out / REPORT_HTML).write_text(to_html(md, f"scalebench report {rep.night}"))
    (out / REPORT_TABLE).write_text(json.dumps(rep.to_json(), indent=2, default=str))
    return out / REPORT_MD


INDEX_PAGE_NIGHTS = 400  # the newest nights index.html lists; index.json (the UI's /api/nights) keeps every one


def _index_entry(folder: Path) -> dict:
    t = json.loads((folder / REPORT_TABLE).read_text())
    return {"night": folder.name, "complete": t["complete"], "alerts": len(t["alerts"]), "benchmarks": len(t["rows"])}


def write_index(root: Path, night: str | None = None) -> Path:
    """reports/index.json, every night kept, newest first, with its status and alerts, and
    index.html, the newest INDEX_PAGE_NIGHTS of them. With `night`: that night's entry replaced in
    the index already written (its one table read, not every night's: years of nights stay one
    read); an index missing or unreadable is rebuilt from every night's table."""
    nights = None
    index = root / REPORTS_INDEX_JSON
    if night is not None and index.exists():
        try:
            kept = json.loads(index.read_text())
            nights = [e for e in kept if e["night"] != night] if isinstance(kept, list) else None
        except (OSError, ValueError, KeyError, TypeError):
            nights = None
        if nights is not None and (root / night / REPORT_TABLE).exists():
            nights.append(_index_entry(root / night))
            nights.sort(key=lambda e: e["night"], reverse=True)
    if nights is None:
        nights = [_index_entry(d) for d in sorted((p for p in root.iterdir() if (p / REPORT_TABLE).exists()),
                                                  reverse=True)]
    # compact: json's C encoder (indented, years of nights took the pure-Python one 0.3 s); the UI may
    # read it meanwhile: never half written
    _replace(index, json.dumps(nights))
    _replace(root / REPORTS_INDEX_HTML, template("index.html").render(
        nights=nights[:INDEX_PAGE_NIGHTS], older=max(0, len(nights) - INDEX_PAGE_NIGHTS), report_html=REPORT_HTML))
    return root / REPORTS_INDEX_HTML


def _replace(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text)
    tmp.replace(path)
