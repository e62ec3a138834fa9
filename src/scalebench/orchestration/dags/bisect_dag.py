"""The `scalebench_bisect` DAG: `scalebench bisect` on the scheduler. A regression alert links to
its trigger form; each step triggers one run of the benchmark's own DAG with `ab_images` (the
step's images, interleaved) and waits for it, then judges it from the store
(scalebench.orchestration.dags.bisect); the last task names the culprit and its package diff. The
steps are unrolled up to MAX_STEPS; a finished bisection skips the rest."""
from __future__ import annotations

from typing import Literal

from airflow.providers.standard.operators.trigger_dagrun import TriggerDagRunOperator
from airflow.sdk import DAG, Param, task
from airflow.sdk.exceptions import AirflowFailException
from airflow.task.trigger_rule import TriggerRule

from scalebench.core.config import Configs
from scalebench.orchestration.dags.dag_specs import DagSpec, default_profile, open_dag

from scalebench.core.dag_ids import BISECT_DAG_ID
MAX_STEPS = 6  # 2**6 - 1 images between good and bad with one culprit
TAG = r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$"


def step_run_id(run_id: str, k: int) -> str:
    """The benchmark run a step triggers (known to both the trigger and the judge)."""
    return f"bisect__{run_id}__step{k}"


@task
def start(**context) -> dict:
    """The bisection from the trigger's params (images of the benchmark's repository, in order)."""
    from scalebench.analysis.bisect import Bisection
    from scalebench.core.config import ConfigError
    from scalebench.orchestration.dags.bisect import bisect_id_for, image_list

    p = context["params"]
    configs = Configs()
    try:
        bench = configs.benchmark(p["benchmark"])
        kind: Literal["cpu", "gpu"] = "cpu" if p["profile"] == "smoke" else "gpu"
        b = Bisection(bench.id, p["gpus"], image_list(bench, kind, p["good"], p["bad"], p["candidates"] or []))
    except (ConfigError, ValueError) as exc:
        raise AirflowFailException(str(exc)) from None
    print(f"bisecting {bench.id} at {p['gpus']} GPU(s) over {len(b.images)} images: {', '.join(b.images)}")
    return {"bisect_id": bisect_id_for(bench.id, p["gpus"]), "state": b.to_json()}


@task.short_circuit(ignore_downstream_trigger_rules=False)
def plan_step(state: dict, **context) -> dict | None:
    """The next step's trigger conf; nothing (the step is skipped) once the bisection is done."""
    from scalebench.analysis.bisect import from_json
    from scalebench.orchestration.dags.bisect import step_conf

    b = from_json(state["state"])
    if b.done:
        return None
    p = context["params"]
    return step_conf(b, p["profile"], p["pairs"])


@task(trigger_rule=TriggerRule.ALL_DONE)
def judge_step(state: dict, k: int, **context) -> dict:
    """The step's run from the store: which halves stay open (nothing to do once done)."""
    from scalebench.analysis.bisect import from_json
    from scalebench.orchestration.dags.bisect import record_step
    from scalebench.store.results import Store

    b = from_json(state["state"])
    if b.done:
        return state
    for line in record_step(Store(), state["bisect_id"], b, step_run_id(context["dag_run"].run_id, k)):
        print(line)
    return {**state, "state": b.to_json()}


def report_account() -> str | None:
    """The account the report DAG starts bisections as (the task-note connection's login), which
    holds edit access to the report DAG; None without that connection."""
    from scalebench.orchestration.notes import account

    return account()


@task(trigger_rule=TriggerRule.ALL_DONE)
def result(state: dict, **context) -> list[str]:
    """The culprits with their package diffs, or what stayed unresolved (then the run fails); an
    alert group that started this bisection gets the same lines in its events."""
    from scalebench.analysis.bisect import from_json
    from scalebench.orchestration.dags.bisect import culprit_lines
    from scalebench.store.alert_groups import AlertGroups
    from scalebench.store.results import Store

    store = Store()
    b = from_json(state["state"])
    lines = culprit_lines(b, lambda ref: (store.image_packages(ref) or {}).get("packages"))
    print("\n".join(lines))
    group = context["params"].get("alert_group")
    if group:
        by = getattr(context["dag_run"], "triggering_user_name", None)
        if by and by == report_account():
            AlertGroups(store).add_event(int(group), "bisect", f"bisect {context['dag_run'].run_id}: " + "; ".join(lines))
        else:  # a trigger right on this DAG is not a right to edit the report's alert groups
            print(f"alert group #{group} not written: only a bisection the report DAG started (as "
                  f"{report_account() or 'its account'}) writes into a group; this run was triggered by {by}")
    if not b.done or not b.culprits:
        raise AirflowFailException("no culprit named: " + "; ".join(lines))
    return lines


def build_bisect_dag(configs: Configs | None = None) -> DAG:
    configs = configs or Configs()
    good, _ = configs.load_all()
    with open_dag(DagSpec(
        BISECT_DAG_ID, "Which image between a good and a bad one first made a benchmark's cell slower", None,
        ("scalebench", "bisect"), doc=__doc__, native_templates=True,
        params={
            "benchmark": Param(sorted(good)[0] if good else "", type="string", enum=sorted(good) or [""],
                               title="Benchmark"),
            "gpus": Param(1, type="integer", minimum=1, maximum=max(configs.fleet.max_devices, 1), title="GPU count",
                          description="The regressed cell's GPU count."),
            "good": Param("", type="string", pattern=TAG, title="Good image (tag)"),
            "bad": Param("", type="string", pattern=TAG, title="Bad image (tag)"),
            "candidates": Param([], type="array", items={"type": "string", "pattern": TAG}, maxItems=62,
                                title="Candidates", description="The tags between good and bad, oldest first."),
            "profile": Param(default_profile(configs.fleet), type="string",
                             enum=["smoke", "nightly", "full"], title="Profile"),
            "pairs": Param(5, type="integer", minimum=5, maximum=10, title="Cells per image per step",
                           description="At least 5: 4 + 4 cells cannot reach p <= 0.01 with a rank test."),
            "alert_group": Param(0, type="integer", minimum=0, maximum=2**31 - 1, title="Alert group",
                                 description="The alert group that started it (0: none): its events get the result when the "
                                             "report DAG started this run (a trigger right alone writes no group)."),
        },
    )) as dag:
        state = start()
        for k in range(1, MAX_STEPS + 1):
            conf = plan_step.override(task_id=f"plan_step_{k}")(state)
            run = TriggerDagRunOperator(
                task_id=f"run_step_{k}", trigger_dag_id="scalebench_{{ params.benchmark }}", conf=conf,
                trigger_run_id="bisect__{{ run_id }}__step" + str(k), wait_for_completion=True, poke_interval=30,
                allowed_states=["success", "failed"], failed_states=[])
            judged = judge_step.override(task_id=f"judge_step_{k}")(state, k)
            run >> judged
            state = judged
        result(state)
    return dag
