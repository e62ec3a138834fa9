"""The night's plan before the night: per benchmark, GPU count and host, what each cell will run
(global batch, LR, steps per epoch, epochs, warm-up, timed steps, capped or not), what it costs
(set-up + warm-up + timed steps + evaluation) and, per host, whether the night fits its budget.

The `full` profile is planned as it is scheduled: the weekly accuracy run, cut to each
benchmark's `accuracy_cut()` (default: the largest epoch value, one repeat), against the host's
accuracy window (`accuracy_window_hours`) instead of a night, with no rerun reserve.

Steps are counted with the kit's own epoch definition (`scalebench_kit.epochs`), from the split
sizes in the stacks file, so no dataset is needed here. Costs come from stored figures of the
same benchmark, profile, GPU count and host (the median of recent nights) when there are some,
else from the config's `estimate`; each row says which.
"""
from __future__ import annotations

import math
import statistics
from dataclasses import asdict, dataclass, field

from scalebench.core.assignment import ASSIGNED_PROFILES, Assignment, assign, candidates
from scalebench.core.cells import PROBE, host_for
from scalebench.core.config import Benchmark, ConfigError, Fleet, Resolved
from scalebench.core.records import FigureRow

RECENT_NIGHTS = 7  # stored figures from this many most recent nights set a cost
# An A/B's profiled pair: each of its two cells runs a profiling window after its timed steps,
# one warm-up step and profile_steps steps under the profiler, then its trace written. Estimated
# as twice the steps' own time (the profiler's overhead per operation) plus a fixed start and
# export; bench/profiling.py measures the real window.
PROFILER_SLOWDOWN = 2.0
PROFILER_FIXED_S = 5.0


def profile_window_s(steps: int, step_s: float) -> float:
    """One cell's profiling window, estimated (seconds)."""
    return PROFILER_FIXED_S + (steps + 1) * step_s * PROFILER_SLOWDOWN
COST_LOOKBACK_DAYS = 60  # stored costs older than this do not set a night's plan


@dataclass(frozen=True)
class Cost:
    """One cell's seconds outside and inside the step loop, and where they come from."""
    setup_s: float
    step_s: float
    eval_s: float
    source: str   # "config estimate" or "stored: median of N nights"


@dataclass
class PlanRow:
    benchmark: str
    profile: str
    host: str
    gpus: int
    global_batch: int
    lr: float
    steps_per_epoch: int
    capped: bool
    epochs: int
    warmup_steps: int
    timed_steps: int
    timing_basis: str
    step_s: float
    cell_s: float               # set-up + warm-up + timed steps + evaluation
    repeats: int
    cost_source: str
    timeout_s: float            # the cell's limit: an estimate above it cannot finish
    precision: str = "fp32"

    @property
    def seconds(self) -> float:
        return self.cell_s * self.repeats


@dataclass
class HostNight:
    host: str
    budget_minutes: float
    budget_name: str = "night_budget_minutes"
    cell_minutes: float = 0.0
    rerun_minutes: float = 0.0  # reserve: per benchmark, its reruns or A/B cells (the more) of its longest cell
    benchmarks: list[str] = field(default_factory=list)
    # a night with a new image on a short baseline (a series' first nights, after a restart or an
    # improvement): an A/B at every GPU count; per benchmark, minutes per GPU count
    ab_counts: dict[str, dict[int, float]] = field(default_factory=dict)
    ab_cells: int = 0
    # of those minutes (and of the rerun reserve), the A/Bs' profiled pairs: per benchmark, minutes per GPU count
    ab_profile: dict[str, dict[int, float]] = field(default_factory=dict)

    @property
    def ab_minutes(self) -> float:
        return sum(sum(m.values()) for m in self.ab_counts.values())

    def ab_allowed(self, benchmark: str) -> float:
        """Minutes of short-baseline A/Bs this benchmark may run tonight: its share (by its A/Bs'
        minutes) of what the night's cells leave of the budget."""
        mine = sum(self.ab_counts.get(benchmark, {}).values())
        free = max(0.0, self.budget_minutes - self.cell_minutes)
        return min(mine, free * mine / self.ab_minutes) if self.ab_minutes else 0.0

    @property
    def minutes(self) -> float:
        return self.cell_minutes + self.rerun_minutes

    @property
    def fits(self) -> bool:
        return self.minutes <= self.budget_minutes


