"""Alert groups: what a team triages. A confirmed regression joins the open group of its suspect
(the image or config change it came with; without one, its benchmark's open group), so one new
image that slows several GPU counts, precisions and benchmarks is one group and one message.

States (as Perfherder's alert summaries, fewer of them):
  new            nobody has looked yet (reminded every `remind_after_days` while it stays new)
  triaged        someone owns it
  investigating  being worked on
  fixed          every figure is back within the gates of the level before the regression (set
                 by the report when each was judged fixed by a later change or ended by itself),
                 or said so by a person; a figure that regresses again within a week reopens it
  invalid        not a regression: its nights rejoin the baseline
  accepted       an intended change: the baseline of its figures restarts at the group's first night

The states, keys and who may set what are scalebench.core.alert_rules (the store checks them too);
this module decides which message a group is owed tonight and what closed groups do to the
baselines; the store keeps the groups and their events (scalebench.store.alert_groups); the
messages' texts are scalebench.report.alert_messages; scalebench.orchestration.dags.alerts
sends them."""
from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from scalebench.core.alert_rules import OPEN, REMIND_AFTER_DAYS
from scalebench.core.verdicts import GREW, GROUP_FIXED, NEW, PARTLY, REASONS, REMINDER, STATE


@dataclass(frozen=True)
class Owed:
    """Why a group is owed a message tonight: a key of core.verdicts.REASONS ("" when it is not)."""
    reason: str

    def __post_init__(self) -> None:
        if self.reason and self.reason not in REASONS:
            raise ValueError(f"alert reason {self.reason!r} is not one of {', '.join(REASONS)}")

    def __bool__(self) -> bool:
        return bool(self.reason)


def figures_back(group: dict) -> tuple[int, int] | None:
    """(figures back, figures) of an open group some of whose figures are judged back; None when
    none is, or the group is closed."""
    back = sum(1 for f in group["figures"] if f.get("back_night"))
    if not back or group["state"] not in OPEN:
        return None
    return back, len(group["figures"])


def owed(group: dict, night: str, remind_after_days: int = REMIND_AFTER_DAYS) -> Owed:
    """The message a group is owed on `night`: "new" once; then "fixed" / "state" when its state
    differs from the one last sent; "grew" when it gained a benchmark; "partly" when a figure came
    back tonight and others did not; "reminder" while it stays new for remind_after_days since the
    last message; else none."""
    if group["notified_state"] is None:
        return Owed(NEW)
    if group["state"] != group["notified_state"]:
        return Owed(GROUP_FIXED if group["state"] == "fixed" else STATE)
    if set(group["benchmarks"]) - set(group["notified_benchmarks"]):
        return Owed(GREW)
    if figures_back(group) and any(f.get("back_night") == night for f in group["figures"]):
        return Owed(PARTLY)
    if group["state"] == "new" and group["notified_night"] and \
            (dt.date.fromisoformat(night) - dt.date.fromisoformat(group["notified_night"])).days >= remind_after_days:
        return Owed(REMINDER)
    return Owed("")


INVALID_LOOKBACK_DAYS = 7  # an invalid group's figures rejoin the baseline from this long before their first alert


def baseline_effects(accepted: list[dict], invalid: list[dict]):
    """What closed groups do to the baselines: (shifts, invalid nights). An accepted group restarts
    the baseline of each of its figures at the group's first night (an acknowledged shift, across
    precisions as the YAML file's are); an invalid group's flagged nights, from a week before each
    figure's first alert (the nights that waited for confirmation) to its last, are judged as not
    flagged, so they rejoin the baseline."""
    from scalebench.analysis.regress import Shift

    shifts = [Shift(f["benchmark"], dt.date.fromisoformat(g["first_night"]), f"alert group #{g['id']} accepted",
                    (f["gpus"],), f["metric"]) for g in accepted for f in g["figures"]]
    nights: dict[tuple[str, int, str, str], list[tuple[dt.date, dt.date]]] = {}
    for g in invalid:
        for f in g["figures"]:
            start = dt.date.fromisoformat(f["first_night"]) - dt.timedelta(days=INVALID_LOOKBACK_DAYS)
            nights.setdefault((f["benchmark"], f["gpus"], f["precision"], f["metric"]), []).append(
                (start, dt.date.fromisoformat(f["last_night"])))
    return shifts, nights
