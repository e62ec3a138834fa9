"""Figures as rows a program reads: the stored cells (`scalebench results`, a night's and a run's
page) and the night summaries (a benchmark's history page, `scalebench history`), each with its
column list, and CSV; and the history as a person reads it (`history_table`: the page's table and
the terminal's)."""
from __future__ import annotations

import csv
import io
import json
from typing import Any, Callable, Iterable, Iterator, Mapping, Sequence

from scalebench.core.figures import FIGURE_NAMES, HISTORY_FIGURES, FigureField
from scalebench.core.records import NightSummary
from scalebench.core.tables import Column, Link

RESULT_COLUMNS = ["night", "benchmark", "run_id", "cell", "status", "train_s", "attempt", "detail"]
_LEAD = ["night", "benchmark", "gpus", "precision", "run_id", "run_type", "profile", "host", "cells", "valid",
         "retried", "reruns", "basis", *FIGURE_NAMES]  # a history CSV's first columns, stored as they are
HISTORY_COLUMNS = [*_LEAD, "relative_time_ci_low", "relative_time_ci_high", "image_digest", "marks"]
_SUMMARY_FIELDS = [k for k in HISTORY_COLUMNS  # the columns a summary holds as they are
                   if k not in (*FIGURE_NAMES, "relative_time_ci_low", "relative_time_ci_high", "marks")]
# what a streamed history CSV reads (Store.summary_arrays(benchmark, CSV_JSON, CSV_PLAIN)): these
# columns as stored, then these JSON columns gathered by the database into one array a row
CSV_PLAIN = (*_LEAD, "image_digest")
CSV_JSON = ("relative_time_ci", "marks", "metrics", "step_shares")


def result_row(c: Mapping[str, Any]) -> dict:
    """One cell: its figure when valid; else the last attempt's class, exit code and message."""
    row = {"night": c["night"], "benchmark": c["benchmark"], "run_id": c["run_id"], "cell": c["label"], "status": c["status"],
           "train_s": None, "attempt": None, "detail": ""}
    if c["figure"]:
        f = c["figure"]
        crash = f"; then {f['reason']}, exit code {f['exit_code']}" if f.get("reason") == "teardown_crash" else ""
        return row | {"train_s": round(f["train_s"], 2), "attempt": f"{f['attempt']}",
                      "detail": f"{f['images_per_s']:.1f} images/s{crash}"}
    if not c["attempts"]:
        return row | {"detail": "never started"}
    last = c["attempts"][-1]
    code = "none" if last["exit_code"] is None else last["exit_code"]
    return row | {"attempt": f"{last['attempt']} of {len(c['attempts'])}",
                  "detail": f"{last['reason']}, exit code {code}: {last['message']}"}


def history_row(s: NightSummary) -> dict:
    """One night summary, flat: each figure, metric and step share its own column (<figure>,
    metric_<name>, share_<part>)."""
    ci = s.get("relative_time_ci") or (None, None)
    row: dict[str, Any] = {k: s.get(k) for k in _SUMMARY_FIELDS} | dict(s["figures"])
    row |= {"relative_time_ci_low": ci[0], "relative_time_ci_high": ci[1],
            "marks": "; ".join(f"{m['kind']}: {m['text']}" for m in s.get("marks") or [])}
    row |= {f"metric_{k}": v for k, v in (s.get("metrics") or {}).items()}
    return row | {f"share_{k}": v for k, v in (s.get("step_shares") or {}).items()}


def history_table(night_links: Callable[[NightSummary], list[Link]] | None = None) -> list[Column[NightSummary]]:
    """A history as a person reads it, one line per night, GPU count and precision: who ran, on which
    basis, every figure of core.figures, the cells. `night_links`: where a page links a night."""
    def figure(f: FigureField) -> Column[NightSummary]:
        return Column(f.label, lambda s: f.text(s["figures"][f.name]), numeric=True)
    return [Column("night", lambda s: s["night"], links=night_links),
            Column("GPUs", lambda s: s["gpus"], numeric=True), Column("precision", lambda s: s["precision"]),
            Column("run", lambda s: s["run_id"]), Column("timed by", lambda s: s.get("basis") or "–"),
            *map(figure, HISTORY_FIGURES), Column("valid cells", lambda s: f"{s['valid']}/{s['cells']}", numeric=True),
            Column("image", lambda s: (s.get("image_digest") or "")[:19])]


def to_csv(columns: list[str], rows: Sequence[Mapping[str, Any]], extra: bool = True) -> str:
    """CSV with `columns` first, then (`extra`) any other key the rows carry (metrics, shares), in
    first-seen order; a list becomes its items joined by spaces."""
    more = [k for r in rows for k in r if k not in columns] if extra else []
    header = columns + list(dict.fromkeys(more))
    buf = io.StringIO()
    w = csv.DictWriter(buf, header, extrasaction="ignore", lineterminator="\n")
    w.writeheader()
    w.writerows({k: " ".join(map(str, v)) if isinstance(v, (list, tuple)) else v for k, v in r.items()} for r in rows)
    return buf.getvalue()


HEADER_SAMPLE = 1000  # the newest summaries whose metric and share names head a streamed history CSV


def history_header(newest: Iterable[Mapping[str, Any]]) -> list[str]:
    """A streamed history CSV's columns, fixed before its first row: HISTORY_COLUMNS, then
    metric_<name> and share_<part> for each name the `newest` summaries carry (first seen first),
    then `other`: any other metric or share an older night carries, as name=value pairs (none is
    left out)."""
    more: dict[str, None] = {}
    for s in newest:
        more |= {f"metric_{k}": None for k in s.get("metrics") or {}}
        more |= {f"share_{k}": None for k in s.get("step_shares") or {}}
    return HISTORY_COLUMNS + [k for k in more if k not in HISTORY_COLUMNS] + ["other"]


def history_rows(rows: Iterable[Sequence[Any]], header: list[str]) -> Iterator[list[Any]]:
    """Each summary as a CSV row under `header` (history_header), the history_row values, from
    the rows `Store.summary_arrays(benchmark, CSV_JSON, CSV_PLAIN)` reads: CSV_PLAIN's values, then
    the JSON text of CSV_JSON's (one decode a row, not one a column: years of nights streamed)."""
    at = {k: i for i, k in enumerate(header)}
    lead = len(_LEAD)
    pad = [None] * (len(header) - len(HISTORY_COLUMNS))
    other = at["other"]
    for r in rows:
        ci, marks, metrics, shares = json.loads(r[-1])
        row = [*r[:lead], *(ci or (None, None)), r[lead], "; ".join(f"{m['kind']}: {m['text']}" for m in marks or []),
               *pad]
        rest: list[str] = []
        for prefix, values in (("metric_", metrics), ("share_", shares)):
            for k, v in (values or {}).items():
                col = at.get(prefix + k)
                if col is None:
                    rest.append(f"{prefix}{k}={v}")
                else:
                    row[col] = v
        row[other] = "; ".join(rest)
        yield row


def csv_chunks(header: list[str], rows: Iterable[Sequence[Any]], per_chunk: int = 2000) -> Iterator[str]:
    """CSV text of `rows` (lists in `header`'s order) in chunks of `per_chunk` rows: a download
    that starts before the last row is read."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(header)
    for i, r in enumerate(rows, 1):
        w.writerow(r)
        if i % per_chunk == 0:
            yield buf.getvalue()
            buf.seek(0)
            buf.truncate()
    yield buf.getvalue()
