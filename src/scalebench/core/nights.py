"""Which night a thing belongs to: the one definition of a night (an ISO date, UTC)."""
from __future__ import annotations

import datetime as dt


def today() -> str:
    """Tonight's label, for anything recorded or reported without a DAG run to date it."""
    return dt.datetime.now(dt.timezone.utc).date().isoformat()


def night_at(when: dt.datetime) -> str:
    return when.astimezone(dt.timezone.utc).date().isoformat()


def night_of(dag_run) -> str:
    """The night a DAG run belongs to: its logical date, or when it was due (manual runs)."""
    return night_at(dag_run.logical_date or dag_run.run_after)
