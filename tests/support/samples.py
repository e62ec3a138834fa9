"""Sample records as the code makes them: cells, cell specs, contracts, attempt folders, a probe operator."""
import copy

import yaml

from tests.support import CONFIGS, new_config_tree


def sample_cell(gpus=2, epochs=3, repeat=1, run_id="manual__night1", **over):
    from scalebench.core.cells import cell_id, cell_key, cell_label

    ident = {"dag_id": "scalebench_resnet50_keras_cifar10", "run_id": run_id, "benchmark": "resnet50_keras_cifar10",
             "host": "local", "gpus": gpus, "epochs": epochs, "repeat": repeat, "profile": "smoke", "precision": "fp32"}
    ident.update({k: v for k, v in over.items() if k in ident})  # the key follows the identity it is given
    cell = {**ident, "key": cell_key(ident), "cell_id": cell_id(gpus, ident["precision"], epochs, repeat),
            "label": cell_label(gpus, epochs, repeat, precision=ident["precision"]), "run_type": "manual", "seed": repeat - 1,
            "per_device_batch": 16, "global_batch": 16 * gpus, "scaling_mode": "weak", "lr": 0.001}
    cell.update(over)
    return cell


def sample_spec(cell: dict, **over) -> dict:
    """cell.json for a trainer run outside Airflow (CPU slots); `over` replaces top-level sections."""
    n = cell["gpus"]
    return {
        "contract_version": 1,
        "cell": {k: cell[k] for k in ("key", "benchmark", "dag_id", "run_id", "run_type", "host", "gpus", "epochs",
                                      "repeat", "profile", "seed", "label")} | {"attempt": 1},
        "devices": {"kind": "cpu", "ids": [str(i) for i in range(n)], "count": n},
        "training": {"per_device_batch": cell["per_device_batch"], "global_batch": cell["global_batch"],
                     "scaling_mode": "weak", "lr_policy": {"rule": "linear", "base_lr": 0.01, "reference_batch": 256},
                     "lr": cell["lr"], "warmup_steps": 2, "epochs": cell["epochs"], "max_steps_per_epoch": None,
                     "precision": cell["precision"]},
        "data": {"name": "none", "format": "none", "path": "/data", "fingerprint": "sha256:test", "train_limit": None,
                 "test_limit": None, "image_size": None},
        "model": {"name": cell["benchmark"]}, "provenance": {}, **over}


def write_attempt(cell, k, *, contract=None, validation=None, failure=None):
    """An attempt folder as a finished task leaves it (cell.json, metrics.json, validation.json, failure.json)."""
    import json

    from scalebench.core.attempt_folders import attempt_dir
    from scalebench_kit.contract import write_json_atomic

    d = attempt_dir(cell, k)
    d.mkdir(parents=True)
    write_json_atomic(d / "cell.json", {"cell": cell})
    if contract is not None:
        (d / "metrics.json").write_text(json.dumps(contract))
    if validation is not None:
        write_json_atomic(d / "validation.json", validation)
    if failure is not None:
        write_json_atomic(d / "failure.json", failure)
    return d


def sample_breakdown(n: int, step_s: float, sync_share: float | None = None, data_share: float = 0.05) -> dict:
    """A time breakdown of n ranks as the kit writes it; sync grows with n unless given."""
    from scalebench_kit.timing import combine_ranks

    sync = (0.1 * (n - 1) if sync_share is None else sync_share) * step_s
    ranks = [{"rank": r, "pid": 100 + r, "timed_steps": 20, "step_s": step_s, "data_wait_s": data_share * step_s,
              "sync_s": sync, "other_s": 0.02 * step_s, "compute_s": step_s * (0.98 - data_share) - sync,
              "epoch_fixed_s": 0.1, "warmup_s": 1.0} for r in range(n)]
    return combine_ranks(ranks, {"sync_s": "test"})


from scalebench_kit.names import COMPUTE_DTYPE as PRECISION_DTYPES  # noqa: E402
from scalebench_kit.precision import record as precision_record  # noqa: E402


