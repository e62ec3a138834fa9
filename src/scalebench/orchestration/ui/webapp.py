"""The report and browsing pages inside the Airflow UI: a FastAPI app the plugin mounts under
/scalebench. The nightly reports (files written by the report DAG), and pages built per request
from the results store: a benchmark's history (night summaries), a night's or a DAG run's cells
with links to their task logs, and two nights compared; each with its CSV and JSON.

Every route requires the Airflow login: the same JWT the UI uses (its `_token` cookie, or an
`Authorization: Bearer` header), checked by Airflow's own auth-manager dependency. A plugin's
FastAPI app is open to anyone unless it asks for this.

Every value a route takes is hostile until validated: each path and query parameter has a pattern,
a length or a range (a mismatch answers 422, an unknown name 404), the pages come from
autoescaping templates (`pages`), and every answer carries a Content-Security-Policy that runs
only the plugin's own static scripts and styles, `X-Content-Type-Options: nosniff` and
`Cache-Control: no-store` (every answer is behind the login). A refusal is a page in the pages'
style (JSON under /api/) that names the parameter and what it must be, never the value sent; a
file is served only where its resolved path lies inside its folder (no link out of it).
"""
from __future__ import annotations

import functools
import json
import re
from pathlib import Path
from typing import Annotated
from urllib.parse import quote

from fastapi import APIRouter, Depends, FastAPI, HTTPException, Path as PathParam, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException

from scalebench_kit.names import REPORT_HTML, REPORTS_INDEX_HTML, REPORTS_INDEX_JSON

from scalebench.core import paths
from scalebench.core.alert_rules import STATES
from scalebench.core.dag_ids import MAINTENANCE_DAG_ID, REPORT_DAG_ID, benchmark_of
from scalebench.orchestration.ui import pages
from scalebench.report.exports import HISTORY_COLUMNS, RESULT_COLUMNS, history_row, result_row

NIGHT = re.compile(r"^[0-9]{4}-[0-9]{2}-[0-9]{2}$")  # ASCII digits: \d takes any script's
# What each parameter may be (ASCII only): a benchmark id as include/configs allows it, a DAG id and
# a run id as Airflow allows them (its default allowed_run_id_pattern), a night, an export format.
NIGHT_VALUE = Annotated[str, PathParam(pattern=NIGHT.pattern, max_length=10)]
BENCHMARK = r"^[a-z0-9_]{1,100}$"
DAG_ID = Annotated[str, Query(pattern=r"^[A-Za-z0-9_.-]{1,250}$", max_length=250)]
RUN_ID = Annotated[str, Query(pattern=r"^[A-Za-z0-9_.~:+-]{1,250}$", max_length=250)]
FORMAT = Annotated[str, PathParam(pattern=r"^(csv|json)$", max_length=4)]
NIGHT_QUERY = Annotated[str | None, Query(pattern=NIGHT.pattern, max_length=10)]
BENCHMARK_QUERY = Annotated[str | None, Query(pattern=r"^[a-z0-9_]{0,100}$", max_length=100)]
FILES = re.compile(r"^[a-z_]+\.(html|png|json|md)$")
MEDIA = {"html": "text/html", "png": "image/png", "json": "application/json", "md": "text/markdown",
         "js": "text/javascript", "css": "text/css"}
STATIC = Path(__file__).parent / "static"
STATIC_FILES = {"history.js": STATIC / "history.js", "pages.js": STATIC / "pages.js", "pages.css": STATIC / "pages.css",
                "uPlot.iife.min.js": STATIC / "vendor" / "uPlot.iife.min.js",
                "uPlot.min.css": STATIC / "vendor" / "uPlot.min.css"}
FORMATS = ("csv", "json")
# The pages: scripts, styles, images and fetches from the plugin only, nothing inline, framed only
# by the Airflow UI (same origin). The nightly report files (static HTML rendered from Markdown with
# raw HTML off) keep their inline style sheet and may run no script at all.
PAGE_CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
            "form-action 'self'; frame-ancestors 'self'; base-uri 'none'")