@dataclass
class NightPlan:
    profile: str
    rows: list[PlanRow]
    hosts: list[HostNight]
    problems: list[str]         # why the plan cannot run as configured (empty: feasible)

    @property
    def feasible(self) -> bool:
        return not self.problems

    def to_json(self) -> dict:
        return {"profile": self.profile, "feasible": self.feasible, "problems": self.problems,
                "rows": [asdict(r) | {"seconds": round(r.seconds, 1)} for r in self.rows],
                "hosts": [asdict(h) | {"minutes": round(h.minutes, 1), "fits": h.fits} for h in self.hosts]}


def stored_inputs(store) -> tuple[dict[tuple, Cost], dict[str, str]]:
    """What a night's plan reads from a results store (handed in: core opens none), the same for
    the nights, their A/B budget and `scalebench plan`: the costs of each series' recent nights
    within COST_LOOKBACK_DAYS (a bounded read) and the stored host assignment."""
    import datetime as dt

    since = (dt.datetime.now(dt.timezone.utc).date() - dt.timedelta(days=COST_LOOKBACK_DAYS)).isoformat()
    return (stored_costs(store.figures(since_night=since)),
            {b: row["host"] for b, row in store.assignments().items()})


def stored_costs(figures: list[FigureRow], nights: int = RECENT_NIGHTS) -> dict[tuple, Cost]:
    """(benchmark, profile, host, gpus) -> the median set-up, steady step and evaluation seconds
    over the valid cells of its most recent `nights` nights (the slowest rank's steps)."""
    seen: dict[tuple, dict[str, list]] = {}
    for c in figures:
        f = c["figure"]
        t = (f["timing"] if f else None) or {}
        b = t.get("breakdown") or {}
        if not f or not b.get("timed_steps") or c["role"] in ("rerun", "ab_previous"):
            continue
        s = seen.setdefault((c["benchmark"], c["profile"], c["host"], c["gpus"], c["precision"]),
                            {"nights": [], "cells": []})
        s["cells"].append((c["night"], t["setup_s"], b["step_s"] / b["timed_steps"], t["eval_s"]))
    out = {}
    for key, s in seen.items():
        recent = sorted({n for n, *_ in s["cells"]})[-nights:]
        cells = [x for x in s["cells"] if x[0] in recent]
        setup_s, step_s, eval_s = (statistics.median(x[i] for x in cells) for i in (1, 2, 3))
        out[key] = Cost(setup_s, step_s, eval_s, source=f"stored: median of {len(recent)} night{'s' if len(recent) != 1 else ''}")
    return out


def config_cost(bench: Benchmark, gpus: int) -> Cost:
    est = bench.estimate
    return Cost(est.setup_s, est.step_s.get(gpus) or max(est.step_s.values()), est.eval_s, "config estimate")


