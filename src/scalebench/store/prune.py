"""Retention: what grows every night and may go once it is old.

Removed after `retention_days` (fleet.yaml): in each attempt folder every file that is not part
of the attempt's record (checkpoints, work dirs, raw framework logs; the record is the kit's
ATTEMPT_FILES), and Airflow's task log files. Never touched: the results store's rows, the
record files, the nightly reports. Age is a file's modification time.
"""
from __future__ import annotations

import os
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path

from scalebench_kit.names import ATTEMPT_FILES

DAY_S = 86400


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


def old_files(results: Path, airflow_logs: Path | None, days: float, now: float | None = None) -> PruneResult:
    """What pruning at this age would remove."""
    cutoff = (now or time.time()) - days * DAY_S
    found = PruneResult()
    for attempt in sorted(results.glob("*/*/*/attempt-*")) if results.exists() else []:
        for path in sorted(attempt.rglob("*")):
            if path.is_file() and not path.is_symlink() and path.relative_to(attempt).as_posix() not in ATTEMPT_FILES \
                    and path.stat().st_mtime < cutoff:
                found.add(path)
    if airflow_logs is not None and airflow_logs.exists():
        for path in sorted(airflow_logs.rglob("*.log")):
            if path.is_file() and not path.is_symlink() and path.stat().st_mtime < cutoff:
                found.add(path)
    return found


def prune(results: Path, airflow_logs: Path | None, days: float, dry_run: bool = False) -> PruneResult:
    if days <= 0:
        raise ValueError(f"prune: older-than must be a positive number of days, got {days}")
    found = old_files(results, airflow_logs, days)
    if not dry_run:
        for path in found.files:
            path.unlink(missing_ok=True)
        for root in (results, airflow_logs):
            if root is not None and root.exists():
                _remove_empty_dirs(root)
    return found


def _remove_empty_dirs(root: Path) -> None:
    """Folders emptied by pruning, deepest first; never the root, never an attempt folder."""
    for folder, _, _ in sorted(os.walk(root), key=lambda w: -len(Path(w[0]).parts)):
        path = Path(folder)
        if path != root and not path.name.startswith("attempt-") and not any(path.iterdir()):
            shutil.rmtree(path, ignore_errors=True)
