"""Where a run's files live on disk: results/<dag_id>/<run_id>/<cell_id>/attempt-<n>/, one
folder per try of a cell, holding the files named in scalebench_kit.names."""
from __future__ import annotations

import re
from pathlib import Path

from scalebench.core import paths


def safe(name: str) -> str:
    """A name usable as a folder or DAG id: anything but letters, digits, _ . - becomes _."""
    return re.sub(r"[^A-Za-z0-9_.-]", "_", name)


def run_dir(dag_id: str, run_id: str) -> Path:
    return paths.results_dir() / dag_id / safe(run_id)


def attempt_dir(cell: dict, attempt: int) -> Path:
    return run_dir(cell["dag_id"], cell["run_id"]) / cell["cell_id"] / f"attempt-{attempt}"
