"""Every DAG scalebench makes, as data. `DagSpec` is a DAG's identity (id, description, schedule,
tags, trigger form, doc) and `open_dag` the one place a DAG is opened from one, with the settings
every scalebench DAG shares (no catch-up, one run at a time). The benchmark DAG kinds (the nightly
DAG, the weekly accuracy DAG, the host probe) differ only in data too: a frozen
`BenchmarkDagSpec` per kind, made from the benchmark and the fleet; `dag_factory.build_from_spec`
reads only the spec, so a new kind is one function here and one entry in SPECS, never a branch.
"""
from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from airflow.sdk import DAG
from airflow.timetables.trigger import CronTriggerTimetable

from scalebench.core import cells as cellmod
from scalebench.core.config import Benchmark, Fleet, Host
from scalebench.core.dag_ids import PROBE_DAG_ID

NIGHTLY = "nightly"  # the benchmark's own DAG (scheduled nightly, triggered by hand)


def nightly(cron: str | None) -> CronTriggerTimetable | None:
    """The cron schedule, first run at the next cron time: unpausing a DAG must not start a run of
    the time that just passed (on GPUs hours of cells ahead of any manual trigger). Hence no
    start_date on our DAGs, and a zero window: run_immediately=False still runs the past time
    when unpaused within max(10 % of the period, 5 min) after it (2.4 h for a nightly cron)."""
    return CronTriggerTimetable(cron, timezone="UTC", run_immediately=dt.timedelta(0)) if cron else None


@dataclass(frozen=True)
class DagSpec:
    """A DAG's identity and schedule: what `open_dag` needs (tasks are the builder's)."""
    dag_id: str
    description: str
    schedule: Any                      # a timetable, an asset condition, or None (triggered only)
    tags: tuple[str, ...]
    params: dict = field(default_factory=dict)
    doc: str | None = None
    native_templates: bool = False     # render templated arguments as Python objects (the bisect's conf)


def open_dag(spec: DagSpec) -> DAG:
    """The one way a scalebench DAG is opened: no catch-up and one run at a time, whatever its kind."""
    return DAG(dag_id=spec.dag_id, description=spec.description, schedule=spec.schedule, catchup=False,
               max_active_runs=1, tags=list(spec.tags), params=spec.params, doc_md=spec.doc,
               render_template_as_native_obj=spec.native_templates)


@dataclass(frozen=True)
class ParamDefaults:
    """The trigger form's defaults (and a scheduled run's values) of one DAG kind."""
    gpu_counts: tuple[int, ...]
    profile: str
    epochs: tuple[int, ...] | None = None
    repeats: int = 1
    max_repeats: int = 10


@dataclass(frozen=True)
class BenchmarkDagSpec:
    kind: str                            # what plan_cells plans (nightly, accuracy, probe): an argument, shown in the UI
    dag_id: str
    description: str
    doc: str
    cron: str | None                     # None: never scheduled
    tags: tuple[str, ...]
    groups: tuple[tuple[Host, int], ...]  # one task group of cells per (host, GPU count)
    images: dict[str, str]               # host kind -> the cells' image
    emits_results: bool                  # its finish emits the benchmark's results Asset (starts the report)
    defaults: ParamDefaults


def default_profile(fleet: Fleet) -> str:
    """Scheduled runs use 'nightly' where the fleet has GPUs; a CPU-only fleet runs 'smoke'."""
    return "nightly" if fleet.hosts_of("gpu") else "smoke"


def _about(bench: Benchmark) -> str:
    return (f"**{bench.title}**: per-GPU batch {bench.per_gpu_batch}, epochs {bench.epochs}, "
            f"GPU counts {bench.gpu_counts}, {bench.scaling_mode} scaling, LR {bench.lr_policy.rule} "
            f"(base {bench.lr_policy.base_lr} at batch {bench.lr_policy.reference_batch}).")


def _every_host(bench: Benchmark, fleet: Fleet) -> tuple[tuple[Host, int], ...]:
    return tuple((h, n) for h in fleet.hosts for n in bench.gpu_counts if n <= len(h.device_ids))


def _images(bench: Benchmark) -> dict[str, str]:
    return {str(kind): image for kind, image in bench.images.items()}


def _servable(bench: Benchmark, fleet: Fleet) -> tuple[int, ...]:
    return tuple(n for n in bench.gpu_counts if n <= fleet.max_devices)


def nightly_spec(bench: Benchmark, fleet: Fleet) -> BenchmarkDagSpec:
    return BenchmarkDagSpec(
        kind=NIGHTLY, dag_id=bench.dag_id, description=bench.title, doc=_about(bench), cron=bench.schedule,
        tags=("scalebench", bench.stack, bench.task), groups=_every_host(bench, fleet), images=_images(bench),
        emits_results=True, defaults=ParamDefaults(_servable(bench, fleet), default_profile(fleet)))


def accuracy_spec(bench: Benchmark, fleet: Fleet) -> BenchmarkDagSpec:
    """The weekly accuracy DAG: the same tasks, the `full` profile cut to `accuracy_cut()`, at the
    fleet's `accuracy_schedule` where it has GPU hosts (a CPU-only fleet: smoke, never scheduled)."""
    epochs, repeats = bench.accuracy_cut()
    gpus = bool(fleet.hosts_of("gpu"))
    doc = (f"**Weekly accuracy run of {bench.title}**: the `full` profile at epochs {epochs}, {repeats} repeat(s), "
           f"every `{fleet.accuracy_schedule}` (UTC); nightly runs on its host are skipped for "
           f"{fleet.accuracy_window_hours:g} h from then.\n\n" + _about(bench))
    defaults = (ParamDefaults(_servable(bench, fleet), "full", tuple(epochs), repeats) if gpus
                else ParamDefaults(_servable(bench, fleet), default_profile(fleet)))
    return BenchmarkDagSpec(
        kind=cellmod.ACCURACY, dag_id=bench.accuracy_dag_id, description=f"{bench.title}: weekly accuracy run",
        doc=doc, cron=fleet.accuracy_schedule if gpus else None, tags=("scalebench", bench.stack, bench.task, "accuracy"),
        groups=_every_host(bench, fleet), images=_images(bench), emits_results=True, defaults=defaults)


def probe_spec(bench: Benchmark, fleet: Fleet) -> BenchmarkDagSpec:
    """The host probe: its cells of `bench` on every GPU host, before the benchmarks; its median
    throughput against the host's recent nights is the host's night factor, never a report row."""
    probe = fleet.host_probe()
    doc = (f"**Host probe**: {probe.cells} cells of {bench.id} at {probe.gpus} GPU(s) on every GPU host, every "
           f"`{probe.schedule}` (UTC), before the benchmarks. Their median throughput against the host's recent "
           "nights is its night factor; they never make a row of the report.\n\n" + _about(bench))
    images = {kind: probe.image or image for kind, image in _images(bench).items()}
    return BenchmarkDagSpec(
        kind=cellmod.PROBE, dag_id=PROBE_DAG_ID, description="host probe: the GPU hosts' night factor", doc=doc,
        cron=probe.schedule, tags=("scalebench", bench.stack, bench.task, "probe"),
        groups=tuple((h, probe.gpus) for h in fleet.hosts_of("gpu")), images=images, emits_results=False,
        defaults=ParamDefaults((probe.gpus,), default_profile(fleet), None, probe.cells, max_repeats=48))


SPECS: dict[str, Callable[[Benchmark, Fleet], BenchmarkDagSpec]] = {
    NIGHTLY: nightly_spec, cellmod.ACCURACY: accuracy_spec, cellmod.PROBE: probe_spec}