def night_plan(benchmarks: dict[str, Benchmark], fleet: Fleet, profile: str, *, stored: dict[tuple, Cost] | None = None,
               repeats: int | None = None, gpu_counts: list[int] | None = None,
               assigned: dict[str, str] | None = None, probe: Benchmark | None = None) -> NightPlan:
    """The plan of one night of `profile` for these benchmarks (of the weekly accuracy run for
    `full`). Repeats: the scheduled runs' (`schedule_repeats`, or the accuracy cut's) unless given.
    `assigned`: each benchmark's assigned host (GPU profiles); else the first host that fits.
    `probe`: the host probe's benchmark (Configs.probe()): a nightly night counts its cells on
    every GPU host, as benchmark "probe (<id>)"."""
    stored = stored or {}
    weekly = profile == "full"
    budget = (fleet.accuracy_window_hours * 60, f"accuracy_window_hours {fleet.accuracy_window_hours:g}") if weekly \
        else (fleet.night_budget_minutes, "night_budget_minutes")
    rows: list[PlanRow] = []
    hosts: dict[str, HostNight] = {}
    problems: list[str] = []
    for bid, bench in sorted(benchmarks.items()):
        res = bench.resolved(profile)
        counts = sorted(gpu_counts or bench.gpu_counts)
        try:
            mine = (assigned or {}).get(bid) if profile in ASSIGNED_PROFILES else None
            host = fleet.host(mine) if mine else host_for(bench, profile, fleet, counts)
        except ConfigError as exc:
            problems.append(str(exc))
            continue
        night = hosts.setdefault(host.name, HostNight(host.name, *budget))
        night.benchmarks.append(bid)
        epochs, planned_repeats = bench.accuracy_cut() if weekly else (res.epochs, bench.schedule_repeats)
        basis = res.timing_basis(counts) or "unknown"
        longest = 0.0
        per_count: dict[int, float] = {}
        step_of: dict[int, float] = {}
        for n, p in ((n, p) for n in counts for p in res.precision):
            for e in epochs:
                row = plan_row(bid, res, host.name, n, p, e, repeats or planned_repeats, basis, stored)
                if row is None:
                    problems.append(f"{bid}: the train split's size is unknown; cannot count its steps")
                    continue
                cell_s = row.cell_s
                rows.append(row)
                night.cell_minutes += row.seconds / 60
                longest = max(longest, cell_s)
                per_count[n] = max(per_count.get(n, 0.0), cell_s)
                step_of[n] = max(step_of.get(n, 0.0), row.step_s)
                if cell_s > row.timeout_s:
                    problems.append(f"{bid} at {n} GPU(s), {e} epoch(s): estimated {cell_s / 60:.1f} min, above its "
                                    f"cell_timeout_minutes {res.cell_timeout_minutes:g}")
                if row.timed_steps < res.min_timed_steps:
                    problems.append(f"{bid} at {n} GPU(s): {row.timed_steps} timed steps, below min_timed_steps "
                                    f"{res.min_timed_steps}")
        # accuracy runs rerun nothing; a figure flagged on a new image runs an A/B of ab_pairs pairs
        # pairs, its last pair profiled (two profiling windows)
        profiled = {n: 2 * profile_window_s(res.profile_steps, step) / 60 for n, step in step_of.items()}
        longest_n = max(per_count, key=lambda n: per_count[n], default=0)
        ab_longest = 2 * bench.ab_pairs * longest / 60 + profiled.get(longest_n, 0.0)
        night.rerun_minutes += 0.0 if weekly else max(bench.confirm_reruns * longest / 60, ab_longest)
        if not weekly:
            night.ab_counts[bid] = {n: 2 * bench.ab_pairs * s / 60 + profiled[n] for n, s in per_count.items()}
            night.ab_profile[bid] = profiled
            night.ab_cells += 2 * bench.ab_pairs * len(per_count)
    if probe is not None and fleet.probe is not None and profile == "nightly":
        for host in fleet.hosts_of("gpu"):
            night = hosts.setdefault(host.name, HostNight(host.name, *budget))
            row = probe_row(probe, fleet, host.name, stored)
            rows.append(row)
            night.cell_minutes += row.seconds / 60
    for h in hosts.values():
        if not h.fits:
            what = "the weekly accuracy run" if weekly else "the night"
            problems.append(f"host {h.host}: {what} takes {h.minutes:.1f} min ({h.cell_minutes:.1f} cells + "
                            f"{h.rerun_minutes:.1f} rerun reserve) against {h.budget_name} ({h.budget_minutes:g} min)"
                            + (f"; {weekly_cuts(h, [r for r in rows if r.host == h.host], benchmarks, stored)}"
                               if weekly else ""))
    return NightPlan(profile, rows, list(hosts.values()), problems)


