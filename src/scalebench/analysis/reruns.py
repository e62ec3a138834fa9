"""Same-night reruns: after a benchmark's run records its cells, each GPU count whose throughput
looks regressed against the scheduled baseline (regress.wants_rerun: judged raw, since the other
benchmarks of the night may not have run) is rerun k times in the same DAG run, on another device
set of the host when one is free. Once the reruns are recorded, the run states whether they
confirm or clear each flag; the nightly report decides the alert with the whole night's figures.
Reruns are cells of role "rerun": stored beside the figure they check, never a night of the baseline.

A flagged figure that came with a new image (regress.wants_ab) is rerun as a same-night A/B
instead, as Chromium's Pinpoint confirms a bisect step: `ab_pairs` pairs of the cell on the
previous image (role "ab_previous", the reference its baseline's image was kept under) and on
tonight's (role "rerun"), on one host, in balanced order (AB BA AB ...). Where the previous image
is gone, plain reruns run instead and the line says so. The A/B's last pair is profiled (one cell
per image, a profiling window after its timed steps: no figure moves), so the alert can say which
operations the step's time went to (analysis.profile_diff).
"""
from __future__ import annotations

import datetime as dt
import hashlib
from typing import Any, Callable, Mapping, Sequence, cast

from scalebench_kit.contract import read_json
from scalebench_kit.names import PLACEMENT_FILE, THROUGHPUT

from scalebench.core import nights
from scalebench.core.cells import ACCURACY, AB_PREVIOUS, RERUN
from scalebench.core.config import image_repository
from scalebench.core.attempt_folders import cell_attempts
from scalebench.analysis.history import build_series
from scalebench.analysis.regress import Gates, Judgement, judge, wants_ab, wants_rerun
from scalebench.core.records import FigureRow, PlannedCell

LOOKBACK_NIGHTS = 60


def _night(planned: list[PlannedCell]) -> str:
    return planned[0].get("night") or nights.today()


def _history(store, planned: list[PlannedCell], extra: Sequence[PlannedCell] = ()) -> list[FigureRow]:
    """The scheduled history of this benchmark before this run's night, and this run's own cells
    (and reruns) as tonight's night, whatever the run's type: a manual run is checked against the
    same baseline, and never becomes part of it."""
    first, night = planned[0], _night(planned)
    since = (dt.date.fromisoformat(night) - dt.timedelta(days=LOOKBACK_NIGHTS)).isoformat()
    mine = {c["key"] for c in [*planned, *extra]}
    out: list[FigureRow] = []
    for c in store.figures(up_to_night=night, since_night=since):
        if c["key"] in mine:
            out.append(cast(FigureRow, {**c, "run_type": "scheduled", "night": night}))
        elif c["benchmark"] == first["benchmark"] and c["run_id"] != first["run_id"] and c["night"] < night:
            out.append(c)
    return out


def _tonight(cells: list[FigureRow], gates: Gates, night: str) -> dict[int, Judgement]:
    """Tonight's throughput judgement per GPU count, raw: the night factor needs the whole night."""
    out: dict[int, Judgement] = {}
    for s in build_series(cells, {}, gates, with_factors=False):
        if s.key.metric != THROUGHPUT.name:
            continue
        js = [j for j in judge(s, gates) if j.night.isoformat() == night]
        if js:
            out[s.key.gpus] = js[-1]
    return out


def rerun_key(key: str, i: int, role: str = RERUN) -> str:
    return hashlib.sha256(f"{key}:{'rerun' if role == RERUN else role}{i}".encode()).hexdigest()[:20]


def rerun_cell(source: PlannedCell, i: int, role: str = RERUN, image: str | None = None,
               devices: list[str] | None = None) -> PlannedCell:
    """The i-th rerun of `source` (role "rerun", tonight's image), or the i-th cell of its A/B on
    the previous image (role "ab_previous", `image`)."""
    name = "rerun" if role == RERUN else "previous"
    cell = PlannedCell({**source, "key": rerun_key(source["key"], i, role), "cell_id": f"{source['cell_id']}-{name}{i}",
                        "label": f"{source['label']} · {'rerun' if role == RERUN else 'previous image'} {i}",
                        "role": role, "rerun_of": source["key"], "avoid_devices": devices})
    if image:
        cell["image"] = image
    return cell