def sample_contract(cell, train_s=10.0, precision=0.5, recall=0.4, attempt=1, **metrics):
    """A result document that satisfies the contract for `cell`."""
    n = cell["gpus"]
    return copy.deepcopy({
        "contract_version": 1,
        "cell": {k: cell[k] for k in ("key", "benchmark", "dag_id", "run_id", "run_type", "host", "gpus", "epochs",
                                      "repeat", "profile", "seed", "label")} | {"attempt": attempt},
        "devices": {"kind": "cpu", "ids": [str(i) for i in range(n)], "count": n, "world_size": n,
                    "names": [f"/cpu:{i}" for i in range(n)]},
        "training": {"per_device_batch": cell["per_device_batch"], "global_batch": cell["global_batch"],
                     "scaling_mode": "weak", "lr_policy": {"rule": "linear", "base_lr": 0.01, "reference_batch": 256},
                     "lr": cell["lr"], "warmup_steps": 2, "epochs": cell["epochs"], "max_steps_per_epoch": None,
                     "precision": cell["precision"]},
        "data": {"name": "cifar10", "format": "cifar10-python", "path": "/data", "fingerprint": "sha256:abc",
                 "train_limit": 384, "test_limit": 128, "image_size": None},
        "model": {"name": "resnet50_keras_cifar10", "parameters": 23608202},
        "provenance": {"image": "scalebench/tensorflow:cpu", "image_digest": "sha256:def", "git_revision": "abc",
                       "resolved_config": {"benchmark": cell["benchmark"], "profile": cell["profile"]}},
        "system": {"framework": "tensorflow", "framework_version": "2.20.0", "python": "3.11.2", "hostname": "x",
                   "cpu_count": 2},
        "timing": {"setup_s": 4.0, "warmup_s": 3.0, "train_s": train_s, "eval_s": 1.0, "total_s": train_s + 9,
                   "epoch_s": [train_s / cell["epochs"]] * cell["epochs"], "steps": 30, "images_per_s": 50.0,
                   "breakdown": sample_breakdown(n, train_s)},
        "loss_curve": [2.0, 1.0, 0.5][: cell["epochs"]] or [1.0],
        "metrics": {"precision": precision, "recall": recall, "accuracy": 0.5, **metrics},
        "precision": precision_record(cell["precision"], PRECISION_DTYPES[cell["precision"]], "sample layer", {}),
    })


class FakeTI:
    """The task instance a cell's execute() sees: its try number and what it pushes to XCom."""

    def __init__(self, try_number=1, dag_id=None):
        self.try_number, self.dag_id, self.pushed = try_number, dag_id, {}
        self.task_id, self.run_id, self.map_index = "probe", "manual__night1", 0

    def xcom_push(self, key, value):
        self.pushed[key] = value


def make_probe(tmp_path, script: str, timeout_minutes: float = 2.0, host_update: dict | None = None, **op_kwargs):
    """A benchmark 'probe' whose entrypoint is a shell snippet, written to a copy of the configs
    (point SCALEBENCH_CONFIG_DIR at the returned tree), its CellDockerOperator, a context with a
    fake task instance, and its cell."""
    from scalebench.orchestration.cell_operator import CellDockerOperator

    tree = tmp_path / "configs"
    fleet = yaml.safe_load((CONFIGS / "fleet.yaml").read_text())
    fleet["hosts"][0].update(host_update or {})
    new_config_tree(tree, fleet)
    doc = yaml.safe_load((CONFIGS / "benchmarks" / "resnet50_keras_cifar10.yaml").read_text())
    doc.update(id="probe", entrypoint=["sh", "-c", script],
               gpu_counts=list(range(1, min(4, len(fleet["hosts"][0]["device_ids"])) + 1)))
    doc["profiles"]["smoke"]["cell_timeout_minutes"] = timeout_minutes
    (tree / "benchmarks" / "probe.yaml").write_text(yaml.safe_dump(doc))
    data = tmp_path / "data"
    data.mkdir(exist_ok=True)
    dataset = {"root": str(data), "format": "cifar10-python", "name": "cifar10", "fingerprint": "sha256:0"}
    cell = sample_cell(gpus=1, benchmark="probe", dag_id="scalebench_probe")
    op = CellDockerOperator(task_id="probe", cell=cell, dataset=dataset, benchmark_id="probe", host_name="local",
                            image="scalebench/tensorflow:cpu", **op_kwargs)
    return op, {"ti": FakeTI()}, cell, tree


def sample_benchmark(bench_id: str, profile_sizes: dict | None = None, **fields):
    """The shipped ResNet50 config under another id, with `fields` replaced and a profile's sizes
    (e.g. {"nightly": {"reference_accuracy": ...}}) merged in, validated as a config file is."""
    from scalebench.core.config import Benchmark, Configs

    base = Configs().benchmark("resnet50_keras_cifar10")
    doc = base.model_dump(exclude_none=True)
    for name, sizes in (profile_sizes or {}).items():
        doc["profiles"][name] = {**doc["profiles"].get(name, {}), **sizes}
    bench = Benchmark.model_validate({**doc, "id": bench_id, **fields})
    bench._stack, bench._splits = base.stack_config, base._splits
    return bench


CONTRACT_PROBE = (  # the probe's entrypoint: copy the contract the test left for this cell and attempt
    "import json, os, shutil, time\n"
    "c = json.load(open('/results/cell.json'))['cell']\n"
    "print('attempt', c['attempt'], flush=True)\n"
    "if os.path.exists(f\"/data/slow-{c['key']}-{c['attempt']}\"):\n    time.sleep(600)\n"
    "shutil.copy(f\"/data/contract-{c['key']}-{c['attempt']}.json\", '/results/metrics.json')\n"
    # a file teardown-<key>-<attempt> holding hang or abort: the run is over, then its end fails
    "fault = f\"/data/teardown-{c['key']}-{c['attempt']}\"\n"
    "if os.path.exists(fault):\n"
    "    open('/results/events.jsonl', 'a').write(json.dumps({'key': 'run_stop', 'value': 'success', 'rank': 0,"
    " 'world_size': 1}) + '\\n')\n"
    "    time.sleep(600) if open(fault).read() == 'hang' else os.abort()\n")