def weekly_cuts(h: HostNight, rows: list[PlanRow], benchmarks: dict[str, Benchmark], stored: dict[tuple, Cost]) -> str:
    """Cuts of a weekly accuracy run that would fit its host's window, each with the minutes it
    would take: fewer epochs (the same share off every benchmark's), fewer GPU counts (the
    costliest ones above 1, the baseline), or a longer window. Repeats stay: fewer than 3
    cannot show accuracy equivalent."""
    def minutes(keep=lambda r: True, epochs_of=lambda r: r.epochs) -> float:
        total = 0.0
        for r in rows:
            if not keep(r):
                continue
            res = benchmarks[r.benchmark].resolved("full")
            again = plan_row(r.benchmark, res, r.host, r.gpus, r.precision, epochs_of(r), r.repeats, r.timing_basis,
                             stored)
            total += again.seconds / 60 if again else 0.0
        return total

    cuts = []
    for share in [k / 20 for k in range(19, 0, -1)]:  # 95 % .. 5 % of each benchmark's epochs
        m = minutes(epochs_of=lambda r, s=share: max(1, int(r.epochs * s)))
        if m <= h.budget_minutes:
            per = sorted({(r.benchmark, max(1, int(r.epochs * share))) for r in rows})
            cuts.append("accuracy_epochs " + ", ".join(f"[{e}] for {b}" for b, e in per) + f" ({m:.0f} min)")
            break
    dropped: list[int] = []
    for n in sorted({r.gpus for r in rows if r.gpus > 1}, key=lambda n: -sum(r.seconds for r in rows if r.gpus == n)):
        dropped.append(n)
        m = minutes(keep=lambda r: r.gpus not in dropped)
        if m <= h.budget_minutes:
            cuts.append(f"gpu_counts without {', '.join(map(str, sorted(dropped)))} ({m:.0f} min)")
            break
    cuts.append(f"accuracy_window_hours {math.ceil(h.minutes / 60)}")
    return "cuts that fit: " + "; or ".join(cuts)


def plan_row(name: str, res: Resolved, host: str, n: int, precision: str, epochs: int, repeats: int, basis: str,
             stored: dict[tuple, Cost]) -> PlanRow | None:
    """One (GPU count, precision, epochs) row: set-up + steps x step time + evaluations, at the
    stored cost of its benchmark, profile, host, GPU count and precision, else the config's
    estimate; None when the train split's size is unknown."""
    bench = res.benchmark
    steps = res.steps(n, epochs)
    if steps is None:
        return None
    cost = stored.get((bench.id, res.profile, host, n, precision)) or config_cost(bench, n)
    evals = epochs if res.eval_each_epoch else 1
    cell_s = cost.setup_s + steps.steps * cost.step_s + evals * cost.eval_s
    return PlanRow(name, res.profile, host, n, steps.global_batch, bench.lr_policy.lr_for(steps.global_batch),
                   steps.steps_per_epoch, steps.capped, epochs, steps.warmup_steps, steps.timed_steps, basis,
                   cost.step_s, cell_s, repeats, cost.source, res.cell_timeout_minutes * 60, precision)


def probe_row(bench: Benchmark, fleet: Fleet, host: str, stored: dict[tuple, Cost]) -> PlanRow:
    """The host probe's cells on one GPU host: its benchmark's nightly cell at the probe's GPU count,
    in the profile's first precision (the one the probe runs)."""
    probe = fleet.probe
    if probe is None:
        raise ValueError("probe_row: the fleet has no probe")
    res, n = bench.resolved("nightly"), probe.gpus
    row = plan_row(f"{PROBE} ({bench.id})", res, host, n, res.precision[0], min(res.epochs), probe.cells,
                   res.timing_basis([n]) or "unknown", stored)
    if row is None:
        raise ConfigError(f"fleet: field 'probe.benchmark': {bench.id}'s train split size is unknown; "
                          "its probe cells cannot be planned")
    return row


def assigned_plan(benchmarks: dict[str, Benchmark], fleet: Fleet, profile: str, *,
                  stored: dict[tuple, Cost] | None = None, previous: dict[str, str] | None = None,
                  probe: Benchmark | None = None, **kw) -> tuple[NightPlan, Assignment]:
    """The plan on each benchmark's assigned host, and the assignment: decided on the nightly
    night of every benchmark (each one's minutes on its first allowed host), `previous` kept
    where nothing forces a move. The weekly accuracy run uses the same hosts."""
    minutes = {}
    for b, bench in benchmarks.items():
        allowed = candidates(bench, fleet)
        if allowed:
            one = night_plan({b: bench}, fleet, "nightly", stored=stored, assigned={b: allowed[0].name})
            minutes[b] = one.hosts[0].minutes if one.hosts else 0.0
    reserved = probe_row(probe, fleet, "", stored or {}).seconds / 60 if probe is not None and fleet.probe else 0.0
    a = assign(benchmarks, fleet, minutes, previous, reserved=reserved)
    return night_plan(benchmarks, fleet, profile, stored=stored, assigned=a.hosts, probe=probe, **kw), a
