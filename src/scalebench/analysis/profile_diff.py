"""Where the time went between two profiled cells (an alert's A/B, or any two runs): per
operation, the change of its self time per step, sorted by how much of the step's change it
explains; operations new or gone; the rest no listed operation explains. The profiles are the
framework profiler's own summaries (scalebench_kit.profiling): the slowest rank's top
operations, per step, so cells of different step counts compare."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

KINDS = {"op": "ops", "kernel": "kernels"}


@dataclass(frozen=True)
class OpChange:
    name: str
    before_s: float | None        # self seconds per step in A (None: not among A's top operations)
    after_s: float | None
    delta_s: float                # B - A, seconds per step (an op missing on one side counts as 0 there)
    share: float | None           # of the step's change (None when the step did not change)

    @property
    def status(self) -> str:
        return "new" if self.before_s is None else "gone" if self.after_s is None else "changed"

    def line(self) -> str:
        share = f", {self.share:.0%} of the {'slowdown' if self.share > 0 else 'change'}" if self.share else ""
        return f"{self.name} {self.delta_s * 1e3:+.3g} ms per step{share}" + (
            f" ({self.status})" if self.status != "changed" else "")


@dataclass(frozen=True)
class ProfileDiff:
    kind: str                     # op | kernel
    step_before_s: float
    step_after_s: float
    changes: list[OpChange] = field(default_factory=list)

    @property
    def step_delta_s(self) -> float:
        return self.step_after_s - self.step_before_s

    @property
    def unexplained_s(self) -> float:
        """The step's change that no listed operation's change accounts for."""
        return self.step_delta_s - sum(c.delta_s for c in self.changes)

    def top(self, k: int = 3) -> list[OpChange]:
        """The k operations that explain most of the step's change, in its direction."""
        sign = 1 if self.step_delta_s >= 0 else -1
        return [c for c in self.changes if c.delta_s * sign > 0][:k]

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "step_before_s": self.step_before_s, "step_after_s": self.step_after_s,
                "step_delta_s": self.step_delta_s, "unexplained_s": self.unexplained_s,
                "changes": [{"name": c.name, "status": c.status, "before_s": c.before_s, "after_s": c.after_s,
                             "delta_s": c.delta_s, "share": c.share} for c in self.changes]}


def diff(before: dict[str, Any], after: dict[str, Any], kind: str = "op") -> ProfileDiff:
    """B against A: every operation in either's top list, by its change's contribution to the
    step's change (the largest in the step's direction first). ValueError naming what is missing."""
    for side, p in (("A", before), ("B", after)):
        if p.get("why_not") or not p.get("step_s"):
            raise ValueError(f"{side} has no profile: {p.get('why_not') or 'no profiling window'}")
    a = {o["name"]: o["self_s"] for o in before.get(KINDS[kind]) or []}
    b = {o["name"]: o["self_s"] for o in after.get(KINDS[kind]) or []}
    step_a, step_b = float(before["step_s"]), float(after["step_s"])
    moved = step_b - step_a
    changes = []
    for name in a.keys() | b.keys():
        delta = b.get(name, 0.0) - a.get(name, 0.0)
        changes.append(OpChange(name, a.get(name), b.get(name), delta, delta / moved if moved else None))
    sign = 1 if moved >= 0 else -1
    changes.sort(key=lambda c: (-c.delta_s * sign, c.name))
    return ProfileDiff(kind, step_a, step_b, changes)


def ab_diff(cells: Sequence[Mapping[str, Any]], profiles: dict[str, dict[str, Any]], top: int = 3) -> dict[str, Any] | None:
    """Where the step's time went in a same-night A/B (its cells: roles ab_previous and rerun of
    one source, analysis.reruns), from its profiled pair (the last pair with a profile on both
    sides), by device kernels where both sides have them (a GPU), else by operations: {night, a,
    b, diff, top, traces}; {night, why_not} when that pair has no usable
    profile; None when no cell of the A/B was profiled (an A/B from before profiling)."""
    from scalebench.analysis.reruns import rerun_key
    from scalebench.core.cells import AB_PREVIOUS, RERUN

    mine = {c["key"]: c for c in cells}
    pairs = []
    for source in sorted({c["rerun_of"] for c in cells if c.get("role") == AB_PREVIOUS and c.get("rerun_of")}):
        i = 1
        while (a := rerun_key(source, i, AB_PREVIOUS)) in mine:
            b = rerun_key(source, i, RERUN)
            if a in profiles or b in profiles:
                pairs.append((i, a, b))
            i += 1
    if not pairs:
        return None
    _, a, b = max(pairs)
    night = mine[a].get("night")
    missing = [f"{side}: {(profiles.get(k) or {}).get('why_not') or 'not profiled'}"
               for side, k in (("A", a), ("B", b)) if not profiles.get(k) or profiles[k].get("why_not")]
    if missing:
        return {"night": night, "why_not": "; ".join(missing)}
    # on a GPU the step's time is in its kernels (an operation's host self time is its launch): compare those
    kind = "kernel" if profiles[a].get("kernels") and profiles[b].get("kernels") else "op"
    d = diff(profiles[a], profiles[b], kind)
    return {"night": night, "a": {"key": a, "attempt": profiles[a].get("attempt"), "traces": profiles[a]["traces"]},
            "b": {"key": b, "attempt": profiles[b].get("attempt"), "traces": profiles[b]["traces"]},
            "diff": d.to_json(), "top": [c.line() for c in d.top(top)]}


def ab_words(found: dict[str, Any] | None) -> str:
    """The alert's words for an A/B's profile diff ("" without one)."""
    if not found:
        return ""
    if found.get("why_not"):
        return f"; no profile: {found['why_not']}"
    what = "device kernels" if found["diff"]["kind"] == "kernel" else "operations"
    return (f"; where the step's time went (the A/B's profiled pair, {what}): " + ", ".join(found["top"])
            if found["top"] else f"; the A/B's profiles show no {what[:-1]} slower per step")
