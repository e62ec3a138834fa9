"""`scalebench repro TARGET [--run]`: the exact `docker run` that starts an attempt's container
again on its host (image digest, mounts, environment, devices, command), from the container.json
the cell task wrote; `--run` runs it, under a device lease with the policy the cell ran under
(packed or exclusive, from its cell.json), and records nothing.

A repro only reads the stored attempt: both the printed command and `--run` copy its cell.json
into a new folder under .state/repro/ and mount that as /results; the stored attempt is mounted
read-only beside it (/stored), so nothing a repro does can change a recorded result."""
from __future__ import annotations

import datetime as dt
import json
import shlex
import shutil
import subprocess
from pathlib import Path

from scalebench_kit.names import CELL_SPEC_FILE, CONTAINER_FILE

from scalebench.cell.engine import CELL_LABEL, DEVICES_LABEL, LEASE_LABEL, ROLE_LABEL
from scalebench.core import paths


class ReproError(RuntimeError):
    """The target names no attempt that can be started again; says which and why."""


def find_attempt(target: str) -> Path:
    """An attempt folder (given as a path), or a cell key's newest attempt that started a container."""
    folder = Path(target)
    if folder.is_dir():
        if not (folder / CONTAINER_FILE).exists():
            raise ReproError(f"{folder}: no {CONTAINER_FILE} (the attempt never started its container, or was "
                             "recorded before scalebench wrote it)")
        return folder
    from scalebench.core.attempt_folders import cell_attempts, find_attempt as folder_of
    from scalebench.core.cells import cell_id
    from scalebench.store.results import Store

    cells = Store().cells(key=target)
    if not cells:
        raise ReproError(f"{target!r} is neither an attempt folder nor a stored cell key "
                         "(`scalebench results -o json` lists the keys)")
    c = cells[0]
    # by the key in each attempt's cell.json (a rerun's, an A/B's or a bisect's folder carries its role),
    # then by the folder name a measured cell has
    found = [f for n in sorted({a["attempt"] for a in c["attempts"]})
             if (f := folder_of(c["dag_id"], c["run_id"], target, n)) is not None]
    cell = {**c, "cell_id": cell_id(c["gpus"], c["precision"], c["epochs"], c["repeat"])}
    started = [f for f in found or [f for _, f in cell_attempts(cell)] if (f / CONTAINER_FILE).exists()]
    if not started:
        raise ReproError(f"cell {target} ({cells[0]['label']}): no attempt started a container")
    return started[-1]


STORED_TARGET = "/stored"  # where a repro sees the stored attempt, read-only


# container.json's host_options (the docker provider's parameters) as docker run flags
HOST_FLAGS = {
    "mem_limit": lambda v: ["--memory", str(v)],
    "network_mode": lambda v: ["--network", v],
    "ipc_mode": lambda v: ["--ipc", v],
    "ulimits": lambda v: [f for u in v for f in ("--ulimit", f"{u['Name']}={u['Soft']}:{u['Hard']}")],
    "cap_add": lambda v: [f for c in v for f in ("--cap-add", c)],
    "dns": lambda v: [f for d in v for f in ("--dns", d)],
    "extra_hosts": lambda v: [f for h, ip in v.items() for f in ("--add-host", f"{h}:{ip}")],
    "privileged": lambda v: ["--privileged"] if v else [],
}


