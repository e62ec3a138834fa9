"""The app the plugin mounts under /scalebench inside the Airflow UI: four routers of one concern
each, mounted in this order: `browsing` (the pages built per request from the results store),
`history` (a benchmark's nights: its page, the older nights in pages, the export), `triage` (the
alert groups and their actions), `reports` (the nightly report files, whose `/{night}/{name}` must
come last so it reads no other page's path as a night).

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

from fastapi import Depends, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException

from scalebench.orchestration.ui import pages
from scalebench.orchestration.ui.browsing import browsing
from scalebench.orchestration.ui.history import history
from scalebench.orchestration.ui.reports import reports
from scalebench.orchestration.ui.shared import EXPECTED, bases
from scalebench.orchestration.ui.triage import triage

# The pages: scripts, styles, images and fetches from the plugin only, nothing inline, framed only
# by the Airflow UI (same origin). The report files set their own (reports.REPORT_CSP).
PAGE_CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
            "form-action 'self'; frame-ancestors 'self'; base-uri 'none'")


def _is_api(request: Request) -> bool:
    path, root = request.scope.get("path", ""), request.scope.get("root_path", "")
    return (path[len(root):] if root and path.startswith(root) else path).startswith("/api/")


def _refusal(request: Request, status: int, title: str, lines: list[str]) -> Response:
    """A refused request: JSON under /api/, else a page in the pages' style with a way back."""
    if _is_api(request):
        return JSONResponse(status_code=status, content={"detail": lines})
    parts: list[pages.Part] = [pages.text(" ".join(lines) + " ")]
    base = bases(request)[0]
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
    # behind the login: no shared or disk cache keeps a page (a static file under its hash sets its own)
    response.headers.setdefault("Cache-Control", "no-store")
    return response


def _auth():
    from airflow.api_fastapi.core_api.security import requires_authenticated

    return Depends(requires_authenticated())


def create_app() -> FastAPI:
    """The app the plugin mounts: every route behind the Airflow login, the pages' headers, and
    422s that name the parameter. Browsing and triage come first, so their paths are never read
    as a night by the report files' `/{night}/{name}`."""
    app = FastAPI(title="scalebench reports", dependencies=[_auth()], docs_url=None, redoc_url=None, openapi_url=None)
    app.middleware("http")(_headers)
    app.add_exception_handler(RequestValidationError, _invalid)  # type: ignore[arg-type]
    app.add_exception_handler(StarletteHTTPException, _http_error)  # type: ignore[arg-type]
    app.include_router(browsing)
    app.include_router(history)
    app.include_router(triage)
    app.include_router(reports)
    return app
