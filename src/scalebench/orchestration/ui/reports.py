"""The nightly report files the report DAG writes (each night's report.html, its plots and
table), the index of nights and the latest report. The report files are static HTML rendered from
Markdown with raw HTML off: served with a policy that runs no script."""
from __future__ import annotations

import json
import re
from typing import Annotated

from fastapi import APIRouter, HTTPException, Path as PathParam, Request
from fastapi.responses import FileResponse, HTMLResponse, JSONResponse, RedirectResponse, Response

from scalebench_kit.names import REPORT_HTML, REPORTS_INDEX_HTML, REPORTS_INDEX_JSON

from scalebench.core import paths
from scalebench.orchestration.ui import pages
from scalebench.orchestration.ui.shared import MEDIA, NIGHT, NIGHT_VALUE, bases, inside

FILES = re.compile(r"^[a-z_]+\.(html|png|json|md)$")
REPORT_CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src 'self'; frame-ancestors 'self'; base-uri 'none'"

reports = APIRouter()

@reports.get("/", response_class=HTMLResponse)
def index(request: Request):
    page = inside(paths.reports_dir(), REPORTS_INDEX_HTML)
    if page is None:
        return _no_report_yet(request)
    return FileResponse(page, media_type="text/html", headers={"Content-Security-Policy": REPORT_CSP})


def _no_report_yet(request: Request) -> HTMLResponse:
    return HTMLResponse(pages.explain_page(bases(request)[0], "scalebench reports", [
        pages.text("No report yet: it is written when a benchmark's run finishes, or by the scalebench_nightly_report "
                   "DAG or "), pages.code("scalebench report"), pages.text(".")]))

@reports.get("/api/nights")
def nights():
    page = paths.reports_dir() / REPORTS_INDEX_JSON  # written whole by the report (render.write_index): served as it is
    return Response(page.read_bytes(), media_type="application/json") if page.exists() else JSONResponse(content=[])

@reports.get("/latest")
def latest(request: Request):
    """The newest night whose folder holds a report (a night folder may exist before its report):
    the index's newest night, else (no index yet) the folders' newest."""
    root = paths.reports_dir()
    try:
        indexed = [e["night"] for e in json.loads((root / REPORTS_INDEX_JSON).read_text())[:5]]
    except (OSError, ValueError, KeyError, TypeError):
        indexed = []
    found = next((n for n in indexed if isinstance(n, str) and NIGHT.match(n) and inside(root, n, REPORT_HTML)), None)
    if found is None:
        nights = sorted((p.name for p in root.iterdir() if NIGHT.match(p.name)), reverse=True) if root.is_dir() else []
        found = next((n for n in nights if inside(root, n, REPORT_HTML)), None)
    if found is None:
        return _no_report_yet(request)
    return RedirectResponse(f"{found}/{REPORT_HTML}")

@reports.get("/{night}/")
def night_page(night: NIGHT_VALUE):
    return RedirectResponse(REPORT_HTML)

@reports.get("/{night}/{name}")
def night_file(night: NIGHT_VALUE, name: Annotated[str, PathParam(pattern=FILES.pattern, max_length=40)]):
    path = inside(paths.reports_dir(), night, name)
    if path is None:
        raise HTTPException(404, "No such file in that night's report: the nights page lists the reports.")
    return FileResponse(path, media_type=MEDIA[name.rsplit(".", 1)[1]], headers={"Content-Security-Policy": REPORT_CSP})
