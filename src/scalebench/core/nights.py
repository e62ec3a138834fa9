"""Which night a thing belongs to: the one definition of a night (an ISO date, UTC)."""
from __future__ import annotations

import datetime as dt
from typing import Any, Mapping, Sequence

from scalebench.core.cells import ACCURACY


def today() -> str:
    """Tonight's label, for anything recorded or reported without a DAG run to date it."""
    return dt.datetime.now(dt.timezone.utc).date().isoformat()


def night_at(when: dt.datetime) -> str:
    return when.astimezone(dt.timezone.utc).date().isoformat()


def night_of(dag_run) -> str:
    """The night a DAG run belongs to: its logical date, or when it was due (manual runs)."""
    return night_at(dag_run.logical_date or dag_run.run_after)


def choose_runs(cells: Sequence[Mapping[str, Any]], night: str) -> tuple[dict[str, str], str]:
    """(per benchmark, the run that feeds the table; where they come from). When the night has
    scheduled runs, only those (the last per benchmark); a night with only manual runs (a demo, a
    trial) is reported from the last manual run per benchmark, marked 'manual'."""
    tonight = [c for c in cells if c["night"] == night and c["run_type"] != ACCURACY]
    source = "scheduled" if any(c["run_type"] == "scheduled" for c in tonight) else "manual"
    chosen: dict[str, str] = {}
    for c in tonight:  # cells come in recording order: the last run wins
        if source == "manual" or c["run_type"] == "scheduled":
            chosen[c["benchmark"]] = c["run_id"]
    return chosen, source
