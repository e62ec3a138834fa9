"""Where a run's files live on disk: results/<dag_id>/<run_id>/<cell_id>/attempt-<n>/, one
folder per try of a cell, holding the files named in scalebench_kit.names."""
from __future__ import annotations

import re
from pathlib import Path

from scalebench.core import paths


MAX_NAME = 200  # characters of a name that becomes one folder (file systems allow 255 bytes)


class UnsafeName(ValueError):
    """A name (a run id, a DAG id) that cannot become a folder: it says which and why."""


def safe(name: str) -> str:
    """A name usable as a folder or DAG id: anything but letters, digits, _ . - becomes _ (the
    same name always gives the same folder)."""
    return re.sub(r"[^A-Za-z0-9_.-]", "_", name)


def segment(name: str, what: str = "run id") -> str:
    """`name` as one folder below its parent, or UnsafeName: never empty, never `.` or `..` (or
    only dots: a folder outside or beside its own), at most MAX_NAME characters."""
    out = safe(name)
    if not out or set(out) == {"."}:
        raise UnsafeName(f"{what} {name!r} cannot name a folder: it would be "
                         f"{'empty' if not out else 'the folder ' + repr(out) + ' (outside its own)'}")
    if len(out) > MAX_NAME:
        raise UnsafeName(f"{what} {name[:40]!r}... is {len(name)} characters; at most {MAX_NAME} name a folder")
    return out


def run_dir(dag_id: str, run_id: str) -> Path:
    return paths.results_dir() / segment(dag_id, "DAG id") / segment(run_id)


def attempt_dir(cell: dict, attempt: int) -> Path:
    return run_dir(cell["dag_id"], cell["run_id"]) / cell["cell_id"] / f"attempt-{attempt}"