REPORT_CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src 'self'; frame-ancestors 'self'; base-uri 'none'"


@functools.lru_cache(maxsize=4)
def _store(url: str):
    from scalebench.store.results import Store

    return Store(url)


def store():
    """The results store, opened once per process (its engine pools connections)."""
    return _store(paths.store_url())


# What each parameter must be, in a user's words (a refusal names the parameter and this, never the value).
EXPECTED = {"night": "a night as YYYY-MM-DD", "a": "a night as YYYY-MM-DD", "b": "a night as YYYY-MM-DD",
            "benchmark": "a benchmark id (lowercase letters, digits and _, at most 100)",
            "dag_id": "an Airflow DAG id (letters, digits, _ . -, at most 250)",
            "run_id": "an Airflow run id (letters, digits, _ . ~ : + -, at most 250)",
            "fmt": "csv or json", "nights": "a whole number of nights from 1 to 36500", "all": "true or false",
            "name": "one of the files the page links to"}


def _night(text: str) -> str:
    if not NIGHT.match(text or ""):
        raise HTTPException(422, f"night: expected {EXPECTED['night']}")
    return text


def _is_api(request: Request) -> bool:
    path, root = request.scope.get("path", ""), request.scope.get("root_path", "")
    return (path[len(root):] if root and path.startswith(root) else path).startswith("/api/")


def _refusal(request: Request, status: int, title: str, lines: list[str]) -> Response:
    """A refused request: JSON under /api/, else a page in the pages' style with a way back."""
    if _is_api(request):
        return JSONResponse(status_code=status, content={"detail": lines})
    parts: list[pages.Part] = [pages.text(" ".join(lines) + " ")]
    base = _bases(request)[0]
    parts += [pages.text("Back to "), pages.link(f"{base}/", "the nights"), pages.text(".")]
    return HTMLResponse(pages.explain_page(base, title, parts), status_code=status)


async def _invalid(request: Request, exc: RequestValidationError) -> Response:
    """422 naming each bad parameter and what it must be, without echoing the value back."""
    lines = []
    for e in exc.errors():
        *where, name = [str(x) for x in e.get("loc") or ("request",)]  # e.g. ("query", "dag_id")
        lines.append(f"{' '.join(where + ['parameter'])} {name}: expected {EXPECTED.get(name, 'a valid value')}.")
    return _refusal(request, 422, "Not a valid request", lines)


async def _http_error(request: Request, exc: StarletteHTTPException) -> Response:
    """Our own refusals say what was missing (their texts carry no request value); others
    (Starlette's 404 of an unknown path, 405) say only their status."""
    title = {404: "Not found", 405: "Not allowed"}.get(exc.status_code, "Refused")
    detail = exc.detail if isinstance(exc.detail, str) and exc.detail not in ("Not Found", "Method Not Allowed") else \
        f"{title}: this page has no such address."
    response = _refusal(request, exc.status_code, title, [detail])
    response.headers.update(exc.headers or {})
    return response


async def _headers(request: Request, call_next):
    response = await call_next(request)
    response.headers.setdefault("Content-Security-Policy", PAGE_CSP)  # the report files set REPORT_CSP
    response.headers["X-Content-Type-Options"] = "nosniff"
    response.headers["Cache-Control"] = "no-store"  # behind the login: no shared or disk cache keeps it
    return response


def _inside(root: Path, *parts: str) -> Path | None:
    """root/parts as a file whose resolved path is inside root's (a link may not lead out), else None."""
    path = root.joinpath(*parts)
    try:
        resolved, top = path.resolve(strict=True), root.resolve(strict=True)
    except (OSError, RuntimeError):
        return None
    return resolved if resolved.is_relative_to(top) and resolved.is_file() else None


def _bases(request: Request) -> tuple[str, str]:
    """(this app's mount path, the Airflow UI's root): links work behind any base URL."""
    base = request.scope.get("root_path", "").rstrip("/")
    return base, base.rsplit("/", 1)[0] if "/" in base else ""


