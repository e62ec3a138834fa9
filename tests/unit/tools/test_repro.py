"""`scalebench repro`: an attempt's exact docker run from its container.json, and --run against the engine."""
import json
import shlex
import shutil

from scalebench.cli import main
from scalebench.core.attempt_folders import attempt_dir
from scalebench.store.leases import LeaseManager
from scalebench.store.recording import record_run
from scalebench.store.results import Store
from tests.support.engine import requires_docker
from tests.support.samples import FakeTI, contract_probe, sample_contract


def test_repro_prints_the_attempts_docker_run_by_folder_or_cell_key(tmp_path, monkeypatch, capsys):
    tree, data, probe_cell = contract_probe(tmp_path)
    monkeypatch.setenv("SCALEBENCH_CONFIG_DIR", str(tree))
    cell, op = probe_cell(2)
    folder = attempt_dir(cell, 1)
    rec = {"host": "local", "device_ids": ["0", "1"], "lease_id": "l1", "image": "scalebench/tensorflow:cpu",
           "image_digest": "sha256:1mage", "command": ["sh", "-c", "python /data/probe_cell.py"],
           "environment": {"SCALEBENCH_NUM_DEVICES": "2", "OMP_NUM_THREADS": "2"},
           "mounts": [{"source": str(data), "target": "/data", "read_only": True},
                      {"source": str(folder), "target": "/results", "read_only": False}],
           "gpus": None, "shm_size": 2147483648, "cpuset_cpus": "0,1", "user": None,
           "labels": {"org.scalebench.cell": cell["key"]}}
    folder.mkdir(parents=True)
    (folder / "container.json").write_text(json.dumps(rec))
    (folder / "cell.json").write_text(json.dumps({"cell": cell}))
    (folder / "failure.json").write_text(json.dumps({"reason": "killed", "message": "m"}))
    record_run(Store(), cell["dag_id"], cell["run_id"], [cell])
    for target in (str(folder), cell["key"]):
        assert main(["repro", target]) == 0
        comment, copy, line = capsys.readouterr().out.strip().splitlines()
        assert comment.startswith(f"# attempt {folder} on host local (devices 0,1), image scalebench/tensorflow:cpu")
        args = shlex.split(line)
        assert args[:3] == ["docker", "run", "--rm"] and args[-4:] == ["sha256:1mage", "sh", "-c",
                                                                        "python /data/probe_cell.py"]
        assert f"type=bind,source={data},target=/data,readonly" in args and "SCALEBENCH_NUM_DEVICES=2" in args
        assert args[args.index("--cpuset-cpus") + 1] == "0,1" and "--gpus" not in args
        # only reads the stored attempt: writes into a new folder that holds a copy of its cell.json
        mounts = [args[i + 1] for i, a in enumerate(args) if a == "--mount"]
        assert f"type=bind,source={folder},target=/stored,readonly" in mounts
        assert not [m for m in mounts if f"source={folder}," in m and not m.endswith(",readonly")], mounts
        [results] = [m for m in mounts if m.endswith("target=/results")]
        new = results.split("source=", 1)[1].split(",target=")[0]
        assert new != str(folder) and "/repro/" in new
        assert shlex.split(copy) == ["mkdir", "-p", new, "&&", "cp", str(folder / "cell.json"), f"{new}/"]


