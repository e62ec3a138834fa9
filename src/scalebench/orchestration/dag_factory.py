"""One Airflow DAG per benchmark config, plus the routing that pools and queues need.

Chain: plan_cells -> check_dataset -> <host>_<n>gpu.{cells, train (mapped over the group's slice
of the plan; each cell trains, then is validated with GX inside its task)} -> record -> plan_reruns
(GPU counts whose throughput looks regressed, k reruns each) -> <host>_<n>gpu.{reruns, rerun} ->
record_reruns (confirms or clears each flag; emits the benchmark's results Asset, with the run's
night) -> check_cells. A config that does not load
becomes a placeholder DAG instead. Nothing heavy is imported here: GX, pandas and matplotlib
load inside the tasks.
"""
from __future__ import annotations

import datetime as dt

from airflow.sdk import DAG, Asset, Param, TaskGroup, task
from airflow.sdk.exceptions import AirflowFailException
from airflow.task.trigger_rule import TriggerRule
from airflow.timetables.trigger import CronTriggerTimetable

from scalebench.core import cells as cellmod
from scalebench.core import nights
from scalebench.orchestration import notes
from scalebench.core.attempt_folders import safe
from scalebench.core.config import PROFILES, Benchmark, ConfigError, Configs, Fleet
from scalebench.orchestration.operators import CellDockerOperator


def nightly(cron: str | None) -> CronTriggerTimetable | None:
    """The cron schedule, first run at the next cron time: unpausing a DAG must not start a run of
    the time that just passed (on GPUs hours of cells ahead of any manual trigger). Hence no
    start_date on our DAGs, and a zero window: run_immediately=False still runs the past time
    when unpaused within max(10 % of the period, 5 min) after it (2.4 h for a nightly cron)."""
    return CronTriggerTimetable(cron, timezone="UTC", run_immediately=dt.timedelta(0)) if cron else None


def results_asset(bench_id: str) -> Asset:
    return Asset(name=f"scalebench_results_{bench_id}", uri=f"scalebench://results/{bench_id}")


def default_profile(fleet: Fleet) -> str:
    """Scheduled runs use 'nightly' where the fleet has GPUs; a CPU-only fleet runs 'smoke'."""
    return "nightly" if fleet.hosts_of("gpu") else "smoke"


def params_for(bench: Benchmark, fleet: Fleet) -> dict[str, Param]:
    servable = [n for n in range(1, fleet.max_devices + 1)]
    defaults = [n for n in bench.gpu_counts if n <= fleet.max_devices]
    return {
        "gpu_counts": Param(defaults, type="array", items={"type": "integer", "enum": servable}, minItems=1,
                            uniqueItems=True, examples=servable, title="GPU counts",
                            description=f"Which GPU counts to run (this fleet serves 1-{fleet.max_devices})."),
        "epochs": Param(None, type=["null", "array"], items={"type": "integer", "minimum": 1, "maximum": 1000},
                        title="Epochs", description="Epoch list; empty means the profile's own list."),
        "repeats": Param(1, type="integer", minimum=1, maximum=10, title="Repeats",
                         description="Repeats per (GPU count, epochs); each repeat uses seed + repeat - 1."),
        "profile": Param(default_profile(fleet), type="string", enum=list(PROFILES), title="Profile",
                         description="smoke: CPU, synthetic data, seconds. nightly: GPU, short fixed-step runs. "
                                     "full: the study's epochs on the full dataset."),
        "seed": Param(0, type="integer", minimum=0, maximum=2**31 - 1, title="Seed"),
        "image_tag": Param(None, type=["null", "string"], pattern=r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$",
                           title="Candidate image tag",
                           description=f"Run another tag of {bench.images.get('gpu') or bench.images.get('cpu')}'s "
                                       "repository (e.g. a framework upgrade) before it goes nightly; compare the "
                                       "runs with `scalebench compare RUN_A RUN_B`. Empty: the configured image."),
    }


