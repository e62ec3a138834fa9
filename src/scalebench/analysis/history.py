"""The nightly series the regression detector judges, built from stored cells, and what tonight's
judgements mean together.

Per like-with-like key (benchmark, GPU count, metric, profile, host, scaling mode, image
repository, precision):
the median of the night's scheduled measuring cells, the same night's reruns beside it (never
as nights) with the A/B's previous-image cells, the system fingerprint, and for throughput the
host's night factor. Per benchmark
and GPU count n > 1 also the scaling efficiency T(1) / (n T(n)) of the night, on the report's
timing basis (`analysis.basis`), so a change in scaling is told apart from a change in compute.
"""
from __future__ import annotations

import datetime as dt
import statistics
from dataclasses import replace
from typing import Any, Mapping

from scalebench_kit.names import ACCURACY_METRICS, THROUGHPUT

from scalebench.analysis.basis import basis_of, time_value
from scalebench.analysis.regress import (EFFICIENCY, Gates, Judgement, Series, SeriesKey, fingerprint_change,
                                         host_factor_series, night_factors)
from scalebench.core.cells import AB_PREVIOUS, BISECT, PROBE, RERUN
from scalebench.core.records import FigureRow


def _keys(lineage: dict[str, str]):
    """key(cell, metric, gpus=None): the cell's SeriesKey, one object per distinct key (a window
    holds tens of thousands of figures and a few hundred keys)."""
    made: dict[tuple, SeriesKey] = {}

    def key(c: FigureRow, metric: str, gpus: int | None = None) -> SeriesKey:
        ident = (c["benchmark"], c["gpus"] if gpus is None else gpus, metric, c["profile"], c["host"],
                 c["scaling_mode"], c["precision"])
        k = made.get(ident)
        if k is None:
            k = made[ident] = SeriesKey(benchmark=ident[0], gpus=ident[1], metric=metric, profile=ident[3],
                                        host_class=ident[4], scaling_mode=ident[5],
                                        image_lineage=lineage.get(ident[0], ""), precision=ident[6])
        return k
    return key


def _measured_on(f: Mapping[str, Any]) -> dict:
    """The figure's system fingerprint with its resolved config's identity: either changing restarts a baseline."""
    fp = dict(f.get("fingerprint") or {})
    if fp and f.get("config_sha"):
        fp["config_sha"] = f["config_sha"]
    return fp