def _export(fmt: str, columns: list[str], rows: list[dict], name: str, doc=None) -> Response:
    from scalebench.report.exports import to_csv

    if fmt not in FORMATS:
        raise HTTPException(404, "No such export: csv or json.")
    disposition = {"Content-Disposition": _attachment(f"{name}.{fmt}")}
    if fmt == "json":
        return Response(json.dumps(rows if doc is None else doc, default=str, indent=1), media_type="application/json",
                        headers=disposition)
    return Response(to_csv(columns, rows), media_type="text/csv", headers=disposition)


def _attachment(filename: str) -> str:
    """RFC 6266: an ASCII fallback name (no quote, no path, Latin-1 safe) and the exact name as filename*."""
    fallback = re.sub(r"[^A-Za-z0-9._-]", "_", filename)
    return f"attachment; filename=\"{fallback}\"; filename*=UTF-8''{quote(filename, safe='')}"


def _shifts(benchmark: str) -> list[dict]:
    """The acknowledged shifts of one benchmark (include/configs), as the history page marks them."""
    from scalebench.analysis.regress import load_shifts
    from scalebench.core.config import SHIFTS_FILE, Configs

    path = Configs().config_dir / SHIFTS_FILE
    return [{"since": s.since.isoformat(), "reason": s.reason, "gpus": s.gpus} for s in load_shifts(path)
            if s.benchmark == benchmark] if path.exists() else []


def _auth():
    from airflow.api_fastapi.core_api.security import requires_authenticated

    return Depends(requires_authenticated())


def create_app() -> FastAPI:
    """The app the plugin mounts: every route behind the Airflow login, the pages' headers, and
    422s that name the parameter. The browsing routes come first, so their paths are never read
    as a night by the report files' `/{night}/{name}`."""
    app = FastAPI(title="scalebench reports", dependencies=[_auth()], docs_url=None, redoc_url=None, openapi_url=None)
    app.middleware("http")(_headers)
    app.add_exception_handler(RequestValidationError, _invalid)  # type: ignore[arg-type]
    app.add_exception_handler(StarletteHTTPException, _http_error)  # type: ignore[arg-type]
    app.include_router(browsing)
    app.include_router(reports)
    return app


# The history, night, run and compare pages, their CSV/JSON, and the pages' static files.
browsing = APIRouter()

@browsing.get("/static/{name}")
def static(name: Annotated[str, PathParam(max_length=40)]):
    known = STATIC_FILES.get(name)
    path = _inside(STATIC, str(known.relative_to(STATIC))) if known else None
    if known is None or path is None:
        raise HTTPException(404, "No such static file" + (" (make ui-vendor restores uPlot)." if known else "."))
    return FileResponse(path, media_type=MEDIA[name.rsplit(".", 1)[1]])

@browsing.get("/benchmarks", response_class=HTMLResponse)
def benchmarks(request: Request):
    base, _ = _bases(request)
    return pages.benchmarks_page(base, {b: n[-1] for b, n in store().summary_nights().items()})

@browsing.get("/benchmarks/{benchmark}", response_class=HTMLResponse)
def history(request: Request, benchmark: Annotated[str, PathParam(pattern=BENCHMARK, max_length=100)],
            nights: Annotated[int, Query(ge=1, le=36500)] = pages.HISTORY_NIGHTS, all: bool = False):
    import datetime as dt

    base, _ = _bases(request)
    known = store().summary_nights().get(benchmark, [])
    since = None if all or not known else (dt.date.fromisoformat(known[-1]) - dt.timedelta(days=nights - 1)).isoformat()
    charts = STATIC_FILES["uPlot.iife.min.js"].is_file()
    rows = store().summaries(benchmark=benchmark, since=since, columns=pages.CHART_FIELDS + pages.RUN_FIELDS)
    return pages.history_page(base, benchmark, rows, _shifts(benchmark), charts, since, known[0] if known else None)

