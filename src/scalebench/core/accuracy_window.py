"""The weekly accuracy window: from each `accuracy_schedule` time, for `accuracy_window_hours`,
every GPU host runs its benchmarks' `full` profile (the accuracy run) and no nightly run. Decided
by the schedule alone, so the plan, the nightly DAGs and the report agree without asking anyone."""
from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from scalebench.core.config import Fleet, Host


@dataclass(frozen=True)
class Window:
    start: dt.datetime
    end: dt.datetime

    def line(self, host: str) -> str:
        return (f"weekly accuracy window on {host}, {self.start:%a %Y-%m-%d %H:%M} to "
                f"{self.end:%a %Y-%m-%d %H:%M} UTC")


def window_at(fleet: Fleet, host: Host, when: dt.datetime) -> Window | None:
    """The accuracy window open on `host` at `when`, or None (no schedule, or a CPU host)."""
    from croniter import croniter

    if fleet.accuracy_schedule is None or host.kind != "gpu":
        return None
    when = when.astimezone(dt.timezone.utc)
    start = croniter(fleet.accuracy_schedule, when + dt.timedelta(seconds=1)).get_prev(dt.datetime)
    end = start + dt.timedelta(hours=fleet.accuracy_window_hours)
    return Window(start, end) if start <= when < end else None