def build_series(cells: list[FigureRow], lineage: dict[str, str], gates: Gates = Gates(),
                 with_factors: bool = True) -> list[Series]:
    """Every series of scheduled nights in `cells` (the store's figures), oldest night first;
    `with_factors`: with the host's night factors and its factor series."""
    values: dict[SeriesKey, dict[str, list[float]]] = {}
    prints: dict[SeriesKey, dict[str, dict]] = {}
    reruns: dict[SeriesKey, dict[str, list[float]]] = {}
    previous: dict[SeriesKey, dict[str, list[float]]] = {}  # the A/B's cells on the previous image
    measured: dict[tuple[SeriesKey, str], list[FigureRow]] = {}  # (bench key at 1 GPU, night) -> its cells
    probes: dict[tuple[str, str], dict[str, list[float]]] = {}  # (host, profile) -> night -> probe throughputs
    probe_prints: dict[tuple[str, str], dict[str, dict]] = {}
    key_of = _keys(lineage)
    for c in cells:
        f = c["figure"]
        if c["run_type"] != "scheduled" or f is None or c.get("role", "measure") == BISECT:
            continue
        if c.get("role", "measure") == PROBE:
            probes.setdefault((c["host"], c["profile"]), {}).setdefault(c["night"], []).append(f["images_per_s"])
            probe_prints.setdefault((c["host"], c["profile"]), {}).setdefault(c["night"], _measured_on(f))
            continue
        if c.get("role", "measure") in (RERUN, AB_PREVIOUS):
            arm = reruns if c.get("role", "measure") == RERUN else previous
            arm.setdefault(key_of(c, THROUGHPUT.name), {}).setdefault(c["night"], []).append(f["images_per_s"])
            continue
        vals = {THROUGHPUT.name: f["images_per_s"], **{m: (f["metrics"] or {}).get(m) for m in ACCURACY_METRICS}}
        for metric, v in vals.items():
            if v is None:
                continue
            k = key_of(c, metric)
            values.setdefault(k, {}).setdefault(c["night"], []).append(v)
            prints.setdefault(k, {}).setdefault(c["night"], _measured_on(f))
        measured.setdefault((key_of(c, EFFICIENCY, 1), c["night"]), []).append(c)
    for (k1, night), mine in measured.items():
        basis, _ = basis_of(mine)  # the report's basis; a night that mixes bases has no efficiency
        per: dict[tuple[int, int], list[float]] = {}
        for c in mine if basis else []:
            per.setdefault((c["epochs"], c["gpus"]), []).append(time_value(c, basis or ""))
        for n in sorted({g for _, g in per if g > 1}):
            pairs = [(per[(e, 1)], per[(e, n)]) for e, g in per if g == n and (e, 1) in per]
            if not pairs:
                continue
            eff = statistics.fmean(statistics.median(t1) / (n * statistics.median(tn)) for t1, tn in pairs)
            kn = replace(k1, gpus=n)
            values.setdefault(kn, {}).setdefault(night, []).append(eff)
            tput = replace(kn, metric=THROUGHPUT.name)
            prints.setdefault(kn, {})[night] = prints.get(tput, {}).get(night, {})
    series = {k: Series(k, sorted((dt.date.fromisoformat(n), statistics.median(v)) for n, v in per.items()),
                        reruns={dt.date.fromisoformat(n): v for n, v in reruns.get(k, {}).items()},
                        fingerprints={dt.date.fromisoformat(n): fp for n, fp in prints.get(k, {}).items()},
                        previous={dt.date.fromisoformat(n): v for n, v in previous.get(k, {}).items()},
                        host=k.host_class)
              for k, per in values.items()}
    if not with_factors:
        return [series[k] for k in sorted(series)]
    # night factors: throughput figures of one host and profile move together on a bad night; the
    # host probe's figure, where it ran, is the factor (it has no changes of its own), else the
    # median over the host's other benchmarks (one voice each)
    hosts: dict[tuple[str, str], list[SeriesKey]] = {}
    for k in series:
        if k.metric == THROUGHPUT.name:
            hosts.setdefault((k.host_class, k.profile), []).append(k)
    extra = []
    for (host, profile), keys in sorted(hosts.items()):
        curves: dict[str, dict] = {str(k): dict(series[k].points) for k in keys}
        restarts = {str(k): _restarts(series[k].fingerprints) for k in keys}
        probe = None
        if (host, profile) in probes:
            probe = f"{PROBE} {host}"
            curves[probe] = {dt.date.fromisoformat(n): statistics.median(v) for n, v in probes[(host, profile)].items()}
            restarts[probe] = _restarts({dt.date.fromisoformat(n): fp
                                         for n, fp in probe_prints[(host, profile)].items()})
        factors = night_factors(curves, gates.window, only=[str(k) for k in keys], probe=probe, by_group=True,
                                groups={str(k): k.benchmark for k in keys}, restarts=restarts)
        for k in keys:
            series[k].factors = factors[str(k)]
        if any(factors.values()):
            extra.append(host_factor_series(factors, host, profile))
    return [series[k] for k in sorted(series)] + extra


def _restarts(prints: dict[dt.date, dict]) -> set[dt.date]:
    """The nights a figure's system changed (image, config, framework, driver...)."""
    out, last = set(), None
    for night in sorted(prints):
        if fingerprint_change(last, prints[night]):
            out.add(night)
        last = prints[night] or last
    return out


def _gpus(n: int) -> str:
    return f"{n} GPU{'s' if n != 1 else ''}"


def diagnose(tonight: list[Judgement]) -> list[str]:
    """Per benchmark with an alert tonight: a scaling regression (efficiency fell, the 1-GPU
    figure did not) apart from a compute regression (every GPU count slower, scaling unchanged)."""
    out = []
    by_bench: dict[str, list[Judgement]] = {}
    for j in tonight:
        by_bench.setdefault(j.key.benchmark, []).append(j)
    for bench, js in sorted(by_bench.items()):
        eff = [j for j in js if j.key.metric == EFFICIENCY and j.alert]
        tput = {j.key.gpus: j for j in js if j.key.metric == THROUGHPUT.name and j.baseline is not None}
        one = tput.get(1)
        if eff and one is not None and not one.flagged:
            falls = "; ".join(f"{_gpus(j.key.gpus)} efficiency fell from {j.baseline:.2f} to {j.value:.2f}" for j in eff)
            out.append(f"{bench}: scaling regression (communication or topology): the 1-GPU throughput is unchanged "
                       f"({one.value:.4g} vs {one.baseline:.4g}, {-(one.worse_by or 0.0) * 100:+.1f}%), {falls}.")
        elif eff:
            falls = "; ".join(f"{_gpus(j.key.gpus)} efficiency fell from {j.baseline:.2f} to {j.value:.2f}" for j in eff)
            out.append(f"{bench}: scaling regression: {falls}.")
        slow = [j for j in tput.values() if j.alert]
        if slow and len(slow) == len(tput) and not eff:
            mean = statistics.fmean(j.worse_by or 0.0 for j in slow)
            out.append(f"{bench}: compute regression: every GPU count is slower (by {100 * mean:.0f}% on average, "
                       f"{', '.join(_gpus(n) for n in sorted(tput))}) and the scaling efficiency is unchanged.")
    return out
