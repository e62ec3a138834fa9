"""Measured points from a table a person brings (`scalebench predict --from-table`, the published
tables of bench/public_scaling.csv): one CSV, several tables in it, every bad value refused with
the file, line and column."""
from __future__ import annotations

import math
from dataclasses import replace

from scalebench.analysis.prediction import Point

TABLE_COLUMNS = ("gpus", "hosts", "images_per_s", "per_gpu_batch", "step_s", "compute_s", "data_wait_s", "sync_s",
                 "params")


def points_from_csv(text: str, where: str) -> tuple[dict[str, list[Point]], dict[str, int]]:
    """Measured points from a CSV table (columns: gpus, images_per_s, and where known hosts,
    per_gpu_batch, step_s, compute_s, data_wait_s, sync_s, params; a `table` column names several
    tables in one file, `source` says where a row comes from): ({table: points}, {table: params}).
    ValueError naming the file, line and column on a bad value."""
    import csv
    import io

    rows = list(csv.DictReader(io.StringIO(text)))
    if not rows or "gpus" not in rows[0] or "images_per_s" not in rows[0]:
        raise ValueError(f"{where}: expected a CSV with at least the columns gpus and images_per_s "
                         f"(and optionally {', '.join(TABLE_COLUMNS[3:])}, table, source)")
    tables: dict[str, list[Point]] = {}
    params: dict[str, int] = {}
    for line, row in enumerate(rows, start=2):
        def number(col: str, whole: bool = False, required: bool = False, row=row, line=line) -> float | None:
            return _cell(row.get(col), f"{where}: line {line}: column {col}", whole, required,
                         zero=col in ("data_wait_s", "sync_s"))
        name = (row.get("table") or "").strip() or "table"
        gpus, hosts = number("gpus", True, True), number("hosts", True) or 1.0
        assert gpus is not None
        point = Point(int(gpus), number("images_per_s", required=True) or 0.0, int(hosts), number("per_gpu_batch"),
                      number("step_s"), number("compute_s"), number("data_wait_s"), number("sync_s"))
        if point.step_s is not None and point.compute_s is not None:
            point = replace(point, other_s=max(0.0, point.step_s - point.compute_s - (point.data_wait_s or 0.0)
                                               - (point.sync_s or 0.0)))
        tables.setdefault(name, []).append(point)
        if number("params", True):
            params[name] = int(number("params", True) or 0)
    return tables, params


def _cell(text: str | None, where: str, whole: bool, required: bool, zero: bool) -> float | None:
    """One number of a table; ValueError naming where it is and what it must be."""
    text = (text or "").strip()
    if not text:
        if required:
            raise ValueError(f"{where} is empty; expected a number")
        return None
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"{where}: {text!r} is not a number") from None
    if not math.isfinite(value) or value < 0 or value == 0 and not zero or whole and value != int(value):
        raise ValueError(f"{where}: {text!r} must be a {'whole ' if whole else ''}number above 0")
    return value
