"""Retention: what grows every night and may go once it is old.

Removed after `retention_days` (fleet.yaml): in each attempt folder every file that is not part
of the attempt's record (checkpoints, work dirs, raw framework logs; the record is the kit's
ATTEMPT_FILES), and Airflow's task log files. Never touched: the results store's rows, the
record files, the nightly reports, and any attempt of a cell that holds a device lease (it is
running). Age is a file's modification time; at least one day.
"""
from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

from scalebench_kit.names import ATTEMPT_FILES, CELL_SPEC_FILE

DAY_S = 86400
MIN_DAYS = 1.0  # younger files may belong to a cell that is still writing them


@dataclass
class PruneResult:
    files: list[Path] = field(default_factory=list)
    bytes: int = 0

    def add(self, path: Path) -> None:
        self.files.append(path)
        self.bytes += path.stat().st_size

    def summary(self, days: float, dry_run: bool) -> dict:
        return {"older_than_days": days, "dry_run": dry_run, "files": len(self.files),
                "megabytes": round(self.bytes / 2**20, 2)}


def _cell_key(attempt: Path) -> str | None:
    try:
        return json.loads((attempt / CELL_SPEC_FILE).read_text())["cell"]["key"]
    except (OSError, ValueError, KeyError, TypeError):
        return None


def old_files(results: Path, airflow_logs: Path | None, days: float, now: float | None = None,
              held: frozenset[str] | set[str] = frozenset()) -> PruneResult:
    """What pruning at this age would remove; `held`: keys of cells holding a device lease (running)."""
    cutoff = (now or time.time()) - days * DAY_S
    found = PruneResult()
    for attempt in sorted(results.glob("*/*/*/attempt-*")) if results.exists() else []:
        if held and _cell_key(attempt) in held:
            continue
        for path in sorted(attempt.rglob("*")):
            if path.is_file() and not path.is_symlink() and path.relative_to(attempt).as_posix() not in ATTEMPT_FILES \
                    and path.stat().st_mtime < cutoff:
                found.add(path)
    if airflow_logs is not None and airflow_logs.exists():
        for path in sorted(airflow_logs.rglob("*.log")):
            if path.is_file() and not path.is_symlink() and path.stat().st_mtime < cutoff:
                found.add(path)
    return found


def prune(results: Path, airflow_logs: Path | None, days: float, dry_run: bool = False,
          held: frozenset[str] | set[str] = frozenset()) -> PruneResult:
    if isinstance(days, bool) or not isinstance(days, (int, float)) or days < MIN_DAYS:
        raise ValueError(f"prune: older-than must be a number of days >= {MIN_DAYS:g}, got {days!r}")
    if not isinstance(dry_run, bool):
        raise ValueError(f"prune: dry_run must be true or false, got {dry_run!r}")
    found = old_files(results, airflow_logs, days, held=held)
    if not dry_run:
        for path in found.files:
            path.unlink(missing_ok=True)
        for root in (results, airflow_logs):
            if root is not None and root.exists():
                _remove_empty_dirs(root)
    return found


def _remove_empty_dirs(root: Path) -> None:
    """Folders emptied by pruning, deepest first; never the root, never an attempt folder. rmdir
    only: a folder that gained a file meanwhile stays."""
    for folder, _, _ in sorted(os.walk(root), key=lambda w: -len(Path(w[0]).parts)):
        path = Path(folder)
        if path != root and not path.name.startswith("attempt-"):
            try:
                path.rmdir()
            except OSError:  # not empty (or not ours to remove): kept
                pass


def held_cells() -> set[str]:
    """Keys of the cells that hold a device lease now (running): prune leaves their attempts alone."""
    from scalebench.store.leases import LeaseManager

    return {row.cell_key for row in LeaseManager().holders()}