def test_repro_finds_a_reruns_attempt_by_its_key_though_its_folder_carries_its_role(tmp_path, monkeypatch, capsys):
    """A rerun's (or an A/B's, a bisect's) folder is named <cell>-rerun<i>: found by its cell.json's key."""
    from scalebench.analysis.reruns import rerun_cell

    tree, data, probe_cell = contract_probe(tmp_path)
    monkeypatch.setenv("SCALEBENCH_CONFIG_DIR", str(tree))
    cell, _ = probe_cell(1)
    rerun = rerun_cell(cell, 1)
    folder = attempt_dir(rerun, 1)
    assert folder.parent.name.endswith("-rerun1")
    folder.mkdir(parents=True)
    (folder / "container.json").write_text(json.dumps({
        "host": "local", "device_ids": ["0"], "lease_id": "l1", "image": "scalebench/tensorflow:cpu",
        "image_digest": "sha256:1mage", "command": ["true"], "environment": {}, "gpus": None, "shm_size": None,
        "cpuset_cpus": None, "user": None, "labels": {}, "mounts": [{"source": str(folder), "target": "/results",
                                                                   "read_only": False}]}))
    (folder / "cell.json").write_text(json.dumps({"cell": rerun}))
    (folder / "failure.json").write_text(json.dumps({"reason": "killed", "message": "m"}))
    record_run(Store(), rerun["dag_id"], rerun["run_id"], [rerun])
    assert main(["repro", rerun["key"]]) == 0
    assert capsys.readouterr().out.startswith(f"# attempt {folder} on host local")


def test_a_gpu_attempt_names_its_devices_in_the_docker_run():
    from scalebench.tools.repro import docker_run

    rec = {"environment": {"NVIDIA_VISIBLE_DEVICES": "2,3"}, "mounts": [], "gpus": ["2", "3"], "shm_size": 1,
           "image_digest": "sha256:x", "command": ["torchrun"], "labels": {}}
    args = docker_run(rec, "/new")
    assert args[args.index("--gpus") + 1] == '"device=2,3"' and "NVIDIA_VISIBLE_DEVICES=2,3" in args
    moved = docker_run(rec, "/new", gpus=["0", "1"])  # --run leases afresh: the ids may differ
    assert moved[moved.index("--gpus") + 1] == '"device=0,1"' and "NVIDIA_VISIBLE_DEVICES=0,1" in moved


def test_repro_refuses_what_it_cannot_start_again(capsys, tmp_path):
    assert main(["repro", "no-such-key"]) == 2
    assert "'no-such-key' is neither an attempt folder nor a stored cell key" in capsys.readouterr().err
    assert main(["repro", str(tmp_path)]) == 2
    assert "no container.json (the attempt never started its container" in capsys.readouterr().err


@requires_docker
def test_repro_run_starts_the_attempts_container_again_outside_the_store(tmp_path, monkeypatch):
    from scalebench.tools.repro import run

    tree, data, probe_cell = contract_probe(tmp_path)
    monkeypatch.setenv("SCALEBENCH_CONFIG_DIR", str(tree))
    cell, op = probe_cell(2)
    (data / f"contract-{cell['key']}-1.json").write_text(json.dumps(sample_contract(cell, attempt=1)))
    summary = op.execute({"ti": FakeTI(1)})
    folder = attempt_dir(cell, 1)
    rec = json.loads((folder / "container.json").read_text())
    assert rec["image_digest"].startswith("sha256:") and rec["device_ids"] == summary["device_ids"]
    stored = {p.name: p.read_bytes() for p in folder.iterdir()}
    rc, out = run(folder)
    assert rc == 0 and json.loads((out / "metrics.json").read_text())["cell"]["key"] == cell["key"]
    assert out.parent.name == "repro" and Store().cells() == [] and LeaseManager().holders() == []
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == stored  # the stored attempt is untouched
    mine = [e for e in LeaseManager().events() if e.cell_key == f"repro-{cell['key']}"]
    assert [e.event for e in mine][-1] == "released"
    # leased as the cell was: packed here; a copy of the attempt that ran exclusive takes the whole host
    assert json.loads((folder / "cell.json").read_text())["devices"]["timing_policy"] == "packed"
    assert [e.detail for e in mine if e.event == "acquired"] == ["packed"]
    exclusive = tmp_path / "exclusive" / "attempt-1"
    shutil.copytree(folder, exclusive)
    spec = json.loads((exclusive / "cell.json").read_text())
    spec["devices"]["timing_policy"] = "exclusive"
    (exclusive / "cell.json").write_text(json.dumps(spec))
    assert run(exclusive)[0] == 0
    acquired = [e.detail for e in LeaseManager().events() if e.cell_key == f"repro-{cell['key']}" and e.event == "acquired"]
    assert acquired == ["packed", "exclusive"]
