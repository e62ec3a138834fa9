"""The weekly all-reduce DAG: on each host, at each GPU count its benchmarks run above 1, the
kit's all-reduce sweep (scalebench_kit.allreduce: NCCL on GPU hosts, gloo on a CPU host's slots)
inside the torchrun stack's image, over the gradient sizes the trainers reported for their models
(and DDP's 25 MB bucket), stored as bus bandwidth per host, GPU count and size: the sync term of
the scaling predictions. One task per host, on its queue and pool, holding all of its devices
while it sweeps (a sweep beside a training cell would measure both wrong)."""
from __future__ import annotations

from airflow.sdk import DAG, task

from scalebench.core.config import Configs, Host
from scalebench.core.dag_ids import ALLREDUCE_DAG_ID
from scalebench.orchestration.dags.dag_specs import DagSpec, nightly, open_dag

ALLREDUCE_CRON = "0 4 * * 6"   # Saturdays 04:00 UTC: after the night's cells, before Sunday's maintenance
SWEEP_TIMEOUT_S = 900


def sweep_counts(configs: Configs, host: Host) -> list[int]:
    """The GPU counts above 1 that this host's benchmarks run (at most its devices)."""
    counts = {n for b in configs.load_all()[0].values() for n in b.gpu_counts}
    return sorted(n for n in counts if 1 < n <= len(host.device_ids))


def sweep_image(configs: Configs, host: Host) -> str:
    """The image of the first torchrun stack (in build order): it has torch and the kit."""
    stacks = configs.stacks.stacks
    name = next((n for n in configs.stacks.build_order() if stacks[n].launcher == "torchrun"), None)
    if name is None:
        raise ValueError("include/configs/stacks.yaml: no stack with launcher torchrun to run the all-reduce sweep in")
    return stacks[name].images[host.kind]


def sizes(parameters: dict[str, int]) -> list[int]:
    """The float32 gradients of each benchmark's model, and DDP's bucket."""
    from scalebench_kit.allreduce import DDP_BUCKET

    return sorted({DDP_BUCKET, *(p * 4 for p in parameters.values())})


@task
def sweep_host(host_name: str, **context) -> dict:
    """Every count of one host: lease all of its devices, run the sweep's container on the first n,
    keep its rows in the store."""
    import json
    import os
    import tempfile

    from scalebench.cell.container import SWEEP_RESULT, sweep_settings
    from scalebench.cell.engine import LEASE_LABEL, Engine
    from scalebench.core import nights
    from scalebench.store.leases import LeaseManager
    from scalebench.store.predictions import Predictions
    from scalebench.store.results import Store

    configs = Configs()
    host = configs.fleet.host(host_name)
    preds = Predictions(Store())
    wanted = sizes(preds.model_parameters())
    image = sweep_image(configs, host)
    night = nights.night_at(context["dag_run"].run_after)
    engine = Engine()
    leases = LeaseManager(stop_containers=engine.stop_lease_containers)
    done = {}
    for n in sweep_counts(configs, host):
        lease = leases.acquire(host, len(host.device_ids), f"allreduce-{host.name}-{n}", exclusive=True,
                               timeout_s=SWEEP_TIMEOUT_S)
        try:
            with tempfile.TemporaryDirectory(prefix="allreduce-") as out:
                os.chmod(out, 0o777)  # the container's user writes its result here
                s = sweep_settings(host, image, lease.device_ids[:n], wanted, out, (os.getuid(), os.getgid()))
                s.labels = {**s.labels, LEASE_LABEL: lease.lease_id}
                code, logs = engine.run_to_end(s, SWEEP_TIMEOUT_S)
                print(logs[-3000:])
                if code != 0:
                    raise RuntimeError(f"all-reduce sweep on {host.name} at {n} devices exited {code}: "
                                       f"{logs.strip().splitlines()[-1:] if logs.strip() else 'no output'}")
                with open(os.path.join(out, SWEEP_RESULT)) as fh:
                    doc = json.load(fh)
        finally:
            lease.release()
        preds.save_sweep(host.name, n, doc["backend"], doc["rows"], night, image)
        done[n] = [(r["bytes"], r["busbw_gbps"]) for r in doc["rows"]]
        print(f"{host.name} at {n} devices ({doc['backend']}): " + ", ".join(
            f"{b / 2**20:.1f} MiB {bw:g} GB/s" for b, bw in done[n]))
    return {"host": host.name, "sweeps": {str(k): v for k, v in done.items()}}


def build_allreduce_dag(configs: Configs | None = None) -> DAG:
    configs = configs or Configs()
    with open_dag(DagSpec(
        ALLREDUCE_DAG_ID, "Each host's all-reduce bus bandwidth per GPU count and gradient size (the predictions' sync)",
        nightly(ALLREDUCE_CRON), ("scalebench", "prediction"),
    )) as dag:
        for host in configs.fleet.hosts:
            if sweep_counts(configs, host):
                sweep_host.override(task_id=f"sweep_{host.name.replace('-', '_')}", queue=host.queue,
                                    pool=host.pool, pool_slots=len(host.device_ids))(host.name)
    return dag
