"""`make test`'s two workers (tests/support/workers.py): a module, or tests/system/, runs whole on
one worker, its module fixture once; slow units are handed out first."""
import json
import subprocess
import sys
from types import SimpleNamespace

import pytest

from tests.support import ROOT
from tests.support.workers import slow_first, unit_of


def test_a_unit_is_a_module_or_a_serial_folder():
    assert unit_of("tests/unit/analysis/test_x.py::test_y[a::b]") == "tests/unit/analysis/test_x.py"
    assert unit_of("tests/system/test_service.py::test_a") == unit_of("tests/system/test_drills.py::t[stop]")
    assert unit_of("containers/kit/tests/test_hold.py::test_z") == "containers/kit/tests/test_hold.py"


def item(nodeid: str, slow: bool = False):
    return SimpleNamespace(nodeid=nodeid, get_closest_marker=lambda name: name == "slow" and slow or None)


def test_units_with_a_slow_test_go_first_and_stay_together():
    items = [item("tests/unit/a.py::t1"), item("tests/integration/b.py::t1"), item("tests/unit/a.py::t2"),
             item("tests/integration/b.py::t2", slow=True), item("tests/unit/c.py::t1")]
    assert [i.nodeid for i in slow_first(items)] == [
        "tests/integration/b.py::t1", "tests/integration/b.py::t2", "tests/unit/a.py::t1", "tests/unit/a.py::t2",
        "tests/unit/c.py::t1"]


MODULE = """
import os, json, pytest
@pytest.fixture(scope="module")
def shared(tmp_path_factory):
    with open({log!r}, "a") as fh:
        fh.write(json.dumps(["fixture", __name__, os.environ["PYTEST_XDIST_WORKER"]]) + "\\n")
@pytest.mark.parametrize("i", range(6))
def test_t(shared, i):
    with open({log!r}, "a") as fh:
        fh.write(json.dumps(["test", __name__, os.environ["PYTEST_XDIST_WORKER"]]) + "\\n")
"""


@pytest.mark.timeout(120)
def test_under_two_workers_each_module_runs_whole_on_one_and_its_fixture_once(tmp_path):
    log = tmp_path / "log.jsonl"
    for name in ("test_one.py", "test_two.py", "test_three.py"):
        (tmp_path / name).write_text(MODULE.format(log=str(log)))
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "tests.support.workers",
                           "-n", "2", "--rootdir", str(tmp_path), "-c", "/dev/null", str(tmp_path)],
                          cwd=ROOT, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
                          capture_output=True, text=True, timeout=110)
    assert proc.returncode == 0 and "18 passed" in proc.stdout, proc.stdout[-2000:] + proc.stderr[-2000:]
    rows = [json.loads(line) for line in log.read_text().splitlines()]
    for module in ("test_one", "test_two", "test_three"):
        mine = [(kind, worker) for kind, name, worker in rows if name == module]
        assert [k for k, _ in mine].count("fixture") == 1 and len(mine) == 7
        assert len({w for _, w in mine}) == 1, mine  # one worker ran the whole module
    assert len({w for *_, w in rows}) == 2  # and both workers had work
