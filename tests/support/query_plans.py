"""Which queries read a whole table: every SELECT an engine runs while recorded, explained by
SQLite's own planner (EXPLAIN QUERY PLAN). A query that scans a table that grows with the nights
(cells, attempts, summaries, runs, predictions, profiles) costs time in proportion to all the years
of nights, not to the nights a report or a page shows. Shared by the report's test and
bench/report_scale.py."""
from __future__ import annotations

import contextlib
import re
from typing import Iterator

from sqlalchemy import event

# the tables that grow with every night (the others hold one row per benchmark, host or group)
GROWING = ("cells", "attempts", "night_summaries", "benchmark_runs", "predictions", "attempt_profiles", "profile_ops")


@contextlib.contextmanager
def recorded(engine) -> Iterator[list[tuple[str, object]]]:
    """The (statement, parameters) of every SELECT run on `engine` inside the block."""
    seen: list[tuple[str, object]] = []

    def record(conn, cursor, statement, parameters, context, executemany):
        if statement.lstrip().upper().startswith("SELECT") and not executemany:
            seen.append((statement, parameters))

    event.listen(engine, "before_cursor_execute", record)
    try:
        yield seen
    finally:
        event.remove(engine, "before_cursor_execute", record)


def whole_table_scans(engine, queries: list[tuple[str, object]]) -> list[str]:
    """'<table>: <the query's first line>' for each recorded query whose plan scans a growing table
    (SQLite's 'SCAN <table>', with or without a covering index: both read every row) or searches it
    by its benchmark alone (every night of that benchmark's years). A lone min() or max() over an
    index is one seek (the planner's text does not say so): not flagged."""
    out = []
    with engine.connect() as conn:
        raw = conn.connection.driver_connection
        for statement, parameters in queries:
            if re.match(r"SELECT (min|max)\([\w.]+\) AS \w+ FROM \w+( WHERE|$)", " ".join(statement.split())):
                continue
            plan = raw.execute("EXPLAIN QUERY PLAN " + statement, parameters or ()).fetchall()
            for row in plan:
                m = re.match(r"SCAN (\w+)", row[-1]) or re.match(r"SEARCH (\w+) USING (?:COVERING )?INDEX \w+ "
                                                                 r"\(benchmark=\?\)$", row[-1])
                if m and m.group(1) in GROWING:
                    out.append(f"{m.group(1)}: {' '.join(statement.split())[:160]} [{row[-1]}]")
    return sorted(set(out))
