"""The night's report, written from the store."""
from __future__ import annotations

import os
from pathlib import Path

from scalebench.cli.arguments import Command, arg, night
from scalebench.core.config import ConfigError, Configs


def cmd_report(args, configs: Configs) -> str:
    from scalebench.report.build import write_report
    from scalebench.store.results import Store

    if args.out:
        _writable_folder(Path(args.out), "--out")  # before the work, not after it
    path = write_report(Store(), args.out, night=args.night)
    return f"report written: {path} (and report.html, table.json and plots beside it; index: {path.parent.parent / 'index.html'})"


def _writable_folder(path: Path, option: str) -> None:
    """Refuse a folder option that names a file, or a place this user cannot create or write."""
    if path.exists() and not path.is_dir():
        raise ConfigError(f"{option} {path}: is a file, not a folder; name a folder for the output")
    existing = next((p for p in (path, *path.parents) if p.exists()), Path("/"))
    if not existing.is_dir() or not os.access(existing, os.W_OK | os.X_OK):
        raise ConfigError(f"{option} {path}: {existing} is not writable; name a folder you can write")


REPORT = Command("report", "write the report (Markdown, HTML, plot)", cmd_report, (
    arg("--out", help="output folder (default .state/reports/<night>)"),
    arg("--night", type=night, help="night label, YYYY-MM-DD (default today, UTC)"),
))
