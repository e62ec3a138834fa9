"""The rules of an alert group that every layer shares: its states, every move between them (a
person's, checked by `check_move`; the report's, decided by `judged_fixed` and `reopened`), and
which group a regression joins. The store applies these moves and keeps their events; which
message a group is owed is scalebench.analysis.alert_groups."""
from __future__ import annotations

import datetime as dt

STATES = ("new", "triaged", "investigating", "fixed", "invalid", "accepted")
OPEN = ("new", "triaged", "investigating")
REMIND_AFTER_DAYS = 3
REOPEN_DAYS = 7  # a figure that regresses again this soon after its group's fix reopens that group
OWNER_MAX = 100
NOTE_MAX = 2000


# A person's state changes, from -> to; a move not listed is refused. (The report's own moves are
# JUDGE_MOVES: any open state -> fixed when every figure is back; fixed -> the state it had when a
# figure regresses again within a week.)
MOVES = {
    "new": ("triaged", "investigating", "fixed", "invalid", "accepted"),
    "triaged": ("new", "investigating", "fixed", "invalid", "accepted"),
    "investigating": ("triaged", "fixed", "invalid", "accepted"),
    "fixed": ("investigating",),     # looked at again by hand
    "invalid": ("triaged",),         # a mistake undone
    "accepted": ("triaged",),
}
JUDGE_MOVES = {**{s: ("fixed",) for s in OPEN}, "fixed": OPEN}


def judged_fixed(state: str, figures_back: list[bool]) -> str | None:
    """The report's move when a figure of a group comes back: "fixed" once every figure of an open
    group is back; else none."""
    return "fixed" if state in OPEN and figures_back and all(figures_back) else None


def reopened(before_fixed: str | None, back_night: str | None, group_last_night: str, night: str,
             ) -> tuple[str, str] | None:
    """The report's move when a figure of a fixed group (of the regression's key) is flagged again
    on `night`: (the state the group goes back to, why) when the figure came back within
    REOPEN_DAYS and slipped, or a person set the group fixed while this figure was not back and it
    is still regressed; else None (a new group opens). The group goes back to the open state it
    was fixed from (`before_fixed`), or "new"."""
    since = (dt.date.fromisoformat(night) - dt.timedelta(days=REOPEN_DAYS)).isoformat()
    if back_night is not None and since <= back_night <= night:
        why = f"back on {back_night}, regressed again on {night}"
    elif back_night is None and group_last_night >= since:
        why = f"set fixed while this figure was not back; still regressed on {night}"
    else:
        return None
    to = before_fixed if before_fixed in OPEN else "new"
    assert to in JUDGE_MOVES["fixed"]
    return to, why
NOTE_NEEDED = ("invalid", "accepted")  # and "fixed" while some figure is not back: say why


class AlertStateError(ValueError):
    """A state change that is not allowed, in one line naming the field."""


class MoveRefused(AlertStateError):
    """A move the transitions table refuses, or one without the note it needs: its line names only
    states and counts, so a page may show it."""


def group_key(suspect: dict | None, benchmark: str) -> str:
    """Which group a regression joins: its suspect change (the new image's reference, which names
    its digest, or the config change in words), else its benchmark."""
    if suspect and suspect.get("kind") in ("image", "config"):
        return f"{suspect['kind']}:{suspect.get('new_image') or suspect.get('text')}"[:300]
    return f"benchmark:{benchmark}"


def check_change(state: str | None, owner: str | None, note: str | None, has_owner: bool = False) -> None:
    """Refuse a state, owner or note a person may not set (the CLI and the page call this)."""
    if state is not None and state not in STATES:
        raise AlertStateError(f"state: {state!r} is not one of {', '.join(STATES)}")
    if owner is not None and (not owner.strip() or len(owner) > OWNER_MAX or any(ord(c) < 32 for c in owner)):
        raise AlertStateError(f"owner: expected a name of 1-{OWNER_MAX} printable characters, got {owner[:40]!r}")
    if note is not None and len(note) > NOTE_MAX:
        raise AlertStateError(f"note: at most {NOTE_MAX} characters, got {len(note)}")
    if state == "triaged" and owner is None and not has_owner:
        raise AlertStateError("owner: triaged means someone owns it; give --owner")


def check_move(current: str, state: str, note: str | None, figures_out: int = 0) -> None:
    """Refuse a person's move the table does not allow, or one that needs a note without it."""
    if state == current:
        return
    if state not in MOVES.get(current, ()):
        allowed = ", ".join(MOVES.get(current, ())) or "none"
        raise MoveRefused(f"state: {current} cannot become {state} by hand (from {current}: {allowed})")
    if not (note or "").strip() and (state in NOTE_NEEDED or state == "fixed" and figures_out):
        why = (f"{figures_out} figure(s) are not back yet" if state == "fixed" else f"{state} closes the group")
        raise MoveRefused(f"note: {state} needs a note ({why}); say why")
