"""One Airflow DAG per benchmark config, plus the routing that pools and queues need. The
tasks themselves are module-level functions in `benchmark_tasks`; this module wires them.

Chain: plan_cells -> check_dataset_<host> (on the host's queue; skipped where the run has no
cell) -> <host>_<n>gpu.{cells, train (mapped over the group's slice of the plan; each cell trains,
then is validated with GX inside its task)} -> record (the cells into the store, then the one
decision on reruns) -> check_cells (the run's verdict) and finish (emits the benchmark's results
Asset with the run's night). Only when a GPU count's throughput looks regressed does the run take
the rerun steps between record and finish: reruns.<host>_<n>gpu.{cells, rerun} (k reruns, or an A/B
of the previous and the new image when the flag came with a new image) -> record_reruns (confirms
or clears each flag) -> plan_more_pairs (an A/B that says "unknown" adds pairs) ->
more_pairs.<host>_<n>gpu.{cells, more} -> record_more_pairs. Each step is its own task group, after
the one before it, so the groups form a DAG too (Airflow's Grid and Graph sort them). A config that
does not load becomes a placeholder DAG instead. Nothing heavy is imported here: GX, pandas and
matplotlib load inside the tasks.
"""
from __future__ import annotations

import datetime as dt
from collections.abc import Callable

from airflow.sdk import DAG, Param, TaskGroup, XComArg, task
from airflow.sdk.exceptions import AirflowFailException

from scalebench.core import cells as cellmod
from scalebench.core.dag_ids import PROBE_DAG_ID
from scalebench.core.attempt_folders import safe
from scalebench_kit.names import PRECISIONS

from scalebench.core.config import PROFILES, Benchmark, ConfigError, Configs, Fleet, Host
from scalebench.orchestration.dags.benchmark_tasks import (CELLS, MORE, MORE_PAIRS, RERUN, RERUNS, TRAIN, check_cells,
                                                           check_dataset, check_dataset_id, finish, plan_cells,
                                                           plan_more_pairs, record, record_more_pairs, record_reruns,
                                                           results_asset, select_cells)
from scalebench.orchestration.dags.dag_specs import NIGHTLY, SPECS, BenchmarkDagSpec, DagSpec, nightly, open_dag
from scalebench.orchestration.cell_operator import CellDockerOperator