def contract_probe(tmp_path, timeout_minutes: float = 2.0):
    """Probe configs whose cells write the contract the test leaves in the data folder
    (contract-<cell key>-<attempt>.json; a file slow-<key>-<attempt> makes that attempt run 10
    minutes first; teardown-<key>-<attempt> holding "hang" or "abort" makes it log its run_stop
    success and then hang or abort), and make(gpus, repeat, run_id) -> (cell, its CellDockerOperator)."""
    from scalebench.orchestration.cell_operator import CellDockerOperator

    _, _, _, tree = make_probe(tmp_path, "python /data/probe_cell.py", timeout_minutes=timeout_minutes)
    data = tmp_path / "data"
    (data / "probe_cell.py").write_text(CONTRACT_PROBE)

    def make(gpus: int = 1, repeat: int = 1, run_id: str = "manual__night1"):
        cell = sample_cell(gpus=gpus, repeat=repeat, benchmark="probe", dag_id="scalebench_probe", run_id=run_id)
        dataset = {"root": str(data), "format": "cifar10-python", "name": "cifar10", "fingerprint": "sha256:0"}
        return cell, CellDockerOperator(task_id="probe", cell=cell, dataset=dataset, benchmark_id="probe",
                                        host_name="local", image="scalebench/tensorflow:cpu")

    return tree, data, make


def seed_nights(store, count: int = 6, last: str = "2026-11-28") -> dict:
    """Scheduled nights of resnet50 at 1 and 2 GPUs, summarized and reported as the DAGs would;
    the last night is slower at 2 GPUs on a new image, and one of its cells failed twice (oom)."""
    import datetime as dt

    from scalebench.report.build import publish
    from scalebench.report.model import Options
    from scalebench.report.summary import summarize_night

    bench = "resnet50_keras_cifar10"
    start = dt.date.fromisoformat(last) - dt.timedelta(days=count - 1)
    for i in range(count):
        night = (start + dt.timedelta(days=i)).isoformat()
        run_id = f"scheduled__{night}T01:00:00+00:00"
        newest = i == count - 1
        for gpus, t in ((1, 100), (2, 75 if newest else 60)):
            for rep in (1, 2):
                cell = sample_cell(gpus=gpus, repeat=rep, run_id=run_id, night=night, run_type="scheduled")
                c = sample_contract(cell, train_s=t + rep)
                c["provenance"]["image_digest"] = "sha256:new" if newest else "sha256:old"
                store.record_attempt(cell, 1, "valid", contract=c,
                                     task={"task_id": "local_2gpu.train", "map_index": rep, "try_number": 1})
        if newest:
            bad = sample_cell(gpus=2, repeat=3, run_id=run_id, night=night, run_type="scheduled")
            for k in (1, 2):
                store.record_attempt(bad, k, "failed", reason="oom", exit_code=137, message="CUDA out of memory",
                                     task={"task_id": "local_2gpu.train", "map_index": 2, "try_number": k})
        store.record_run(dag_id=f"scalebench_{bench}", run_id=run_id, benchmark=bench, run_type="scheduled", night=night,
                         counts={})
        summarize_night(store, bench, night)
        publish(store, night, Options(expected=[bench]))
    return {"last": last, "run_id": run_id}


def copy_summaries(store, rows: list[dict], nights: list[str], benchmark: str | None = None, batch: int = 20000) -> None:
    """Stored night summaries `rows` (as read from night_summaries, without their id) written again
    under each of `nights` (and `benchmark`, when given), a transaction per `batch` rows: years of
    nights for the pages, made in seconds (how a summary was made does not change how it is read)."""
    from sqlalchemy import insert

    from scalebench.store.night_summaries import NightSummaryRow

    table, per_batch = NightSummaryRow.__table__, max(1, batch // max(1, len(rows)))
    for lo in range(0, len(nights), per_batch):
        with store.engine.begin() as conn:
            conn.execute(insert(table), [{**r, "night": n, **({"benchmark": benchmark} if benchmark else {})}
                                         for n in nights[lo:lo + per_batch] for r in rows])


def summary_rows(store, benchmark: str, night: str) -> list[dict]:
    """A benchmark's stored summaries of one night, as copy_summaries takes them."""
    from sqlalchemy import select

    from scalebench.store.night_summaries import NightSummaryRow

    table = NightSummaryRow.__table__
    with store.engine.connect() as conn:
        return [{k: v for k, v in r.items() if k != "id"} for r in conn.execute(
            select(table).where(table.c.night == night, table.c.benchmark == benchmark)).mappings()]
