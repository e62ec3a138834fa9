"""Container settings for one cell, as plain objects (unit-tested for GPU hosts on CPU machines)."""
from __future__ import annotations

import os
from dataclasses import dataclass, field

from scalebench_kit.names import PROGRESS_EVERY_ENV

from scalebench.cell.engine import (BENCHMARK_LABEL, CELL_LABEL, DEVICES_LABEL, HOST_LABEL, SWEEP_LABEL, bind,
                                     gpu_request)
from scalebench.core.config import Benchmark, Host

SHM_BYTES = 2 * 1024**3  # data loader workers share batches through /dev/shm


@dataclass
class ContainerSettings:
    image: str
    command: list[str]
    environment: dict[str, str]
    mounts: list[dict]               # docker.types.Mount (engine.bind)
    device_requests: list[dict] | None  # docker.types.DeviceRequest (engine.gpu_request)
    shm_size: int = SHM_BYTES
    labels: dict[str, str] = field(default_factory=dict)
    cpuset_cpus: str | None = None  # e.g. "0-7": the cores of the leased devices, when the host lists cores
    user: str | None = None         # "uid:gid" of the worker, so the results it bind-mounts stay its own
    # host settings the task gave through the docker provider's parameters (e.g. ipc_mode "host" and a
    # memlock ulimit for NCCL, a mem_limit): create_host_config keyword arguments
    host_options: dict = field(default_factory=dict)


def command_for(bench: Benchmark, gpus: int) -> list[str]:
    return [part.format(gpus=gpus) for part in bench.entrypoint]


CACHE_TARGET = "/cache"  # derived data shared by a host's cells (e.g. TFRecords per dataset fingerprint)


def settings(bench: Benchmark, host: Host, cell: dict, device_ids: list[str], data_root: str,
             attempt_dir: str, cache_dir: str | None = None, uid_gid: tuple[int, int] = (0, 0)) -> ContainerSettings:
    n = len(device_ids)
    if n != cell["gpus"]:
        raise ValueError(f"cell {cell['cell_id']} needs {cell['gpus']} devices, got ids {device_ids}")
    # One process drives all devices (tf.distribute), or one process per device (torchrun, mmengine).
    threads = host.threads_per_device * (1 if bench.stack_config.processes_per_device else n)
    env = {
        "SCALEBENCH_RESULTS_DIR": "/results",
        "SCALEBENCH_DEVICE_KIND": host.kind,
        "SCALEBENCH_NUM_DEVICES": str(n),
        "OMP_NUM_THREADS": str(threads),
        "PYTHONHASHSEED": str(cell["seed"]),
    }
    if os.environ.get(PROGRESS_EVERY_ENV):  # the worker's choice of progress interval reaches the trainer
        env[PROGRESS_EVERY_ENV] = os.environ[PROGRESS_EVERY_ENV]
    requests = None
    if host.kind == "gpu":
        requests = gpu_request(device_ids)
        env["NVIDIA_VISIBLE_DEVICES"] = ",".join(device_ids)
    mounts = [
        bind(data_root, "/data", read_only=True),
        bind(attempt_dir, "/results", read_only=False),
    ]
    if cache_dir:
        mounts.append(bind(cache_dir, CACHE_TARGET, read_only=False))
        env["SCALEBENCH_CACHE_DIR"] = CACHE_TARGET
    labels = {CELL_LABEL: cell["key"], BENCHMARK_LABEL: bench.id, HOST_LABEL: host.name,
              DEVICES_LABEL: ",".join(device_ids)}
    user = None
    if uid_gid[0] != 0:  # a worker that is not root: the cell runs as it, with a home it may write
        user = f"{uid_gid[0]}:{uid_gid[1]}"
        env["HOME"] = "/tmp"
    cores = host.cores_for(list(device_ids))
    if cores:
        env["OMP_NUM_THREADS"] = str(min(int(env["OMP_NUM_THREADS"]), len(cores)))
    return ContainerSettings(image=bench.images[host.kind], command=command_for(bench, n), environment=env,
                             mounts=mounts, device_requests=requests, labels=labels,
                             cpuset_cpus=",".join(map(str, cores)) if cores else None, user=user)


def record(s: ContainerSettings, image_digest: str, host: str, device_ids: list[str], lease_id: str) -> dict:
    """container.json: everything `docker run` needs to start this container again (scalebench repro)."""
    return {
        "host": host, "device_ids": list(device_ids), "lease_id": lease_id,
        "image": s.image, "image_digest": image_digest, "command": list(s.command),
        "environment": dict(s.environment),
        "mounts": [{"source": m["Source"], "target": m["Target"], "read_only": bool(m.get("ReadOnly"))} for m in s.mounts],
        "gpus": [d for r in s.device_requests or [] for d in r["DeviceIDs"]] if s.device_requests else None,
        "shm_size": s.shm_size, "cpuset_cpus": s.cpuset_cpus, "user": s.user, "labels": dict(s.labels),
        "host_options": {k: list(v) if isinstance(v, (list, tuple)) else v for k, v in s.host_options.items()},
    }


SWEEP_RESULT = "allreduce.json"


def sweep_settings(host: Host, image: str, device_ids: list[str], sizes: list[int], out_dir: str,
                   uid_gid: tuple[int, int] = (0, 0)) -> ContainerSettings:
    """The all-reduce sweep's container on a host's leased devices: one process per device under
    torchrun, NCCL on GPUs (the leased ones, renumbered from 0), gloo on a CPU host's slots; the
    result in out_dir/allreduce.json (scalebench_kit.allreduce)."""
    n = len(device_ids)
    cpu = host.kind == "cpu"
    command = ["python", "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={n}",
               "-m", "scalebench_kit.allreduce", f"/results/{SWEEP_RESULT}", "--bytes", ",".join(map(str, sizes)),
               *(["--cpu"] if cpu else [])]
    env = {"OMP_NUM_THREADS": str(host.threads_per_device)}
    requests = None
    if not cpu:
        requests = gpu_request(device_ids)
        env["NVIDIA_VISIBLE_DEVICES"] = ",".join(device_ids)
    user = f"{uid_gid[0]}:{uid_gid[1]}" if uid_gid[0] != 0 else None
    if user:
        env["HOME"] = "/tmp"
    cores = host.cores_for(list(device_ids))
    return ContainerSettings(image=image, command=command, environment=env,
                             mounts=[bind(out_dir, "/results", read_only=False)],
                             device_requests=requests, labels={SWEEP_LABEL: f"{host.name}/{n}", HOST_LABEL: host.name,
                                                               DEVICES_LABEL: ",".join(device_ids)},
                             cpuset_cpus=",".join(map(str, cores)) if cores else None, user=user)
