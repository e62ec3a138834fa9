"""Drill: a cell that trained to the end is never lost at teardown. The 2-rank UNet and Faster
R-CNN smoke cells (torchrun over gloo on CPU device slots) run back to back many times beside a
CPU burner on every core, each as its cell's own `docker run` (container.json, as `scalebench
repro` builds it), twice: "before", the crash this guards against injected after every rank's
run_stop success (test hook `teardown`: a hang in the teardown, stopped at the operator's
teardown deadline, and an abort, alternately), and "after", the trainers' end (a final barrier,
every rank's run_stop, then the group destroyed). Each run is judged as the cell operator judges
it (every_rank_finished, the teardown deadline, classify, the contract): lost means no valid
figure; "before" must show the crash in every run and lose none. The UNet cell runs in the GPU
image too (its CPU twin). About an hour at 20 runs each (`make drills`); SCALEBENCH_TEARDOWN_RUNS
and SCALEBENCH_TEARDOWN_GPU_RUNS set the counts."""
import collections
import json
import multiprocessing
import os
import subprocess
import threading
import time
from pathlib import Path

import pytest

from scalebench_kit.contract import ContractError, load_result, write_json_atomic
from scalebench_kit.events import read_events
from scalebench.cell.failures import classify, every_rank_finished
from scalebench.tools.repro import docker_run
from tests.support.engine import docker_ready, requires_docker

pytestmark = [requires_docker, pytest.mark.slow]
RUNS = int(os.environ.get("SCALEBENCH_TEARDOWN_RUNS", "20"))
GPU_RUNS = int(os.environ.get("SCALEBENCH_TEARDOWN_GPU_RUNS", "20"))
CELLS = {"unet_torch_voc2007": "scalebench/torch:cpu", "frcnn_mmdet_voc2007": "scalebench/mmdet:cpu"}
TEARDOWN_SIGNS = ("terminate called", "SIGABRT", "Signal 6", "exitcode: -6", "Segmentation fault")


@pytest.fixture(scope="module")
def attempts(tmp_path_factory):
    """One smoke run of each DAG at 2 devices: the attempt folder whose container is run again."""
    from tests.support.airflow_home import BIN, airflow_env, prepare_homes, run

    home = tmp_path_factory.mktemp("teardown")
    env = airflow_env(home)
    prepare_homes(env)
    found = {}
    for bench in CELLS:
        rc, log = run([BIN / "airflow", "dags", "test", f"scalebench_{bench}",
                       "-c", json.dumps({"gpu_counts": [2], "profile": "smoke", "seed": 0})], env, timeout=1800)
        assert rc == 0, log[-3000:]
        [folder] = (home / "results" / f"scalebench_{bench}").glob("*/g2-*/attempt-1")
        found[bench] = folder
    return found


@pytest.fixture
def busy():
    """A busy-loop process on every core beside the cells, as a loaded GPU host's data loaders."""
    procs = [multiprocessing.Process(target=_spin, daemon=True) for _ in range(os.cpu_count() or 1)]
    for p in procs:
        p.start()
    yield len(procs)
    for p in procs:
        p.kill()
        p.join()


def _spin():
    while True:
        pass


TEARDOWN_DEADLINE_S = 20  # the operator's teardown deadline, shortened for 20 runs


def finished(out: Path) -> bool:
    try:
        return every_rank_finished(read_events(out / "events.jsonl"))
    except (OSError, ValueError):
        return False


