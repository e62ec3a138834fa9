"""The tasks of a benchmark DAG, as module-level functions; `dag_factory` only wires them.

Each takes the benchmark's id (literal arguments, rendered in the UI) and what its upstream
tasks returned. Nothing heavy is imported at module level: the store, GX and the analysis load
inside the tasks, so parsing the DAG files stays light.
"""
from __future__ import annotations

from collections.abc import Iterable

from airflow.sdk import Asset, task
from airflow.sdk.exceptions import AirflowFailException
from airflow.task.trigger_rule import TriggerRule

from scalebench.core import cells as cellmod
from scalebench.core.dag_ids import PROBE_DAG_ID
from scalebench.core.records import PlannedCell
from scalebench.core import nights
from scalebench.core.config import ConfigError, Configs
from scalebench.orchestration.notes import fail_with_note, note
from scalebench.orchestration.dags.run_params import RunParams

# task ids, in the order a run reaches them; a cell slice is <group>.cells, its mapped cells
# <group>.train; the rerun steps' groups hold <step>.<group>.cells and .rerun / .more
PLAN, RECORD, RECORD_RERUNS, PLAN_MORE_PAIRS, RECORD_MORE_PAIRS = (
    "plan_cells", "record", "record_reruns", "plan_more_pairs", "record_more_pairs")
CELLS, TRAIN, RERUN, MORE = "cells", "train", "rerun", "more"

def results_asset(bench_id: str) -> Asset:
    """What a benchmark's run emits once its results are recorded: it starts the report DAG."""
    return Asset(name=f"scalebench_results_{bench_id}", uri=f"scalebench://results/{bench_id}")


@task
def plan_cells(bench_id: str, group_ids: list[str], kind: str = "nightly", **context) -> list[PlannedCell]:
    """The cell matrix of this run from its Params; refused now (never queued forever) when it
    cannot run, e.g. more GPUs than any host has. `kind` "accuracy": the weekly accuracy DAG, whose
    runs are of run type "accuracy". A scheduled nightly run inside its host's accuracy window
    plans nothing and records the run as skipped, with the window, for the report."""
    from scalebench.core.attempt_folders import UnsafeName, segment

    p, run = RunParams.of(context["params"]), context["dag_run"]
    try:  # refused here, before anything is written under it
        segment(run.run_id)
    except UnsafeName as exc:
        fail_with_note(context["ti"], f"{exc}; trigger the run again with another run id")
    configs = Configs()
    b = configs.benchmark(bench_id)
    run_type = str(run.run_type).split(".")[-1].lower()
    if kind == cellmod.ACCURACY:
        run_type = cellmod.ACCURACY
    if kind == cellmod.PROBE:
        return skip_idle(_plan_probe(b, configs, p, run, run_type, context), context)
    if run_type == "scheduled" and kind != cellmod.ACCURACY and (skipped := _accuracy_window_open(b, configs, p, run)):
        print(f"skipped: {skipped}")
        _record_skipped(b, run, skipped)
        note(context["ti"], f"nightly run skipped: {skipped}")
        return skip_idle([], context)
    try:
        planned = cellmod.plan(b, configs.fleet, profile=p.profile, run_id=run.run_id,
                               host=_assigned_host(configs, b, p.profile), gpu_counts=p.gpu_counts, epochs=p.epochs,
                               repeats=cellmod.repeats_for(b, run_type, p.repeats), seed=p.seed, run_type=run_type,
                               night=nights.night_of(run), image_tag=p.image_tag, precisions=p.precisions,
                               ab_images=p.ab_images, profile_ops=p.profile_ops)
    except ConfigError as exc:
        fail_with_note(context["ti"], str(exc))
    unknown = set(cellmod.group_by_task(planned)) - set(group_ids)
    if unknown:
        raise AirflowFailException(f"plan produced cells for {sorted(unknown)} that this DAG lacks; "
                                   "the fleet changed since the DAG was parsed")
    print(f"planned {len(planned)} cells: " + ", ".join(c["label"] for c in planned))
    return skip_idle(planned, context)


CHECK_DATASET = "check_dataset_"


def check_dataset_id(host_name: str) -> str:
    return CHECK_DATASET + host_name.replace("-", "_")