def build_benchmark_dag(bench: Benchmark, fleet: Fleet) -> DAG:
    asset = results_asset(bench.id)
    with DAG(
        dag_id=bench.dag_id,
        description=bench.title,
        schedule=nightly(bench.schedule),
        catchup=False,
        max_active_runs=1,
        params=params_for(bench, fleet),
        tags=["scalebench", bench.stack, bench.task],
        doc_md=f"**{bench.title}**: per-GPU batch {bench.per_gpu_batch}, epochs {bench.epochs}, "
               f"GPU counts {bench.gpu_counts}, {bench.scaling_mode} scaling, LR {bench.lr_policy.rule} "
               f"(base {bench.lr_policy.base_lr} at batch {bench.lr_policy.reference_batch}).",
    ) as dag:

        @task
        def plan_cells(**context) -> list[dict]:
            p, run = context["params"], context["dag_run"]
            configs = Configs()
            b = configs.benchmark(bench.id)
            try:
                planned = cellmod.plan(b, configs.fleet, profile=p["profile"], run_id=run.run_id,
                                       gpu_counts=p["gpu_counts"], epochs=p["epochs"] or None, repeats=p["repeats"],
                                       seed=p["seed"], run_type=str(run.run_type).split(".")[-1].lower(),
                                       night=nights.night_of(run), image_tag=p.get("image_tag") or None)
            except ConfigError as exc:  # e.g. more GPUs than any host has: refuse now, never queue forever
                print(f"task note: {notes.set_note(context['ti'], str(exc))}")
                raise AirflowFailException(str(exc)) from None
            unknown = set(cellmod.group_by_task(planned)) - set(group_ids)
            if unknown:
                raise AirflowFailException(f"plan produced cells for {sorted(unknown)} that this DAG lacks; "
                                           "the fleet changed since the DAG was parsed")
            print(f"planned {len(planned)} cells: " + ", ".join(c["label"] for c in planned))
            return planned

        @task
        def select_cells(planned: list[dict], group: str) -> list[dict]:
            """This group's slice of the plan (mapping needs a plain list of the task's own XCom)."""
            return cellmod.group_by_task(planned).get(group, [])

        @task
        def check_dataset(planned: list[dict], **context) -> dict:
            """The dataset of the planned cells, checked once; if it fails, every planned cell is
            recorded as failed with this task's reason, and the reason becomes this task's note."""
            from scalebench.cell.datasets import DatasetError, prepare
            from scalebench.cell.failures import Failure, fail_planned_cells

            p = context["params"]
            configs = Configs()
            b = configs.benchmark(bench.id)
            try:
                return prepare(b, p["profile"], cellmod.host_for(b, p["profile"], configs.fleet, p["gpu_counts"]))
            except Exception as exc:
                reason = "dataset_missing" if isinstance(exc, DatasetError) else "unknown"
                detail = str(exc) if isinstance(exc, DatasetError) else f"{type(exc).__name__}: {exc}"
                lines = fail_planned_cells(planned, "check_dataset", Failure(reason, None, detail))
                message = f"check_dataset failed ({reason}): {detail}; {len(lines)} planned cells recorded as failed"
                print("\n".join(lines))
                print(f"task note: {notes.set_note(context['ti'], message)}")
                raise AirflowFailException(message) from None

        @task(trigger_rule=TriggerRule.ALL_DONE)
        def record(planned: list[dict], **context) -> dict:
            from scalebench.store.recording import record_run_when_reachable

            run = context["dag_run"]
            counts = record_run_when_reachable(bench.dag_id, run.run_id, planned)
            print(f"recorded run {run.run_id} (night {nights.night_of(run)}): {counts}")
            return counts

        # a short circuit: with nothing flagged the rerun tasks are skipped without starting
        @task.short_circuit(trigger_rule=TriggerRule.ALL_DONE, ignore_downstream_trigger_rules=False)
        def plan_reruns(planned: list[dict], counts: dict, **context) -> list[dict]:
            """Each GPU count whose throughput looks regressed is rerun k times (confirm_reruns)."""
            from scalebench.analysis.reruns import plan_reruns as plan
            from scalebench.store.results import Store

            k = Configs().benchmark(bench.id).confirm_reruns
            reruns, flagged = plan(Store(), planned, k)
            for line in flagged:
                print(f"flagged, {k} reruns: {line}")
            if flagged:
                print(f"task note: {notes.set_note(context['ti'], f'{len(flagged)} flagged, {len(reruns)} reruns: ' + '; '.join(flagged))}")
            else:
                print("nothing looks regressed: no reruns")
            return reruns

        @task(trigger_rule=TriggerRule.ALL_DONE, outlets=[asset])
        def record_reruns(planned: list[dict], **context) -> dict:
            from scalebench.store.recording import record_run_when_reachable
            from scalebench.analysis.reruns import verdicts
            from scalebench.store.results import Store

            run = context["dag_run"]
            # pulled, not passed: a direct downstream of the short circuit would be skipped with the reruns
            reruns = context["ti"].xcom_pull(task_ids="plan_reruns") or []
            if reruns:
                record_run_when_reachable(bench.dag_id, run.run_id, reruns, run_row=False)
            verdict = verdicts(Store(), planned, reruns)
            for kind in ("confirmed", "cleared"):
                for line in verdict[kind]:
                    print(f"{kind} by reruns: {line}")
            if verdict["confirmed"] or verdict["cleared"]:
                text = f"reruns confirmed {len(verdict['confirmed'])}, cleared {len(verdict['cleared'])}: " + \
                    "; ".join(verdict["confirmed"] + verdict["cleared"])
                print(f"task note: {notes.set_note(context['ti'], text)}")
            # the report DAG writes the report of this night, whenever this run finishes
            context["outlet_events"][asset].extra = {"night": nights.night_of(run), "dag_id": bench.dag_id,
                                                     "run_id": run.run_id}
            return verdict

        @task(trigger_rule=TriggerRule.ALL_DONE)
        def check_cells(counts: dict) -> None:
            """The run's verdict: failed if any planned cell has no valid attempt (leaves decide a run's state)."""
            if counts["not_valid"]:
                raise AirflowFailException(f"{len(counts['not_valid'])} of {len(counts['not_valid']) + counts['valid']} "
                                           "cells have no valid result: " + "; ".join(counts["not_valid"]))
            print(f"all {counts['valid']} cells valid")

        group_ids = [cellmod.group_id(h.name, n) for h in fleet.hosts for n in bench.gpu_counts
                     if n <= len(h.device_ids)]
        plan = plan_cells()
        checked = check_dataset(plan)
        recorded = record(plan)
        reruns = plan_reruns(plan, recorded)
        rerun_done = record_reruns(plan)
        max_timeout = max(bench.resolved(p).cell_timeout_minutes for p in PROFILES)
        rerun_done >> check_cells(recorded)
        for host in fleet.hosts:
            for n in bench.gpu_counts:
                if n > len(host.device_ids):
                    continue
                gid = cellmod.group_id(host.name, n)
                with TaskGroup(group_id=gid, tooltip=f"{n} GPU cells on {host.name}"):
                    mine = select_cells.override(task_id="cells")(plan, gid)
                    again = select_cells.override(task_id="reruns")(reruns, gid)
                    partial_args = dict(
                        benchmark_id=bench.id,
                        host_name=host.name,
                        dataset=checked,  # an XComArg: resolved at run time, and an upstream dependency
                        image=bench.images[host.kind],
                        queue=host.queue,
                        pool=host.pool,
                        pool_slots=n,
                        # the profile's own timeout is enforced inside the task; this is the backstop
                        execution_timeout=dt.timedelta(minutes=max_timeout + 5),
                        retries=bench.retries,
                        retry_delay=dt.timedelta(seconds=bench.retry_delay_s),
                        retry_exponential_backoff=2.0,
                        map_index_template="{{ task.cell['label'] }}",
                    )
                    train = CellDockerOperator.partial(task_id="train", **partial_args).expand(cell=mine)
                    rerun = CellDockerOperator.partial(task_id="rerun", **partial_args).expand(cell=again)
                train >> recorded
                rerun >> rerun_done
    return dag


