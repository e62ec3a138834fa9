"""Which measured cells a series' prediction is fitted on: per benchmark, host and precision, the
valid cells of the nights the regression judge keeps, on the newest night's image."""
from __future__ import annotations

from typing import Sequence

from scalebench.analysis.prediction import Point

SeriesId = tuple[str, str, str]  # benchmark, host, precision: one series of predictions


def series_points(rows: Sequence, before: str | None = None, up_to: str | None = None) -> dict[SeriesId, list[Point]]:
    """Per benchmark, host and precision, one point per valid measured cell (the step breakdown
    per step where the trainer measured it), on the nights (before `before`, or up to `up_to`) of
    the newest night's image: a new image starts the fit again. Scheduled runs of the nightly
    profile where a series has them (the nights the regression judge keeps: not a weekly full
    run, not a manual trial of a candidate image), else its newest night's runs (a demo's)."""
    from scalebench.analysis.noise import JUDGED_PROFILE

    groups: dict[SeriesId, list] = {}
    for r in rows:
        if r.get("role", "measure") != "measure" or r.get("status") != "valid" or not r.get("figure") or \
                not r.get("night") or before and r["night"] >= before or up_to and r["night"] > up_to:
            continue
        groups.setdefault((r["benchmark"], r["host"], r["precision"]), []).append(r)
    out = {}
    for key, rs in groups.items():
        nightly = [r for r in rs if r.get("run_type") == "scheduled" and r["profile"] == JUDGED_PROFILE]
        rs = nightly or rs
        newest = max(rs, key=lambda r: (r["night"], r["run_id"]))
        same = [r for r in rs if r["figure"].get("image_digest") == newest["figure"].get("image_digest")
                and r["profile"] == newest["profile"]]
        out[key] = [_point(r) for r in same]
    return out


def _point(row) -> Point:
    figure = row["figure"]
    b = ((figure.get("timing") or {}).get("breakdown") or {})
    steps = b.get("timed_steps") or 0

    def per_step(part: str) -> float | None:
        v = b.get(part)
        return v / steps if v is not None and steps else None
    return Point(row["gpus"], figure["images_per_s"], 1, row.get("per_device_batch"), per_step("step_s"),
                 per_step("compute_s"), per_step("data_wait_s"), per_step("sync_s"), per_step("other_s"), row["night"])
