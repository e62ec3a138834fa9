"""`make drills`' bookkeeping: every selected drill writes its row, a skipped or errored one says so
in its row, and the renderer fails unless every drill passed."""
import json
import os
import subprocess
import sys

from tests.support import ROOT

DRILLS = '''
import pytest

@pytest.fixture
def broken():
    raise RuntimeError("engine gone")

def test_good(drill):
    drill.update(done="did it", happened="it held", figure="1 s")

def test_skipped(drill):
    pytest.skip("needs a GPU")

def test_errored(broken, drill):
    pass

def test_failed(drill):
    drill.update(done="did it")
    assert False
'''


def test_every_drill_writes_its_row_and_the_render_fails_unless_all_passed(tmp_path):
    (tmp_path / "conftest.py").write_text("from tests.support.fixtures import *  # noqa\n")
    (tmp_path / "test_fake_drills.py").write_text(DRILLS)
    rows = tmp_path / "rows.jsonl"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "SCALEBENCH_DRILL_ROWS": str(rows)}
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", "drill",
                          str(tmp_path)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 1, run.stdout
    got = {r["test"].split("::")[1]: r for r in map(json.loads, rows.read_text().splitlines())}
    assert got["test_good"]["outcome"] == "passed" and got["test_good"]["happened"] == "it held"
    assert got["test_skipped"]["outcome"] == "SKIPPED (needs a GPU)"
    assert got["test_errored"]["outcome"].startswith("ERROR before the drill ran (RuntimeError: engine gone")
    assert got["test_failed"]["outcome"] == "FAILED"
    doc = tmp_path / "reliability.md"
    render = subprocess.run([sys.executable, str(ROOT / "bench/drills/render.py"), str(rows), str(doc)],
                            capture_output=True, text=True)
    assert render.returncode == 1 and "3 not passed" in render.stdout
    assert "(1 of 4 drills passed)" in doc.read_text() and "SKIPPED (needs a GPU)" in doc.read_text()
    # a drill selected that never wrote a row (pytest stopped before it) is a row too
    expected = rows.parent / "rows.jsonl.expected"
    assert len(expected.read_text().split()) == 4  # what the run selected
    expected.write_text(expected.read_text() + "t.py::gone\n")
    subprocess.run([sys.executable, str(ROOT / "bench/drills/render.py"), str(rows), str(doc)], capture_output=True)
    assert "| t.py::gone | - | (did not get this far) | - | ERROR (selected, never ran) |" in doc.read_text()