def build_config_error_dag(stem: str, error: ConfigError) -> DAG:
    """Stands in for a benchmark whose config does not load: visible in the UI with the error
    (file, field, value), never scheduled; its one task fails with the same message."""
    message = str(error)
    with DAG(
        dag_id=f"scalebench_{safe(stem)}",
        description=f"CONFIG ERROR: {message.splitlines()[0][:200]}",
        schedule=None,
        catchup=False,
        tags=["scalebench", "config-error"],
        doc_md=f"**The config of benchmark `{stem}` does not load**, so its DAG cannot be built. Fix the file "
               f"and the DAG comes back at the next parse; the other benchmarks are not affected.\n\n```\n{message}\n```",
    ) as dag:

        @task
        def config_error() -> None:
            raise AirflowFailException(message)

        config_error()
    return dag


def build_all(configs: Configs | None = None) -> dict[str, DAG]:
    """Every benchmark's DAG; a config that does not load gets a placeholder DAG with its error."""
    import logging

    configs = configs or Configs()
    good, broken = configs.load_all()
    dags = {b.dag_id: build_benchmark_dag(b, configs.fleet) for b in good.values()}
    for stem, error in broken.items():
        logging.getLogger(__name__).error("benchmark config %s does not load: %s", stem, error)
        dags[f"scalebench_{safe(stem)}"] = build_config_error_dag(stem, error)
    return dags