def skip_idle(planned: list[PlannedCell], context) -> list[PlannedCell]:
    """The plan, after skipping every task that would only start to find nothing to do (see
    idle_tasks): a run plans on one host and some GPU counts, a DAG has groups for every host and count."""
    from airflow.sdk.bases.xcom import BaseXCom
    from airflow.sdk.exceptions import DownstreamTasksSkipped

    idle = idle_tasks(context["dag"].task_ids, planned)
    if not idle:
        return planned
    context["ti"].xcom_push(key=BaseXCom.XCOM_RETURN_KEY, value=planned)  # raising below returns nothing
    raise DownstreamTasksSkipped(tasks=idle)


def idle_tasks(task_ids: Iterable[str], cells: list[PlannedCell], step: str = "") -> list[str]:
    """The cell slices (`<group>.cells`, each a task process) of a step's groups that have none of
    `cells`; for the first step (the cells' own groups) also the dataset checks of hosts without cells.
    `step`: "" or the rerun steps' group (RERUNS, MORE_PAIRS)."""
    busy = {slice_id(g, step) for g in cellmod.group_by_task(cells)} | {check_dataset_id(c["host"]) for c in cells}
    return [t for t in task_ids if t not in busy and ((not step and t.startswith(CHECK_DATASET)) or _is_slice(t, step))]


def _is_slice(task_id: str, step: str) -> bool:
    parts = task_id.split(".")
    return len(parts) >= 2 and task_id == slice_id(parts[-2], step)


def slice_id(group: str, step: str = "") -> str:
    """The task id of a GPU set's slice of the plan: <group>.cells, or <step>.<group>.cells."""
    return ".".join(p for p in (step, group, CELLS) if p)


def _plan_probe(b, configs: Configs, p: RunParams, run, run_type: str, context) -> list[PlannedCell]:
    """The host probe: its cells on every GPU host (role `probe`), the fleet's count of cells a
    scheduled night; none on a night inside the weekly accuracy window (the hosts are busy)."""
    from scalebench.core.accuracy_window import window_at

    probe = configs.fleet.host_probe()
    planned: list[PlannedCell] = []
    try:
        for host in configs.fleet.hosts_of("gpu"):
            window = window_at(configs.fleet, host, run.logical_date or run.run_after)
            if run_type == "scheduled" and window is not None:
                print(f"no probe on {host.name}: {window.line(host.name)}")
                continue
            planned += [PlannedCell({**c, "role": cellmod.PROBE}) for c in cellmod.plan(
                b, configs.fleet, profile=p.profile, run_id=run.run_id, host=host, gpu_counts=[probe.gpus],
                repeats=probe.cells if run_type == "scheduled" else p.repeats, seed=p.seed, run_type=run_type,
                night=nights.night_of(run), dag_id=PROBE_DAG_ID,
                # one workload a night: the profile's first precision (what the plan counts)
                precisions=(p.precisions or b.resolved(p.profile).precision)[:1])]
    except ConfigError as exc:
        fail_with_note(context["ti"], str(exc))
    print(f"planned {len(planned)} probe cells on {len(configs.fleet.hosts_of('gpu'))} GPU host(s)")
    return planned


def _assigned_host(configs: Configs, bench, profile: str):
    """The benchmark's assigned GPU host for a GPU profile (settled and stored now), else None."""
    from scalebench.core.assignment import ASSIGNED_PROFILES
    from scalebench.store.assignments import settle
    from scalebench.store.results import Store

    if profile not in ASSIGNED_PROFILES or not configs.fleet.hosts_of("gpu"):
        return None
    return configs.fleet.host(settle(configs, Store()).host_of(bench.id))


def _accuracy_window_open(bench, configs: Configs, params: RunParams, run) -> str | None:
    """Why this scheduled nightly run is skipped (its host's accuracy window is open); None when it runs."""
    from scalebench.core.accuracy_window import window_at

    try:  # the host the run would plan on: its assigned one on a GPU fleet
        host = (_assigned_host(configs, bench, params.profile)
                or cellmod.host_for(bench, params.profile, configs.fleet, params.gpu_counts))
    except ConfigError:
        return None  # plan() below refuses it with its own message
    window = window_at(configs.fleet, host, run.logical_date or run.run_after)
    return None if window is None else window.line(host.name)