@browsing.get("/api/benchmarks/{benchmark}/history.{fmt}")
def history_export(benchmark: Annotated[str, PathParam(pattern=BENCHMARK, max_length=100)], fmt: FORMAT):
    rows = store().summaries(benchmark=benchmark)
    return _export(fmt, HISTORY_COLUMNS, [history_row(r) for r in rows], f"{benchmark}-history", rows)

@browsing.get("/nights/{night}", response_class=HTMLResponse)
def night(request: Request, night: NIGHT_VALUE):
    base, ui = _bases(request)
    earlier = [n for n in _summarized_nights() if n < night]
    return pages.night_page(base, ui, night, _ordered(store().cells(night=night)),
                            (paths.reports_dir() / night / "report.html").is_file(), earlier[-1] if earlier else None)

@browsing.get("/api/nights/{night}/cells.{fmt}")
def night_export(night: NIGHT_VALUE, fmt: FORMAT):
    cells = _ordered(store().cells(night=night))
    return _export(fmt, RESULT_COLUMNS, [result_row(c) for c in cells], f"cells-{night}", cells)

@browsing.get("/runs", response_class=HTMLResponse)
def run(request: Request, dag_id: DAG_ID, run_id: RUN_ID):
    base, ui = _bases(request)
    other = _no_figures(dag_id, base)
    if other:
        return pages.explain_page(base, f"Run {run_id}", other)
    return pages.run_page(base, ui, dag_id, run_id, _run_cells(dag_id, run_id))

@browsing.get("/api/runs/cells.{fmt}")
def run_export(fmt: FORMAT, dag_id: DAG_ID, run_id: RUN_ID):
    cells = _run_cells(dag_id, run_id)
    return _export(fmt, RESULT_COLUMNS, [result_row(c) for c in cells], f"cells-{run_id}", cells)

@browsing.get("/dags")
def dag(request: Request, dag_id: DAG_ID):
    """The DAG tab: a benchmark's DAG (nightly or weekly) opens its history; the others say what they are."""
    base, _ = _bases(request)
    if dag_id == REPORT_DAG_ID:  # its history is the nights' reports
        return RedirectResponse(f"{base}/")
    other = _no_figures(dag_id, base)
    if other:
        return HTMLResponse(pages.explain_page(base, dag_id, other))
    bench = benchmark_of(dag_id) or dag_id
    if bench not in store().summary_nights():
        return HTMLResponse(pages.explain_page(base, dag_id, [
            pages.text("No night of "), pages.code(bench),
            pages.text(" is summarized yet: its history appears once a run of it is recorded.")]))
    return RedirectResponse(f"{base}/benchmarks/{bench}")

@browsing.get("/compare", response_class=HTMLResponse)
def compare(request: Request, a: NIGHT_QUERY = None, b: NIGHT_QUERY = None, benchmark: BENCHMARK_QUERY = None):
    base, _ = _bases(request)
    nights = _summarized_nights()
    if not (a and b) and len(nights) >= 2:
        a, b = nights[-2], nights[-1]
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
    return _export(fmt, COMPARISON_COLUMNS, [r for c in cmp.benchmarks for r in comparison_rows(c)],
                   f"compare-{a}-{b}", asdict(cmp))


# Alert groups: the triage list, a group's page, and its actions (edit access, same-site, a token).
GROUP_ID = Annotated[int, PathParam(ge=1, le=2**31 - 1)]
STATE_QUERY = Annotated[str | None, Query(pattern=r"^[a-z]{0,16}$", max_length=16)]
OWNER_QUERY = Annotated[str | None, Query(max_length=100)]
EXPECTED.update({"group_id": "an alert group number", "state": "a state: open, " + ", ".join(STATES),
                 "owner": "a name of at most 100 characters"})
ALERT_FIELDS = {"state": "one of the states the form offers", "owner": "a name of 1-100 printable characters",
                "note": "at most 2000 characters", "nothing to change": "a state or a note",
                "group": "an existing alert group"}


