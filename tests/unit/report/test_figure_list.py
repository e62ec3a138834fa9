"""The history's figures are declared once (core.figures): every place that shows them follows the
list, and each is read from the report's own row, so a history point and its night's report agree."""
import json
import re
from dataclasses import fields

import pytest

from scalebench.core.figures import FIGURE_NAMES, HISTORY_FIGURES
from scalebench.report.exports import HISTORY_COLUMNS, history_row
from scalebench.report.model import Options, Row
from scalebench.report.render import detail_columns, markdown
from scalebench.report.summary import summarize_night
from scalebench.store.results import Store
from tests.unit.report.test_report import doc_for, record

NIGHT = "2026-11-28"


def test_every_figure_names_a_field_of_the_reports_row_and_is_unique():
    row_fields = {f.name for f in fields(Row)}
    assert len(set(FIGURE_NAMES)) == len(FIGURE_NAMES)
    for f in HISTORY_FIGURES:
        assert re.fullmatch(r"[a-z][a-z0-9_]*", f.name), f.name  # a column, an export header and a JS field
        assert f.source.split(".")[0] in row_fields, f"{f.name}: source {f.source} is no field of report.model.Row"
        assert f.spread is None or f.spread[0] in row_fields, f"{f.name}: spread {f.spread}"
        assert f.text(None) == "–" and f.text(0.5)


@pytest.fixture
def night():
    store = Store()
    for rep in (1, 2):
        record(store, 1, 3, rep, 100 + rep)
        record(store, 2, 3, rep, 60 + rep)
    summarize_night(store, "resnet50_keras_cifar10", NIGHT)
    return store, doc_for(store, expected=["resnet50_keras_cifar10"])


def test_a_summary_holds_every_figure_as_the_nights_report_row_states_it(night):
    store, rep = night
    [row] = rep.rows
    for s in store.summaries(night=NIGHT):
        assert set(s["figures"]) == set(FIGURE_NAMES)
        for f in HISTORY_FIGURES:
            assert s["figures"][f.name] == pytest.approx(row.figure(f, s["gpus"])), f.name
            if s["gpus"] >= f.from_gpus:
                assert s["figures"][f.name] is not None, f.name


def test_the_export_the_detail_table_and_the_history_page_follow_the_list(night, monkeypatch):
    from scalebench.orchestration.ui import pages

    store, rep = night
    summaries = store.summaries()
    assert [c for c in HISTORY_COLUMNS if c in FIGURE_NAMES] == list(FIGURE_NAMES)
    flat = history_row(summaries[-1])
    assert all(flat[f.name] == summaries[-1]["figures"][f.name] for f in HISTORY_FIGURES)
    headers = [c.header for c in detail_columns(rep)]
    for f in HISTORY_FIGURES:
        assert any(h.startswith(f.label) for h in headers), f.label
    assert "| " + " | ".join(headers) + " |" in markdown(rep)
    html = pages.history_page("/scalebench", "resnet50_keras_cifar10", summaries, [], True, None, NIGHT)
    doc = json.loads(re.search(r'id="history-data">(.*?)</script>', html, re.S).group(1))
    assert [f["name"] for f in doc["figures"]] == [f.name for f in HISTORY_FIGURES if f.chart]
    assert all(name in doc["fields"] for name in FIGURE_NAMES)
    for f in HISTORY_FIGURES:
        assert f"<th>{f.label}</th>" in html and (f'id="chart-{f.name}"' in html) == f.chart


def test_scalebench_history_prints_the_pages_table_in_the_terminal_and_its_downloads(night, capsys):
    import csv
    import io

    from scalebench.cli import main

    store, _ = night
    assert main(["history", "resnet50_keras_cifar10", "--all"]) == 0
    header, one, two = capsys.readouterr().out.splitlines()
    assert header.split()[:3] == ["night", "GPUs", "precision"] and all(f.label in header for f in HISTORY_FIGURES)
    assert two.split()[:2] == [NIGHT, "2"] and "60.6%" in two and "10.0%" in two  # relative time, sync share
    assert main(["history", "resnet50_keras_cifar10", "--all", "--gpus", "2", "-o", "csv"]) == 0
    [row] = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert float(row["relative_time"]) == pytest.approx(61.5 / 101.5) and float(row["sync_share"]) == pytest.approx(0.1)
    import datetime as dt

    older = (dt.datetime.now(dt.timezone.utc).date() - dt.date.fromisoformat(NIGHT)).days  # a window that ends before the sample's night
    assert main(["history", "resnet50_keras_cifar10", "--nights", str(older)]) == 0
    assert capsys.readouterr().out.startswith("no night of resnet50_keras_cifar10 summarized since ")
