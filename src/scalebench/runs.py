"""Per-run folders on disk: where each attempt's cell.json, metrics.json and logs live."""
from __future__ import annotations

import re
import subprocess
from functools import lru_cache
from pathlib import Path

from . import paths

FAILURE_FILE = "failure.json"
VALIDATION_FILE = "validation.json"
PLACEMENT_FILE = "placement.json"  # written by the operator: device ids, timing policy, co-tenants


def night_of(dag_run) -> str:
    """The night a DAG run belongs to (ISO date, UTC): its logical date, or when it was due."""
    import datetime as dt

    when = dag_run.logical_date or dag_run.run_after
    return when.astimezone(dt.timezone.utc).date().isoformat()


def safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", name)


def run_dir(dag_id: str, run_id: str) -> Path:
    return paths.results_dir() / dag_id / safe(run_id)


def attempt_dir(cell: dict, attempt: int) -> Path:
    return run_dir(cell["dag_id"], cell["run_id"]) / cell["cell_id"] / f"attempt-{attempt}"


@lru_cache(maxsize=1)
def git_revision() -> str:
    try:
        out = subprocess.run(["git", "-C", str(paths.PROJECT_DIR), "rev-parse", "HEAD"], capture_output=True,
                             text=True, timeout=10)
        rev = out.stdout.strip()
        if out.returncode == 0 and rev:
            dirty = subprocess.run(["git", "-C", str(paths.PROJECT_DIR), "status", "--porcelain", "--untracked-files=no"],
                                   capture_output=True, text=True, timeout=10).stdout.strip()
            return rev + ("-dirty" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        pass
    return "unknown"