def _record_skipped(bench, run, why: str) -> None:
    """The skipped run's row (the report names the window), kept through a database outage."""
    from scalebench.store.db import outlasting_outages
    from scalebench.store.results import Store

    outlasting_outages(lambda: Store().record_run(dag_id=bench.dag_id, run_id=run.run_id, benchmark=bench.id,
                                                  run_type="scheduled", night=nights.night_of(run),
                                                  counts={"skipped": why}),
                       what=f"record {bench.dag_id} {run.run_id} as skipped")


@task
def select_cells(planned: list[PlannedCell], group: str) -> list[PlannedCell]:
    """This group's slice of the plan (mapping needs a plain list of the task's own XCom)."""
    return cellmod.group_by_task(planned).get(group, [])


@task
def check_dataset(bench_id: str, host_name: str, planned: list[PlannedCell], **context) -> dict:
    """The dataset of this host's planned cells, checked once on the host itself (the task runs on
    its queue: the data is on its disk); plan_cells skips it where the run has no cell there. If
    it fails, every planned cell is recorded as failed with this task's reason, which becomes its note."""
    from scalebench.cell.datasets import DatasetError, prepare
    from scalebench.cell.failures import Failure, fail_planned_cells

    mine = [c for c in planned if c["host"] == host_name]
    p = RunParams.of(context["params"])
    configs = Configs()
    b = configs.benchmark(bench_id)
    try:
        checked = prepare(b, p.profile, configs.fleet.host(host_name))
    except Exception as exc:
        reason = "dataset_missing" if isinstance(exc, DatasetError) else "unknown"
        detail = str(exc) if isinstance(exc, DatasetError) else f"{type(exc).__name__}: {exc}"
        lines = fail_planned_cells(mine, "check_dataset", Failure(reason, None, detail))
        print("\n".join(lines))
        fail_with_note(context["ti"], f"check_dataset failed ({reason}): {detail}; "
                                      f"{len(lines)} planned cells recorded as failed")
    return checked


@task(trigger_rule=TriggerRule.ALL_DONE)
def record(bench_id: str, dag_id: str, planned: list[PlannedCell], **context) -> None:
    """Every planned cell's attempts into the store, whatever their tasks' states (XCom `counts`);
    then the run's one decision on reruns (XCom `reruns`, see plan_reruns). With nothing flagged,
    every task of the rerun and A/B steps is skipped here at once, so the run goes straight on to
    finish and check_cells instead of walking each skipped step; with reruns, the cell slices of
    the groups that have none."""
    from airflow.sdk.exceptions import DownstreamTasksSkipped

    from scalebench.store.recording import record_run_when_reachable

    run, ti = context["dag_run"], context["ti"]
    counts = record_run_when_reachable(dag_id, run.run_id, planned)
    print(f"recorded run {run.run_id} (night {nights.night_of(run)}): {counts}")
    summarize(planned)
    ti.xcom_push(key="counts", value=counts)
    reruns = plan_reruns(bench_id, planned, context)
    ti.xcom_push(key="reruns", value=reruns)
    skipped = idle_tasks(context["dag"].task_ids, reruns, RERUNS) if reruns else rerun_steps(context["dag"].task_ids)
    if skipped:  # with reruns: the groups that have none
        raise DownstreamTasksSkipped(tasks=skipped)


RERUNS, MORE_PAIRS = "reruns", "more_pairs"  # the task groups of the rerun and A/B steps


def rerun_steps(task_ids: Iterable[str]) -> list[str]:
    """The tasks a run skips when nothing is flagged: the rerun and A/B groups and their records."""
    return [t for t in task_ids if t.split(".")[0] in (RERUNS, MORE_PAIRS)
            or t in (RECORD_RERUNS, PLAN_MORE_PAIRS, RECORD_MORE_PAIRS)]


def summarize(planned: list[PlannedCell]) -> None:
    """The history pages' summaries of the nights these cells belong to (the host probe has none)."""
    from scalebench.report.summary import summarize_night
    from scalebench.store.db import outlasting_outages
    from scalebench.store.results import Store

    for bench, night in sorted({(c["benchmark"], c["night"]) for c in planned
                                if c.get("role", "measure") != cellmod.PROBE and c.get("night")}):
        n = outlasting_outages(lambda b=bench, n=night: summarize_night(Store(), b, n), what=f"summarize {bench} {night}")
        print(f"history summaries of {bench} on {night}: {n} rows (GPU count x precision)")