def ab_cells(source: PlannedCell, previous: str, start: int, pairs: int, devices: list[str] | None,
             profile_steps: int | None = None) -> list[PlannedCell]:
    """Pairs start .. start + pairs - 1 of an A/B, in balanced order: odd pairs A then B, even B then A.
    `profile_steps`: the last pair's two cells each run a profiling window of that many steps."""
    out = []
    for i in range(start, start + pairs):
        a, b = rerun_cell(source, i, AB_PREVIOUS, previous, devices), rerun_cell(source, i, RERUN, None, devices)
        if profile_steps and i == start + pairs - 1:
            a["profile_steps"] = b["profile_steps"] = profile_steps
        out += [a, b] if i % 2 else [b, a]
    return out


def plan_reruns(store, planned: list[PlannedCell], count: int, gates: Gates = Gates(), ab_pairs: int = 5,
                image_available: Callable[[str], bool] = lambda ref: True,
                short_ab: Callable[[], tuple[float, dict[int, float]] | None] = lambda: None,
               profile_steps: int | None = None) -> tuple[list[PlannedCell], list[str]]:
    """(rerun cells, what was flagged): `count` reruns of one valid cell of each flagged GPU count,
    or, where the flag came with a new image, an A/B of `ab_pairs` pairs with the previous image
    (`image_available(ref)`: whether the host's engine still has it); an A/B too for each GPU
    count whose new image cannot be judged from its history (a short baseline), within
    `short_ab` (the minutes the night's budget leaves this benchmark for them, and each GPU
    count's A/B minutes: core.plan; asked only when needed), largest GPU count first; an A/B's
    last pair profiled with `profile_steps` (the profile's window). A weekly accuracy run reruns
    nothing: its throughput has no nightly baseline."""
    if not planned or count < 1 or planned[0]["run_type"] == ACCURACY:
        return [], []
    cells = _history(store, planned)
    judged = _tonight(cells, gates, _night(planned))
    valid = {c["key"] for c in cells if c["figure"] is not None}
    out, flagged = [], []
    short = sorted((n for n, j in judged.items() if wants_ab(j, gates) and not wants_rerun(j, gates)), reverse=True)
    unfit: dict[int, str] = {}
    budget = short_ab() if short else None
    if budget is not None:
        left, minutes = budget
        for n in short:
            if minutes.get(n, 0.0) <= left:
                left -= minutes.get(n, 0.0)
            else:
                unfit[n] = (f"its A/B ({minutes[n]:.0f} min) does not fit what the night's budget leaves "
                            f"({left:.0f} min): not judged tonight")
    for n, j in sorted(judged.items()):
        if not (wants_rerun(j, gates) or wants_ab(j, gates)):
            continue
        if n in unfit:
            flagged.append(f"{j.line()}; {unfit[n]}")
            continue
        source = next((c for c in planned if c["gpus"] == n and c["key"] in valid), None)
        if source is None:
            continue
        devices = _devices_of(source)
        suspect = j.suspect
        previous = suspect.previous_image if suspect is not None and wants_ab(j, gates) else None
        tonight_image = suspect.after.get("image") if suspect is not None and previous else None
        if previous and tonight_image and image_repository(previous) != image_repository(tonight_image):
            flagged.append(f"{j.line()}; the previous image {previous} is of another repository than "
                           f"{tonight_image}: no A/B (a new image line), plain reruns")
            previous = None
        elif previous and image_available(previous):
            flagged.append(f"{j.line()}; A/B with the previous image {suspect.name('previous') if suspect else previous} "
                           f"(run as {previous}): "
                           f"{ab_pairs} + {ab_pairs} cells" + (f", the last pair profiled ({profile_steps} steps each)"
                                                                if profile_steps else ""))
            out += ab_cells(source, previous, 1, ab_pairs, devices, profile_steps)
            continue
        if not wants_rerun(j, gates):  # a short baseline: only an A/B judges it, reruns would not
            if previous:
                flagged.append(f"{j.line()}; the previous image {previous} is gone from this engine: no A/B, and a "
                               "short baseline cannot judge reruns: not judged tonight")
            continue
        if previous:
            flagged.append(f"{j.line()}; the previous image {previous} is gone from this engine: no A/B, judged "
                           "against the baseline (reruns, then a second night)")
        elif not flagged or not flagged[-1].startswith(j.line()):
            flagged.append(j.line())
        out += [rerun_cell(source, i, RERUN, None, devices) for i in range(1, count + 1)]
    return out, flagged


