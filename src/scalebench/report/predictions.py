"""The report's scaling predictions (model: scalebench.analysis.prediction). Each night, before
its own cells count, one prediction per benchmark, host, precision and target is frozen in the
store: the largest measured GPU count from the smaller counts only, 8 GPUs and two hosts of the
largest count from all of them; the first night that measures a target within the lookback
window judges its prediction. The section shows what the nights so far predict at 8 GPUs and on
two hosts, and the running error of the predictions frozen in the last year."""
from __future__ import annotations

import datetime as dt
import statistics
from dataclasses import dataclass
from typing import Sequence

from scalebench.analysis.prediction import MODEL_VERSION, Network, Point, Prediction, median_points, predict
from scalebench.analysis.prediction_series import SeriesId, series_points
from scalebench.report.model import LOOKBACK_NIGHTS

TARGET_GPUS = 8
HOSTS = 2
JUDGE_WITHIN_NIGHTS = LOOKBACK_NIGHTS  # a prediction is judged by a night at most this long after it was frozen
ERROR_NIGHTS = 365        # the running error: predictions frozen in the last year


def _network(store, host: str, params: int | None, links: dict[str, float]) -> Network:
    from scalebench.store.predictions import Predictions

    size = params * 4 if params else None  # float32 gradients
    return Network(size, Predictions(store).bandwidth(host, size), links.get(host))


def _parameters(store, cells: Sequence) -> dict[str, int]:
    """Each benchmark's parameter count as its trainer reported it in its newest valid cell of
    `cells` (the report's window: one contract read per benchmark, by its key)."""
    newest: dict[str, tuple[str, str]] = {}
    for c in cells:
        if c.get("figure") is not None and (c["benchmark"] not in newest or c["night"] >= newest[c["benchmark"]][0]):
            newest[c["benchmark"]] = (c["night"], c["key"])
    out = {}
    for bench, (_, key) in newest.items():
        params = ((store.contract(key) or {}).get("model") or {}).get("parameters")
        if params:
            out[bench] = int(params)
    return out


def _targets(points: list[Point]) -> list[tuple[str, int, int, list[Point]]]:
    """(role, GPUs, hosts, points to fit on): the largest count held out, then 8 and two hosts."""
    counts = sorted({p.total for p in points})
    top = counts[-1]
    out = [("held_out", top, 1, [p for p in points if p.total < top])] if top > 1 else []
    if TARGET_GPUS not in counts:
        out.append(("beyond", TARGET_GPUS, 1, points))
    out.append(("beyond", top, HOSTS, points))
    return [t for t in out if t[3]]


@dataclass
class Fits:
    """What a night's freeze, judgement and section share, read once: each series' points from the
    nights before it and up to it, and each series' network."""
    night: str
    before: dict[SeriesId, list[Point]]
    up_to: dict[SeriesId, list[Point]]
    networks: dict[SeriesId, Network]


def fits(store, night: str, cells: Sequence, links: dict[str, float]) -> Fits:
    before, up_to, params = series_points(cells, before=night), series_points(cells, up_to=night), _parameters(store, cells)
    networks = {key: _network(store, key[1], params.get(key[0]), links) for key in {*before, *up_to}}
    return Fits(night, before, up_to, networks)


def freeze(store, fit: Fits) -> int:
    """Freeze tonight's predictions from the nights before it (never rewritten: a later report
    run of the same night adds nothing). Returns how many were new."""
    from scalebench.store.predictions import Predictions

    rows = []
    for key, points in sorted(fit.before.items()):
        for role, gpus, hosts, fit_on in _targets(points):
            # judged by its estimate; the report shows intervals
            p = predict(fit_on, gpus, hosts, fit.networks[key], interval=False)
            rows.append({"benchmark": key[0], "host": key[1], "precision": key[2], "gpus": gpus, "hosts": hosts,
                         "night": fit.night, "role": role, "model_version": MODEL_VERSION,
                         "fitted_nights": sorted({x.night for x in fit_on if x.night}),
                         "fitted_counts": sorted({x.total for x in fit_on}), "images_per_s": p.images_per_s,
                         "efficiency": p.efficiency, "low": p.low, "high": p.high, "line": p.line(), "doc": p.to_json()})
    return Predictions(store).freeze(rows)