def plan_reruns(bench_id: str, planned: list[PlannedCell], context) -> list[PlannedCell]:
    """Each GPU count whose throughput looks regressed is rerun k times (confirm_reruns), or, when
    it came with a new image, run as an A/B with the previous image (ab_pairs pairs, the last one
    profiled: the profile's profile_steps); the host
    probe's cells are never rerun (they are judged only as the host's night factor)."""
    from scalebench.analysis.reruns import plan_reruns as plan
    from scalebench.store.results import Store

    planned = [c for c in planned if c.get("role", "measure") not in (cellmod.PROBE, cellmod.BISECT)]
    if not planned:
        return []

    bench = Configs().benchmark(bench_id)
    k = bench.confirm_reruns
    reruns, flagged = plan(Store(), planned, k, gates_of(bench_id), ab_pairs=bench.ab_pairs,
                           image_available=image_available if _cells_run_here() else lambda ref: True,
                           short_ab=lambda: short_ab_budget(bench_id, planned[0]["profile"]),
                           profile_steps=bench.resolved(planned[0]["profile"]).profile_steps)
    for line in flagged:
        print(f"flagged, {k} reruns: {line}" if "A/B with the previous image" not in line else f"flagged, A/B: {line}")
    if flagged:
        note(context["ti"], f"{len(flagged)} flagged, {len(reruns)} reruns: " + "; ".join(flagged))
    else:
        print("nothing looks regressed: no reruns")
    return reruns


def short_ab_budget(bench_id: str, profile: str) -> tuple[float, dict[int, float]] | None:
    """The minutes the night's plan (core.plan, over every benchmark on the assigned hosts) leaves
    this benchmark for A/Bs of new images on short baselines, and each GPU count's A/B minutes;
    None (no cap) where the plan cannot be made."""
    from scalebench.core.config import ConfigError
    from scalebench.core.plan import night_plan, stored_inputs
    from scalebench.store.results import Store

    configs = Configs()
    costs, assigned = stored_inputs(Store())
    try:
        plan = night_plan(configs.benchmarks, configs.fleet, profile, stored=costs, probe=configs.probe(),
                          assigned=assigned)
    except ConfigError as exc:
        print(f"no budget for A/Bs on short baselines (the plan: {exc}): every one runs")
        return None
    host = next((h for h in plan.hosts if bench_id in h.ab_counts), None)
    if host is None:
        return None
    allowed = host.ab_allowed(bench_id)
    print(f"A/Bs of new images on short baselines: {allowed:.0f} of {sum(host.ab_counts[bench_id].values()):.0f} min "
          f"fit host {host.host}'s night ({host.budget_minutes:g} min budget, {host.cell_minutes:.0f} min of cells)")
    return allowed, host.ab_counts[bench_id]


def gates_of(bench_id: str):
    """The detector's gates for this benchmark: the fleet's (driver under test or not), its A/B cap."""
    from dataclasses import replace

    from scalebench.analysis.regress import gates_for

    configs = Configs()
    return replace(gates_for(configs.fleet), ab_max_pairs=configs.benchmark(bench_id).ab_max_pairs)


def _cells_run_here() -> bool:
    """Whether this worker's Docker engine is the one the cells run on: one machine (the local or
    sequential executor). With Celery the cells run on their host's worker, whose engine this one
    cannot see: an A/B is planned, and a previous image gone from that host fails its cells
    (image_missing), which record_reruns then reports."""
    from airflow.configuration import conf

    return conf.get("core", "executor", fallback="LocalExecutor") in ("LocalExecutor", "SequentialExecutor")


def image_available(ref: str) -> bool:
    """Whether this worker's Docker engine has the image (the cells of its host run there); an
    engine that does not answer is taken to have it (the cell then fails with its own reason)."""
    from scalebench.cell.engine import Engine

    return Engine(timeout_s=30).has_image(ref)