def run_once(attempt: Path, out: Path, image: str | None, fault: str | None) -> dict:
    """The attempt's container once more into `out`, with the teardown `fault` injected, stopped
    at the teardown deadline as the cell operator stops it, and judged as the operator judges it."""
    spec = json.loads((attempt / "cell.json").read_text())
    spec["test_hooks"] = {**(spec.get("test_hooks") or {}), **({"teardown": fault} if fault else {})}
    out.mkdir(parents=True)
    write_json_atomic(out / "cell.json", spec)
    cmd = docker_run(json.loads((attempt / "container.json").read_text()), str(out))
    if image:
        cmd[-len(spec_command(attempt)) - 1] = image
    name = f"scalebench-teardown-{os.getpid()}-{out.name}"
    cmd[2:2] = ["--name", name]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    output: list[str] = []
    reader = threading.Thread(target=lambda: output.extend(proc.stdout), daemon=True)
    reader.start()
    finished_at, hung = None, False
    while proc.poll() is None:
        time.sleep(1)
        if finished_at is None and finished(out):
            finished_at = time.monotonic()
        elif finished_at is not None and time.monotonic() - finished_at > TEARDOWN_DEADLINE_S:
            subprocess.run(["docker", "stop", "-t", "5", name], capture_output=True)
            hung = True
            break
    proc.wait(timeout=120)
    reader.join(timeout=30)
    lines = "".join(output).splitlines()
    events = read_events(out / "events.jsonl") if (out / "events.jsonl").exists() else []
    try:
        load_result(out / "metrics.json")
        contract = True
    except (ContractError, OSError):
        contract = False
    if proc.returncode == 0:
        outcome = "valid" if contract else "contract_missing_or_invalid"
    else:
        failure = classify(proc.returncode, lines, finished=every_rank_finished(events),
                           hung_s=TEARDOWN_DEADLINE_S if hung else None)
        outcome = "teardown_crash (valid)" if failure.reason == "teardown_crash" and contract else failure.reason
    return {"exit": proc.returncode, "outcome": outcome, "contract": contract,
            "lost": not outcome.startswith(("valid", "teardown_crash")),
            "teardown_signs": hung or any(s in line for line in lines for s in TEARDOWN_SIGNS)}


def spec_command(attempt: Path) -> list[str]:
    return json.loads((attempt / "container.json").read_text())["command"]


def tally(rows: list[dict]) -> str:
    exits = collections.Counter(r["exit"] for r in rows)
    outcomes = collections.Counter(r["outcome"] for r in rows)
    return (f"{sum(r['lost'] for r in rows)} of {len(rows)} lost, exit codes {dict(sorted(exits.items()))}, "
            f"judged {dict(sorted(outcomes.items()))}, teardown messages in {sum(r['teardown_signs'] for r in rows)}")


@pytest.mark.timeout(6 * 3600)
@pytest.mark.parametrize("bench, image, runs", [
    ("unet_torch_voc2007", None, RUNS),
    ("frcnn_mmdet_voc2007", None, RUNS),
    ("unet_torch_voc2007", "scalebench/torch:gpu", GPU_RUNS),
])
def test_two_rank_cells_back_to_back_under_load_lose_nothing_at_teardown(attempts, busy, tmp_path, drill, bench,
                                                                         image, runs):
    if image and not docker_ready(image):
        pytest.skip(f"{image} not built (make images-gpu)")
    shown = image or CELLS[bench]
    rows = {when: [run_once(attempts[bench], tmp_path / f"{when}-{i}", image,
                            fault=("hang", "abort")[i % 2] if when == "before" else None)
                   for i in range(runs)] for when in ("before", "after")}
    drill.update(drill=f"teardown under load: {bench} in {shown}",
                 done=f"the 2-rank smoke cell run {runs} times back to back as its own docker run beside a busy loop "
                      f"on each of {busy} cores, before (a hang, stopped at a {TEARDOWN_DEADLINE_S}-s teardown "
                      "deadline, and an abort injected after every rank's run_stop, alternately) and after (final "
                      "barrier, every rank's run_stop, then destroyed), each judged as the cell operator does; every "
                      "run wrote its result and every 'before' run showed its crash",
                 happened=f"before: {tally(rows['before'])}; after: {tally(rows['after'])}",
                 figure=f"after: {sum(r['lost'] for r in rows['after'])} of {runs} lost")
    print(f"\n{bench} in {shown}: before {tally(rows['before'])}; after {tally(rows['after'])}")
    assert all(r["contract"] for r in rows["before"] + rows["after"])  # each trained to the end and wrote its result
    assert all(r["teardown_signs"] and r["exit"] != 0 for r in rows["before"]), rows["before"]  # reproduced
    assert not [r for r in rows["before"] + rows["after"] if r["lost"]], rows
