"""The browsing pages, built per request from the results store: the benchmarks, a night's or a
DAG run's cells with links to their task logs, a DAG's tab, two nights compared; each with its CSV
and JSON; and the pages' own scripts and style. A benchmark's history is `history`'s."""
from __future__ import annotations

from pathlib import Path
from typing import Annotated

from fastapi import APIRouter, HTTPException, Path as PathParam, Query, Request
from fastapi.responses import FileResponse, HTMLResponse, RedirectResponse

from scalebench.core import paths
from scalebench.core.dag_ids import ALLREDUCE_DAG_ID, MAINTENANCE_DAG_ID, REPORT_DAG_ID, benchmark_of
from scalebench.orchestration.ui import pages
from scalebench.orchestration.ui.profile_sections import diff_sections
from scalebench.orchestration.ui.shared import (BENCHMARK_QUERY, EXPECTED, FORMAT, MEDIA, NIGHT,
                                                NIGHT_VALUE, bases, export, inside, store)
from scalebench.report.exports import RESULT_COLUMNS, result_row

DAG_ID = Annotated[str, Query(pattern=r"^[A-Za-z0-9_.-]{1,250}$", max_length=250)]
RUN_ID = Annotated[str, Query(pattern=r"^[A-Za-z0-9_.~:+-]{1,250}$", max_length=250)]
CELL_KEY = Annotated[str, PathParam(pattern=r"^[0-9a-f]{8,64}$", max_length=64)]
NIGHT_QUERY = Annotated[str | None, Query(pattern=NIGHT.pattern, max_length=10)]
STATIC, STATIC_FILES = pages.STATIC, pages.STATIC_FILES

browsing = APIRouter()

@browsing.get("/static/{name}")
def static(name: Annotated[str, PathParam(max_length=40)], v: Annotated[str | None, Query(max_length=16)] = None):
    """A script or style of the pages; kept by the browser for a year when asked for under its
    content's hash (`?v=`, as the pages link it: a new file is a new address), else not kept."""
    known = STATIC_FILES.get(name)
    path = inside(STATIC, str(known.relative_to(STATIC))) if known else None
    if known is None or path is None:
        raise HTTPException(404, "No such static file" + (" (make ui-vendor restores uPlot)." if known else "."))
    cache = {"Cache-Control": "public, max-age=31536000, immutable"} if v and v == pages.static_hash(name) else {}
    return FileResponse(path, media_type=MEDIA[name.rsplit(".", 1)[1]], headers=cache)

@browsing.get("/benchmarks", response_class=HTMLResponse)
def benchmarks(request: Request):
    base, _ = bases(request)
    return pages.benchmarks_page(base, {b: last for b, (_, last) in store().summary_span().items()})

@browsing.get("/nights/{night}", response_class=HTMLResponse)
def night(request: Request, night: NIGHT_VALUE):
    base, ui = bases(request)
    earlier = store().recent_summary_nights(1, before=night)
    return pages.night_page(base, ui, night, _ordered(store().cells(night=night)),
                            (paths.reports_dir() / night / "report.html").is_file(), earlier[0] if earlier else None)

@browsing.get("/api/nights/{night}/cells.{fmt}")
def night_export(night: NIGHT_VALUE, fmt: FORMAT):
    cells = _ordered(store().cells(night=night))
    return export(fmt, RESULT_COLUMNS, [result_row(c) for c in cells], f"cells-{night}", cells)

@browsing.get("/runs", response_class=HTMLResponse)
def run(request: Request, dag_id: DAG_ID, run_id: RUN_ID):
    base, ui = bases(request)
    other = _no_figures(dag_id, base)
    if other:
        return pages.explain_page(base, f"Run {run_id}", other)
    cells = _run_cells(dag_id, run_id)
    return pages.run_page(base, ui, dag_id, run_id, cells, diff_sections(base, _ab_diffs(cells)))


def _ab_diffs(cells: list[dict]) -> list[tuple[str, dict]]:
    """(title, ab_diff) of each A/B of the run whose pair was profiled, by GPU count and precision."""
    from scalebench.analysis.profile_diff import ab_diff
    from scalebench.core.cells import AB_PREVIOUS, RERUN
    from scalebench.store.profiles import cells_profiles

    ab = [c for c in cells if c.get("role") in (AB_PREVIOUS, RERUN)]
    if not ab:
        return []
    profiles = cells_profiles(store().engine, [c["key"] for c in ab])
    out = []
    for gpus, precision in sorted({(c["gpus"], c["precision"]) for c in ab}):
        found = ab_diff([c for c in ab if (c["gpus"], c["precision"]) == (gpus, precision)], profiles)
        if found:
            out.append((f"Where the step's time went: the A/B at {gpus} GPU(s), {precision}", found))
    return out