def docker_run(rec: dict, results: str, gpus: list[str] | None = None, lease_id: str | None = None) -> list[str]:
    """The command line; `results` (a new folder) replaces the /results mount, whose stored source
    is mounted read-only at /stored; `gpus` the device ids, `lease_id` the lease label."""
    cmd = ["docker", "run", "--rm", "--shm-size", str(rec["shm_size"])]
    labels = {**rec.get("labels", {}), ROLE_LABEL: "repro"}
    if rec.get("cpuset_cpus"):
        cmd += ["--cpuset-cpus", rec["cpuset_cpus"]]
    if rec.get("user"):
        cmd += ["--user", rec["user"]]
    for option, value in (rec.get("host_options") or {}).items():
        cmd += HOST_FLAGS[option](value)
    ids: list[str] = gpus if gpus is not None else rec.get("gpus") or []
    env = dict(rec["environment"])
    if rec.get("gpus"):
        cmd += ["--gpus", f'"device={",".join(ids)}"']
        env["NVIDIA_VISIBLE_DEVICES"] = labels[DEVICES_LABEL] = ",".join(ids)
    for k, v in sorted(env.items()):
        cmd += ["-e", f"{k}={v}"]
    for m in rec["mounts"]:
        if m["target"] == "/results":
            cmd += ["--mount", f"type=bind,source={results},target=/results",
                    "--mount", f"type=bind,source={m['source']},target={STORED_TARGET},readonly"]
            continue
        cmd += ["--mount", f"type=bind,source={m['source']},target={m['target']}" + (",readonly" if m["read_only"] else "")]
    if lease_id:
        labels[LEASE_LABEL] = lease_id
    for k, v in sorted(labels.items()):
        cmd += ["--label", f"{k}={v}"]
    return [*cmd, rec["image_digest"], *rec["command"]]


def shell_line(cmd: list[str]) -> str:
    return " ".join(a if a.startswith('"device=') else shlex.quote(a) for a in cmd)


def new_folder(folder: Path) -> Path:
    """Where a repro of `folder` writes: a new folder under .state/repro/ (not created here)."""
    return paths.state_dir() / "repro" / f"{folder.parent.name}-{dt.datetime.now(dt.timezone.utc):%Y%m%dT%H%M%S%f}"


def show(folder: Path) -> str:
    """The commands to run by hand: a new folder holding a copy of the cell's spec, then the run."""
    rec = json.loads((folder / CONTAINER_FILE).read_text())
    out = new_folder(folder)
    return "\n".join([f"# attempt {folder} on host {rec['host']} (devices {','.join(rec['device_ids'])}), "
                      f"image {rec['image']}; the stored attempt is mounted read-only at {STORED_TARGET}",
                      f"mkdir -p {shlex.quote(str(out))} && cp {shlex.quote(str(folder / CELL_SPEC_FILE))} "
                      f"{shlex.quote(str(out))}/", shell_line(docker_run(rec, results=str(out)))])


def lease_policy(folder: Path) -> str:
    """The timing policy the attempt's devices were leased under (its cell.json), packed if unrecorded."""
    spec = json.loads((folder / CELL_SPEC_FILE).read_text())
    return (spec.get("devices") or {}).get("timing_policy") or "packed"


def run(folder: Path) -> tuple[int, Path]:
    """Run the attempt again into a new folder under .state/repro/, under a lease on its host taken
    as the cell took it (exclusive: the whole host)."""
    from scalebench.cell.engine import Engine
    from scalebench.core.config import Configs
    from scalebench.store.leases import LeaseManager

    rec = json.loads((folder / CONTAINER_FILE).read_text())
    host = Configs().fleet.host(rec["host"])
    out = new_folder(folder)
    out.mkdir(parents=True)
    shutil.copy(folder / CELL_SPEC_FILE, out / CELL_SPEC_FILE)
    leases = LeaseManager(stop_containers=Engine().stop_lease_containers)
    lease = leases.acquire(host, len(rec["device_ids"]), f"repro-{rec['labels'].get(CELL_LABEL)}",
                           exclusive=lease_policy(folder) == "exclusive")
    name = f"scalebench-repro-{lease.lease_id[:12]}"
    # a lost lease may hand the devices on: the container goes at once, as a cell's would
    def remove(why: str) -> None:
        subprocess.run(["docker", "rm", "-f", name], capture_output=True)

    lease.start_heartbeat(on_lost=remove)
    try:
        cores = host.cores_for(lease.device_ids)
        rec = {**rec, "cpuset_cpus": ",".join(map(str, cores)) if cores else None,
               "labels": {**rec.get("labels", {}), DEVICES_LABEL: ",".join(lease.device_ids)}}
        cmd = docker_run(rec, results=str(out), gpus=lease.device_ids if rec.get("gpus") else None,
                         lease_id=lease.lease_id)
        cmd[3:3] = ["--name", name]
        print(shell_line(cmd), flush=True)
        rc = subprocess.run([a.strip('"') if a.startswith('"device=') else a for a in cmd]).returncode
    finally:
        lease.release()
    return rc, out