async def current_user(request: Request):
    """The logged-in Airflow user (the app's login dependency has already checked the token)."""
    from airflow.api_fastapi.core_api.security import bearer_scheme, get_user

    return await get_user(request, None, await bearer_scheme(request))


def may_edit(user) -> bool:
    """Whether the user may change alert groups: edit access to the report DAG, which sends them."""
    from airflow.api_fastapi.app import get_auth_manager
    from airflow.api_fastapi.auth.managers.models.resource_details import DagDetails

    return get_auth_manager().is_authorized_dag(method="PUT", user=user, details=DagDetails(id=REPORT_DAG_ID))


def _action_token(user, group_id: int) -> str:
    """The token a group page's forms carry: tied to the user and the group, keyed by the
    deployment's JWT secret, so a page on another site cannot make one."""
    import hashlib
    import hmac

    from airflow.configuration import conf

    key = conf.get("api_auth", "jwt_secret", fallback="") or conf.get("api", "secret_key", fallback="")
    if not key:
        raise HTTPException(503, "The deployment has no [api_auth] jwt_secret: alert actions are off.")
    return hmac.new(key.encode(), f"{user.get_id()}:{group_id}".encode(), hashlib.sha256).hexdigest()


def _same_site(request: Request) -> bool:
    """A browser's POST from this site: Sec-Fetch-Site same-origin (or absent), and an Origin, when
    sent, of this host."""
    from urllib.parse import urlsplit

    if request.headers.get("sec-fetch-site", "same-origin") not in ("same-origin", "none"):
        return False
    origin = request.headers.get("origin")
    return origin is None or urlsplit(origin).netloc == request.headers.get("host", "")


def _groups():
    from scalebench.store.alert_groups import AlertGroups

    return AlertGroups(store())

@browsing.get("/alerts", response_class=HTMLResponse)
def alerts(request: Request, state: STATE_QUERY = None, benchmark: BENCHMARK_QUERY = None, owner: OWNER_QUERY = None):
    from scalebench.core.alert_rules import AlertStateError

    base, _ = _bases(request)
    try:
        found = _groups().groups(state=state or None, benchmark=benchmark or None, owner=owner or None)
    except AlertStateError:
        raise HTTPException(422, f"state: expected {EXPECTED['state']}.") from None
    return pages.alerts_page(base, found, state, benchmark, owner, STATES)

@browsing.get("/api/alerts.json")
def alerts_export(state: STATE_QUERY = None, benchmark: BENCHMARK_QUERY = None):
    from scalebench.core.alert_rules import AlertStateError

    try:
        return JSONResponse(_groups().groups(state=state or None, benchmark=benchmark or None))
    except AlertStateError:
        raise HTTPException(422, f"state: expected {EXPECTED['state']}.") from None

@browsing.get("/alerts/{group_id}", response_class=HTMLResponse)
def alert(request: Request, group_id: GROUP_ID, user=Depends(current_user)):
    base, ui = _bases(request)
    group = _groups().group(group_id)
    if group is None:
        raise HTTPException(404, "No such alert group (the alerts page lists them).")
    editor = may_edit(user)
    return pages.alert_page(base, ui, group, editor, _action_token(user, group_id) if editor else "", STATES)