def more_pairs(store, planned: list[PlannedCell], reruns: list[PlannedCell], gates: Gates = Gates()
               ) -> tuple[list[PlannedCell], list[str]]:
    """An A/B that says "unknown" adds pairs up to gates.ab_max_pairs: (the added cells, why)."""
    judged = _tonight(_history(store, planned, reruns), gates, _night(planned))
    out, why = [], []
    for n, j in sorted(judged.items()):
        if j.ab is None or not j.ab.wants_pairs():
            continue
        firsts = [c for c in reruns if c["gpus"] == n and c["role"] == AB_PREVIOUS]
        source = next(c for c in planned if c["key"] == firsts[0]["rerun_of"])
        done = len(firsts)
        why.append(f"{j.head}: A/B unknown after {done} + {done} cells ({j.ab.line()}): {j.ab.wants_pairs()} more pairs")
        out += ab_cells(source, firsts[0]["image"], done + 1, j.ab.wants_pairs(), firsts[0].get("avoid_devices"))
    return out, why


def _devices_of(cell: Mapping[str, Any]) -> list[str] | None:
    """The device set of the cell's valid attempt (its placement), to rerun elsewhere."""
    for _, folder in reversed(cell_attempts(cell)):
        if (folder / PLACEMENT_FILE).exists():
            return read_json(folder / PLACEMENT_FILE).get("device_ids")
    return None


def _previous_missing(cells: list[FigureRow], reruns: list[PlannedCell], gpus: int) -> str:
    """Why an A/B had no previous-image figures (e.g. the image was gone from the host's engine)."""
    mine = {c["key"] for c in reruns if c["gpus"] == gpus and c.get("role") == AB_PREVIOUS}
    stored = [c for c in cells if c["key"] in mine]
    if not mine or any(c["figure"] is not None for c in stored):
        return ""
    reasons = sorted({c.get("reason") or c["status"] for c in stored}) or ["not recorded"]
    return (f"; the previous image's cells have no valid result ({', '.join(reasons)}): no A/B, judged against the "
            "baseline")


def verdicts(store, planned: list[PlannedCell], reruns: list[PlannedCell], gates: Gates = Gates()) -> dict:
    """Per flagged GPU count, whether its reruns confirm the flag, clear it (equivalence with the
    baseline) or leave it to the next night ("unknown"): the same test as the report, without the
    night factor; where the reruns ran."""
    if not reruns:
        return {"confirmed": [], "cleared": [], "placements": {}}
    cells = _history(store, planned, reruns)
    judged = _tonight(cells, gates, _night(planned))
    rerun_gpus = {c["gpus"] for c in reruns}
    out: dict[str, Any] = {"confirmed": [], "cleared": [], "placements": {}}
    for n, j in sorted(judged.items()):
        if n not in rerun_gpus:
            continue
        line = j.line() + _previous_missing(cells, reruns, n)
        if j.confirmed_by_reruns:
            out["confirmed"].append(line)
        elif j.confirmed_by_reruns is False or not j.flagged:
            out["cleared"].append(line)
        elif j.reruns or j.ab is not None or line != j.line():
            # reruns or an A/B that showed neither the step nor equivalence, or no A: the next night decides
            out.setdefault("unknown", []).append(line)
    for c in reruns:
        out["placements"][c["label"]] = {"devices": _devices_of(c), "flagged_cell_devices": c.get("avoid_devices")}
    return out