def params_for(spec: BenchmarkDagSpec, bench: Benchmark, fleet: Fleet) -> dict[str, Param]:
    """The trigger form, with the spec's defaults (a scheduled run takes them as they are)."""
    servable = [n for n in range(1, fleet.max_devices + 1)]
    d = spec.defaults
    return {
        "gpu_counts": Param(list(d.gpu_counts), type="array", items={"type": "integer", "enum": servable}, minItems=1,
                            uniqueItems=True, examples=servable, title="GPU counts",
                            description=f"Which GPU counts to run (this fleet serves 1-{fleet.max_devices})."),
        "epochs": Param(list(d.epochs) if d.epochs else None, type=["null", "array"],
                        items={"type": "integer", "minimum": 1, "maximum": 1000},
                        title="Epochs", description="Epoch list; empty means the profile's own list."),
        "repeats": Param(d.repeats, type="integer", minimum=1, maximum=d.max_repeats, title="Repeats",
                         description="Repeats per (GPU count, epochs) of this manual run; each repeat uses seed "
                                     f"+ repeat - 1. Scheduled runs make {bench.schedule_repeats} (schedule_repeats)."),
        "profile": Param(d.profile, type="string", enum=list(PROFILES), title="Profile",
                         description="smoke: CPU, synthetic data, seconds. nightly: GPU, short fixed-step runs. "
                                     "full: the study's epochs on the full dataset."),
        "precisions": Param(None, type=["null", "array"], items={"type": "string", "enum": list(PRECISIONS)},
                            uniqueItems=True, title="Precisions",
                            description="Numeric precisions to run, each its own report row (fp32: TF32 off; tf32; "
                                        "bf16 and fp16: mixed precision). Empty: the profile's "
                                        f"({', '.join(f'{p}: {bench.resolved(p).precision}' for p in PROFILES)})."),
        "seed": Param(0, type="integer", minimum=0, maximum=2**31 - 1, title="Seed"),
        "profile_ops": Param(False, type="boolean", title="Profile operations",
                             description="After each cell's timed steps (nothing it measures moves), a few steps "
                                         "more through the framework's profiler: the operations by time per step, "
                                         "kept with the cell (`scalebench profile show`), the traces beside it."),
        "image_tag": Param(None, type=["null", "string"], pattern=r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$",
                           title="Candidate image tag",
                           description=f"Run another tag of {bench.images.get('gpu') or bench.images.get('cpu')}'s "
                                       "repository (e.g. a framework upgrade) before it goes nightly; compare the "
                                       "runs with `scalebench compare RUN_A RUN_B`. Empty: the configured image."),
        "ab_images": Param(None, type=["null", "array"], maxItems=8, uniqueItems=True,
                           items={"type": "string", "pattern": r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$"},
                           title="Compare images (bisect step)",
                           description="Tags of the image's repository to run side by side in this run, each repeat "
                                       "on every one in balanced order (what `scalebench bisect` triggers); their "
                                       "cells are never figures of the night. Empty: a normal run."),
    }


def build_benchmark_dag(bench: Benchmark, fleet: Fleet, kind: str = NIGHTLY) -> DAG:
    """The benchmark's DAG of one kind (dag_specs.SPECS: nightly, accuracy, probe), from its spec."""
    return build_from_spec(SPECS[kind](bench, fleet), bench, fleet)


def build_from_spec(spec: BenchmarkDagSpec, bench: Benchmark, fleet: Fleet) -> DAG:
    """One factory for every benchmark DAG kind: the spec says everything that differs."""
    with open_dag(DagSpec(spec.dag_id, spec.description, nightly(spec.cron), spec.tags,
                          params_for(spec, bench, fleet), spec.doc)) as dag:
        groups = spec.groups
        plan = plan_cells(bench.id, [cellmod.group_id(h.name, n) for h, n in groups], spec.kind)
        checked = {h.name: check_dataset.override(task_id=check_dataset_id(h.name), queue=h.queue)(
            bench.id, h.name, plan) for h in fleet.hosts if any(g is h for g, _ in groups)}  # on the host's disk
        recorded = record(bench.id, spec.dag_id, plan)
        check_cells(recorded["counts"])
        rerun_done = record_reruns(bench.id, spec.dag_id, plan)
        more = plan_more_pairs(bench.id, plan, rerun_done)
        more_done = record_more_pairs(bench.id, spec.dag_id, plan)
        rerun_done >> more_done
        [recorded, more_done] >> finish.override(outlets=[results_asset(bench.id)] if spec.emits_results else [])(
            bench.id, spec.dag_id)
        max_timeout = max(bench.resolved(p).cell_timeout_minutes for p in PROFILES)

        def cells_of(host: Host, n: int, task_id: str, cells: XComArg) -> None:
            """One GPU set's mapped cell task (train, rerun or more), fed by its slice of `cells`."""
            mine = select_cells.override(task_id=CELLS)(cells, cellmod.group_id(host.name, n))
            CellDockerOperator.partial(
                task_id=task_id,
                benchmark_id=bench.id,
                host_name=host.name,
                dataset=checked[host.name],  # an XComArg: resolved at run time, and an upstream dependency
                image=spec.images[host.kind],
                queue=host.queue,
                pool=host.pool,
                pool_slots=n,
                # the profile's own timeout is enforced inside the task; this is the backstop
                execution_timeout=dt.timedelta(minutes=max_timeout + 5),
                retries=bench.retries,
                retry_delay=dt.timedelta(seconds=bench.retry_delay_s),
                retry_exponential_backoff=2.0,
                map_index_template="{{ task.cell['label'] }}",
            ).expand(cell=mine)

        # the groups follow each other (cells -> record -> reruns -> record_reruns -> more_pairs -> ...):
        # a step placed inside the cell's group would make the group graph cyclic (the Grid fails)
        for host, n in groups:
            with TaskGroup(group_id=cellmod.group_id(host.name, n), tooltip=f"{n} GPU cells on {host.name}") as cells:
                cells_of(host, n, TRAIN, plan)
            cells >> recorded
        with TaskGroup(group_id=RERUNS, tooltip="same-night reruns (or an A/B) of the flagged GPU counts") as reruns:
            for host, n in groups:
                with TaskGroup(group_id=cellmod.group_id(host.name, n)):
                    cells_of(host, n, RERUN, recorded["reruns"])
        with TaskGroup(group_id=MORE_PAIRS, tooltip="more A/B pairs where the A/B said unknown") as pairs:
            for host, n in groups:
                with TaskGroup(group_id=cellmod.group_id(host.name, n)):
                    cells_of(host, n, MORE, more)
        reruns >> rerun_done
        pairs >> more_done
    return dag


def build_config_error_dag(stem: str, error: ConfigError) -> DAG:
    """Stands in for a benchmark whose config does not load: visible in the UI with the error
    (file, field, value), never scheduled; its one task fails with the same message."""
    message = str(error)
    with open_dag(DagSpec(
            f"scalebench_{safe(stem)}", f"CONFIG ERROR: {message.splitlines()[0][:200]}", None,
            ("scalebench", "config-error"),
            doc=f"**The config of benchmark `{stem}` does not load**, so its DAG cannot be built. Fix the file "
                f"and the DAG comes back at the next parse; the other benchmarks are not affected.\n\n```\n{message}\n```",
    )) as dag:

        @task
        def config_error() -> None:
            raise AirflowFailException(message)

        config_error()
    return dag


def build_all(configs: Configs | None = None, only: str | None = None) -> dict[str, DAG]:
    """Every benchmark's DAG; a config that does not load gets a placeholder DAG with its error.
    `only`: the DAG a task process runs (Airflow's parsing context): each task of a run parses this
    file again when it starts, and needs its own DAG, not all of them."""
    import functools
    import logging

    configs = configs or Configs()
    good, broken = configs.load_all()
    builders: dict[str, Callable[[], DAG]] = {}
    for b in good.values():
        builders[b.dag_id] = functools.partial(build_benchmark_dag, b, configs.fleet)
        builders[b.accuracy_dag_id] = functools.partial(build_benchmark_dag, b, configs.fleet, cellmod.ACCURACY)
    try:
        probe = configs.probe()
    except ConfigError as exc:  # a bad probe setting harms only the probe: its placeholder says why
        logging.getLogger(__name__).error("host probe: %s", exc)
        builders[PROBE_DAG_ID] = functools.partial(build_config_error_dag, "host_probe", exc)
    else:
        if probe is not None:
            builders[PROBE_DAG_ID] = functools.partial(build_benchmark_dag, probe, configs.fleet, cellmod.PROBE)
    for stem, error in broken.items():
        logging.getLogger(__name__).error("benchmark config %s does not load: %s", stem, error)
        builders[f"scalebench_{safe(stem)}"] = functools.partial(build_config_error_dag, stem, error)
    if only in builders:
        builders = {only: builders[only]}
    return {dag_id: build() for dag_id, build in builders.items()}