@browsing.post("/alerts/{group_id}")
async def alert_action(request: Request, group_id: GROUP_ID, user=Depends(current_user)):
    """Take a group, set its state or add a note; then back to its page. Refused (403) for a user
    without edit access, a request from another site or without the page's token; a bad field is
    a 422 naming it."""
    import hmac

    from scalebench.core.alert_rules import AlertStateError

    if not may_edit(user):
        raise HTTPException(403, "Changing an alert group needs edit access to the report DAG.")
    if not _same_site(request):
        raise HTTPException(403, "Refused: a change must come from this site's own alert page.")
    form = await request.form(max_files=0, max_fields=8, max_part_size=8192)
    token, action = str(form.get("token") or ""), form.get("action")
    if not hmac.compare_digest(token, _action_token(user, group_id)):
        raise HTTPException(403, "Refused: the form's token is missing or not this page's; reload the page.")
    who = str(user.get_name())
    note = str(form.get("note") or "") or None
    try:
        if action == "take":
            _groups().set(group_id, who, state="triaged", owner=who, note=note)
        elif action == "state":
            _groups().set(group_id, who, state=str(form.get("state") or ""), note=note)
        elif action == "note":
            _groups().set(group_id, who, note=note)
        else:
            raise HTTPException(422, "action: expected take, state or note.")
    except AlertStateError as exc:
        field = str(exc).split(":", 1)[0]
        raise HTTPException(404 if field == "group" else 422,
                            f"{field}: expected {ALERT_FIELDS.get(field, 'a valid value')}.") from None
    base, _ = _bases(request)
    return RedirectResponse(f"{base}/alerts/{group_id}", status_code=303)


# The nightly report files written by the report DAG, and the index of nights.
reports = APIRouter()

@reports.get("/", response_class=HTMLResponse)
def index(request: Request):
    page = _inside(paths.reports_dir(), REPORTS_INDEX_HTML)
    if page is None:
        return _no_report_yet(request)
    return FileResponse(page, media_type="text/html", headers={"Content-Security-Policy": REPORT_CSP})


def _no_report_yet(request: Request) -> HTMLResponse:
    return HTMLResponse(pages.explain_page(_bases(request)[0], "scalebench reports", [
        pages.text("No report yet: it is written when a benchmark's run finishes, or by the scalebench_nightly_report "
                   "DAG or "), pages.code("scalebench report"), pages.text(".")]))

@reports.get("/api/nights")
def nights():
    page = paths.reports_dir() / REPORTS_INDEX_JSON
    return JSONResponse(content=json.loads(page.read_text()) if page.exists() else [])

@reports.get("/latest")
def latest(request: Request):
    """The newest night whose folder holds a report (a night folder may exist before its report)."""
    root = paths.reports_dir()
    nights = sorted((p.name for p in root.iterdir() if NIGHT.match(p.name)), reverse=True) if root.is_dir() else []
    found = next((n for n in nights if _inside(root, n, REPORT_HTML)), None)
    if found is None:
        return _no_report_yet(request)
    return RedirectResponse(f"{found}/{REPORT_HTML}")

@reports.get("/{night}/")
def night_page(night: NIGHT_VALUE):
    return RedirectResponse(REPORT_HTML)

@reports.get("/{night}/{name}")
def night_file(night: NIGHT_VALUE, name: Annotated[str, PathParam(pattern=FILES.pattern, max_length=40)]):
    path = _inside(paths.reports_dir(), night, name)
    if path is None:
        raise HTTPException(404, "No such file in that night's report: the nights page lists the reports.")
    return FileResponse(path, media_type=MEDIA[name.rsplit(".", 1)[1]], headers={"Content-Security-Policy": REPORT_CSP})


def _no_figures(dag_id: str, base: str) -> list[pages.Part] | None:
    """What a DAG of ours that records no figure does instead, as the parts of a line of prose
    (None for a benchmark's DAG)."""
    texts: dict[str, list[pages.Part]] = {
        REPORT_DAG_ID: [pages.text("The nightly report DAG writes one night's report from the recorded cells: see "),
                        pages.link(f"{base}/", "the nights"), pages.text(" and "),
                        pages.link(f"{base}/latest", "the latest report"), pages.text(".")],
        MAINTENANCE_DAG_ID: [pages.text("The maintenance DAG prunes old attempt folders and logs and records no "
                                        "figure; its task logs say what it removed.")]}
    return texts.get(dag_id)


def _summarized_nights() -> list[str]:
    """Every night some benchmark has a summary of, oldest first."""
    return sorted({n for ns in store().summary_nights().values() for n in ns})


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