@browsing.get("/api/cells/{key}/traces/{index}")
def trace(key: CELL_KEY, index: Annotated[int, PathParam(ge=0, le=1000)]):
    """One kept trace of a cell's newest profiled attempt, for download (gzip: Perfetto and
    TensorBoard's profile plugin open it)."""
    from scalebench.core.attempt_folders import find_attempt
    from scalebench.store.profiles import cells_profiles

    cells = store().cells(key=key)
    prof = cells_profiles(store().engine, [key]).get(key) if cells else None
    if not cells or not prof or index >= len(prof["traces"]):
        raise HTTPException(404, "No such trace (a profiled cell's page links its traces).")
    c = cells[0]
    folder = find_attempt(c["dag_id"], c["run_id"], key, prof["attempt"])
    path = inside(folder, prof["traces"][index]) if folder else None
    if path is None:
        raise HTTPException(404, "The trace is no longer on this machine (its attempt folder was pruned or moved).")
    name = f"{c['benchmark']}-{key}-attempt{prof['attempt']}-{Path(prof['traces'][index]).name}"
    return FileResponse(path, media_type="application/gzip", filename=name)

@browsing.get("/api/runs/cells.{fmt}")
def run_export(fmt: FORMAT, dag_id: DAG_ID, run_id: RUN_ID):
    cells = _run_cells(dag_id, run_id)
    return export(fmt, RESULT_COLUMNS, [result_row(c) for c in cells], f"cells-{run_id}", cells)

@browsing.get("/dags")
def dag(request: Request, dag_id: DAG_ID):
    """The DAG tab: a benchmark's DAG (nightly or weekly) opens its history; the others say what they are."""
    base, _ = bases(request)
    if dag_id == REPORT_DAG_ID:  # its history is the nights' reports
        return RedirectResponse(f"{base}/")
    other = _no_figures(dag_id, base)
    if other:
        return HTMLResponse(pages.explain_page(base, dag_id, other))
    bench = benchmark_of(dag_id) or dag_id
    if bench not in store().summary_span(bench):
        return HTMLResponse(pages.explain_page(base, dag_id, [
            pages.text("No night of "), pages.code(bench),
            pages.text(" is summarized yet: its history appears once a run of it is recorded.")]))
    return RedirectResponse(f"{base}/benchmarks/{bench}")

@browsing.get("/compare", response_class=HTMLResponse)
def compare(request: Request, a: NIGHT_QUERY = None, b: NIGHT_QUERY = None, benchmark: BENCHMARK_QUERY = None):
    base, _ = bases(request)
    nights = sorted(store().recent_summary_nights(pages.NIGHTS_MENU))  # the menus: the newest nights, and a and b
    if not (a and b) and len(nights) >= 2:
        a, b = nights[-2], nights[-1]
    nights = sorted(set(nights) | {n for n in (a, b) if n and NIGHT.match(n)})
    cmp, error = _compare(a, b, benchmark) if a and b else (None, "Two summarized nights are needed to compare.")
    return pages.compare_page(base, nights, a, b, benchmark, cmp, error)

@browsing.get("/api/compare.{fmt}")
def compare_export(fmt: FORMAT, a: Annotated[str, Query(pattern=NIGHT.pattern, max_length=10)],
                   b: Annotated[str, Query(pattern=NIGHT.pattern, max_length=10)], benchmark: BENCHMARK_QUERY = None):
    from dataclasses import asdict

    from scalebench.analysis.compare import COMPARISON_COLUMNS, comparison_rows

    cmp, error = _compare(a, b, benchmark)
    if cmp is None:
        raise HTTPException(404, "Nothing to compare: the two nights need a stored run of the same benchmark.")
    return export(fmt, COMPARISON_COLUMNS, [r for c in cmp.benchmarks for r in comparison_rows(c)],
                   f"compare-{a}-{b}", asdict(cmp))


def _night(text: str) -> str:
    if not NIGHT.match(text or ""):
        raise HTTPException(422, f"night: expected {EXPECTED['night']}")
    return text


def _no_figures(dag_id: str, base: str) -> list[pages.Part] | None:
    """What a DAG of ours that records no figure does instead, as the parts of a line of prose
    (None for a benchmark's DAG)."""
    texts: dict[str, list[pages.Part]] = {
        REPORT_DAG_ID: [pages.text("The nightly report DAG writes one night's report from the recorded cells: see "),
                        pages.link(f"{base}/", "the nights"), pages.text(" and "),
                        pages.link(f"{base}/latest", "the latest report"), pages.text(".")],
        MAINTENANCE_DAG_ID: [pages.text("The maintenance DAG prunes old attempt folders and logs and records no "
                                        "figure; its task logs say what it removed.")],
        ALLREDUCE_DAG_ID: [pages.text("The all-reduce DAG measures each host's bus bandwidth per GPU count for the "
                                      "scaling predictions; see "), pages.link(f"{base}/latest", "the latest report"),
                           pages.text("'s section What more GPUs would give.")]}
    return texts.get(dag_id)


def _ordered(cells: list[dict]) -> list[dict]:
    """Cells without a valid result first (what a person opens the page for), then the rest, in store order."""
    return sorted(cells, key=lambda c: c["figure"] is not None)


def _run_cells(dag_id: str, run_id: str) -> list[dict]:
    return _ordered([c for c in store().cells(run_id=run_id) if c["dag_id"] == dag_id])


def _compare(a: str, b: str, benchmark: str | None):
    from scalebench.analysis.compare import CompareError, compare_nights

    a, b = _night(a), _night(b)
    try:
        return compare_nights(store().cells(night=a), store().cells(night=b), a, b, benchmark or None), None
    except CompareError as exc:
        return None, str(exc)
