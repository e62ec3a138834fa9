"""The report pages inside the Airflow UI: a FastAPI app the plugin mounts under /scalebench.

Every route requires the Airflow login: the same JWT the UI uses (its `_token` cookie, or an
`Authorization: Bearer` header), checked by Airflow's own auth-manager dependency. A plugin's
FastAPI app is open to anyone unless it asks for this.
"""
from __future__ import annotations

import json
import re

from fastapi import Depends, FastAPI, HTTPException
from fastapi.responses import FileResponse, HTMLResponse, JSONResponse, RedirectResponse

from scalebench_kit.names import REPORT_HTML, REPORTS_INDEX_HTML, REPORTS_INDEX_JSON

from scalebench.core import paths

NIGHT = re.compile(r"^\d{4}-\d{2}-\d{2}$")
FILES = re.compile(r"^[a-z_]+\.(html|png|json|md)$")
MEDIA = {"html": "text/html", "png": "image/png", "json": "application/json", "md": "text/markdown"}


def _auth():
    from airflow.api_fastapi.core_api.security import requires_authenticated

    return Depends(requires_authenticated())


def create_app() -> FastAPI:
    app = FastAPI(title="scalebench reports", dependencies=[_auth()], docs_url=None, redoc_url=None, openapi_url=None)
    root = paths.reports_dir

    @app.get("/", response_class=HTMLResponse)
    def index():
        page = root() / REPORTS_INDEX_HTML
        if not page.exists():
            return HTMLResponse("<h1>scalebench reports</h1><p>No report yet: run the scalebench_nightly_report DAG "
                                "or <code>scalebench report</code>.</p>")
        return FileResponse(page, media_type="text/html")

    @app.get("/api/nights")
    def nights():
        page = root() / REPORTS_INDEX_JSON
        return JSONResponse(content=json.loads(page.read_text()) if page.exists() else [])

    @app.get("/latest")
    def latest():
        found = sorted(p.name for p in root().glob("*") if NIGHT.match(p.name)) if root().exists() else []
        if not found:
            raise HTTPException(404, "no report yet")
        return RedirectResponse(f"{found[-1]}/report.html")

    @app.get("/{night}/")
    def night_page(night: str):
        return RedirectResponse(REPORT_HTML)

    @app.get("/{night}/{name}")
    def night_file(night: str, name: str):
        if not NIGHT.match(night) or not FILES.match(name):
            raise HTTPException(404, "not a report file")
        path = root() / night / name
        if not path.is_file():
            raise HTTPException(404, f"no {name} for night {night}")
        return FileResponse(path, media_type=MEDIA[name.rsplit(".", 1)[1]])

    return app
