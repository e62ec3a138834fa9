"""The rules of an alert group that every layer shares: its states, who may set what, and which
group a regression joins (the decisions about groups are in scalebench.analysis.alert_groups)."""
from __future__ import annotations

STATES = ("new", "triaged", "investigating", "fixed", "invalid", "accepted")
OPEN = ("new", "triaged", "investigating")
REMIND_AFTER_DAYS = 3
OWNER_MAX = 100
NOTE_MAX = 2000


class AlertStateError(ValueError):
    """A state change that is not allowed, in one line naming the field."""


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