@task(trigger_rule=TriggerRule.ALL_DONE)
def record_reruns(bench_id: str, dag_id: str, planned: list[PlannedCell], **context) -> dict:
    """The reruns into the store, each flag confirmed or cleared (an A/B may stay unknown)."""
    from scalebench.analysis.reruns import verdicts
    from scalebench.store.recording import record_run_when_reachable
    from scalebench.store.results import Store

    run = context["dag_run"]
    reruns = context["ti"].xcom_pull(task_ids=RECORD, key="reruns") or []
    if reruns:
        record_run_when_reachable(dag_id, run.run_id, reruns, run_row=False)
        summarize(reruns)
    return _say_verdicts(context, verdicts(Store(), planned, reruns, gates_of(bench_id)), "reruns")


def _say_verdicts(context, verdict: dict, what: str) -> dict:
    for kind in ("confirmed", "cleared", "unknown"):
        for line in verdict.get(kind, []):
            print(f"{kind} by {what}: {line}")
    if verdict["confirmed"] or verdict["cleared"] or verdict.get("unknown"):
        note(context["ti"], f"{what} confirmed {len(verdict['confirmed'])}, cleared {len(verdict['cleared'])}"
                            f"{', unknown ' + str(len(verdict['unknown'])) if verdict.get('unknown') else ''}: "
                            + "; ".join(verdict["confirmed"] + verdict["cleared"] + verdict.get("unknown", [])))
    return verdict


@task.short_circuit(trigger_rule=TriggerRule.ALL_DONE, ignore_downstream_trigger_rules=False)
def plan_more_pairs(bench_id: str, planned: list[PlannedCell], verdict: dict, **context) -> list[PlannedCell]:
    """An A/B that stayed "unknown" adds pairs, up to the benchmark's ab_max_pairs."""
    from scalebench.analysis.reruns import more_pairs
    from scalebench.store.results import Store

    reruns = context["ti"].xcom_pull(task_ids=RECORD, key="reruns") or []
    if not verdict or not verdict.get("unknown") or not reruns:
        return []
    cells, why = more_pairs(Store(), planned, reruns, gates_of(bench_id))
    for line in why:
        print(line)
    if why:
        note(context["ti"], "; ".join(why))
    return cells


@task(trigger_rule=TriggerRule.ALL_DONE)
def record_more_pairs(bench_id: str, dag_id: str, planned: list[PlannedCell], **context) -> dict:
    """The added A/B pairs into the store and the final verdicts."""
    from scalebench.analysis.reruns import verdicts
    from scalebench.store.recording import record_run_when_reachable
    from scalebench.store.results import Store

    run = context["dag_run"]
    more = context["ti"].xcom_pull(task_ids=PLAN_MORE_PAIRS) or []
    if not more:
        return {}
    record_run_when_reachable(dag_id, run.run_id, more, run_row=False)
    summarize(more)
    reruns = context["ti"].xcom_pull(task_ids=RECORD, key="reruns") or []
    return _say_verdicts(context, verdicts(Store(), planned, reruns + more, gates_of(bench_id)), "A/B pairs")


# after record (nothing flagged) or after record_more_pairs (the rerun steps ran): whichever ran
@task(trigger_rule=TriggerRule.NONE_FAILED_MIN_ONE_SUCCESS)
def finish(bench_id: str, dag_id: str, **context) -> None:
    """The run's results are all in: emits the benchmark's results Asset with the run's night, so the
    report DAG writes that night's report (the builder gives this task the asset as its outlet)."""
    run = context["dag_run"]
    context["outlet_events"][results_asset(bench_id)].extra = {"night": nights.night_of(run), "dag_id": dag_id,
                                                               "run_id": run.run_id}


@task(trigger_rule=TriggerRule.ALL_DONE)
def check_cells(counts: dict) -> None:
    """The run's verdict: failed if any planned cell has no valid attempt (leaves decide a run's state)."""
    if counts.get("valid", 0) + len(counts["not_valid"]) == 0:
        print("no cells planned in this run")
        return
    if counts["not_valid"]:
        raise AirflowFailException(f"{len(counts['not_valid'])} of {len(counts['not_valid']) + counts['valid']} "
                                   "cells have no valid result: " + "; ".join(counts["not_valid"]))
    print(f"all {counts['valid']} cells valid")