def judge(store, fit: Fits) -> int:
    """Each frozen prediction whose target (one host) tonight measures, judged by tonight's medians."""
    from scalebench.store.predictions import Predictions

    night = fit.night
    preds = Predictions(store)
    tonight = {k: median_points([p for p in ps if p.night == night]) for k, ps in fit.up_to.items()}
    judged = 0
    # frozen within the lookback window: an older prediction whose target no night measured stays unjudged
    since = (dt.date.fromisoformat(night) - dt.timedelta(days=JUDGE_WITHIN_NIGHTS)).isoformat()
    for f in preds.frozen(up_to=night, judged=False, doc=False, since=since):
        measured = {p.total: p.images_per_s for p in tonight.get((f["benchmark"], f["host"], f["precision"]), [])}
        if f["hosts"] != 1 or f["images_per_s"] is None or f["gpus"] not in measured:
            continue
        ips = measured[f["gpus"]]
        eff = ips / (f["gpus"] * measured[1]) if 1 in measured else None
        judged += preds.judge(f["id"], night, ips, eff)
    return judged


def predict_series(store, cells: Sequence, links: dict[str, float], gpus: int, hosts: int = 1, *,
                   up_to: str | None = None, benchmark: str | None = None, host: str | None = None,
                   precision: str | None = None) -> list[tuple[SeriesId, list[Point], Prediction]]:
    """Each series' prediction at gpus x hosts from its nights up to `up_to` (what `scalebench
    predict` prints: the same fit as the report's section)."""
    out, params = [], _parameters(store, cells)
    for key, points in sorted(series_points(cells, up_to=up_to).items()):
        if benchmark and key[0] != benchmark or host and key[1] != host or precision and key[2] != precision:
            continue
        net = _network(store, key[1], params.get(key[0]), links)
        out.append((key, points, predict(points, gpus, hosts, net)))
    return out


def section(store, fit: Fits) -> dict:
    """What the report shows: per series, 8 GPUs and two hosts predicted from every night so far;
    per benchmark, the running error of its judged predictions (points of efficiency)."""
    from scalebench.store.predictions import Predictions

    rows = []
    for key, points in sorted(fit.up_to.items()):
        top = max(p.total for p in points)
        wanted = [(TARGET_GPUS, 1)] if TARGET_GPUS > top else []
        preds: list[Prediction] = [predict(points, g, h, fit.networks[key]) for g, h in wanted + [(top, HOSTS)]]
        rows.append({"benchmark": key[0], "host": key[1], "precision": key[2],
                     "counts": sorted({p.total for p in points}), "nights": len({p.night for p in points}),
                     "predictions": [p.to_json() for p in preds]})
    since = (dt.date.fromisoformat(fit.night) - dt.timedelta(days=ERROR_NIGHTS)).isoformat()
    return {"rows": rows, "errors": running_errors(Predictions(store).frozen(up_to=fit.night, judged=True, doc=False,
                                                                             since=since))}


def running_errors(frozen: list[dict]) -> list[dict]:
    """Per benchmark, the judged predictions' median absolute error in points of efficiency (and
    of images/s, in %), with the newest judgement's line."""
    out = []
    for bench in sorted({f["benchmark"] for f in frozen}):
        judged = [f for f in frozen if f["benchmark"] == bench and f["judged_night"]]
        if not judged:
            continue
        points = [abs(f["efficiency"] - f["measured_efficiency"]) * 100 for f in judged
                  if f["efficiency"] is not None and f["measured_efficiency"] is not None]
        pct = [abs(f["images_per_s"] / f["measured_images_per_s"] - 1) * 100 for f in judged]
        last = max(judged, key=lambda f: (f["judged_night"], f["id"]))
        out.append({"benchmark": bench, "judged": len(judged),
                    "median_abs_points": round(statistics.median(points), 2) if points else None,
                    "median_abs_pct": round(statistics.median(pct), 2),
                    "last": f"{last['gpus']} GPUs on {last['host']} ({last['precision']}), frozen {last['night']}: "
                            f"predicted {last['images_per_s']:.4g} images/s, measured "
                            f"{last['measured_images_per_s']:.4g} on {last['judged_night']}"})
    return out
