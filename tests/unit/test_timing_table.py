"""CI's table of time per test folder (tests/support/timing.py)."""
from tests.support.timing import folder_of, folder_table


def test_a_test_is_counted_in_its_files_folder_and_the_table_is_sorted_by_time():
    assert folder_of("tests/unit/analysis/test_x.py::test_y[a::b]") == "tests/unit/analysis"
    assert folder_of("containers/kit/tests/test_hold.py::test_z") == "containers/kit/tests"
    lines = folder_table({"tests/unit": [10.0, 4], "tests/integration/dags": [30.0, 2]})
    assert lines[0].split() == ["30.0", "s", "75.0%", "2", "tests", "tests/integration/dags"]
    assert lines[1].split() == ["10.0", "s", "25.0%", "4", "tests", "tests/unit"]


def ci_module(name: str):
    """A script of .ci/ (not a package: loaded from its file)."""
    import importlib.util

    from tests.support import ROOT

    spec = importlib.util.spec_from_file_location(name.replace("-", "_"), ROOT / ".ci" / name)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


LOG = """CI steps: venv (new clone) 25 s
CI steps: lint (beside the tests) 16 s
CI steps: CPU images 360 s
CI steps: pytest 1500 s
CI machine: reference workload 0.98 s before the run, 1.21 s after (one core); pytest's CPU busy 87 %
CI took 1900 s
================ time per test folder (setup + call + teardown) ================
   508.0 s  60.0%    10 tests  tests/integration/dags
   338.7 s  40.0%   143 tests  tests/unit/orchestration
========== slowest 50 durations ==========
1098 passed, 13 skipped, 2 warnings in 1499.60s (0:24:59)
"""


def test_the_cost_table_has_every_step_and_folder_of_the_one_log_it_reads():
    import pytest

    text = ci_module("cost-table.py").table(LOG, "cold, commit abc")
    assert text.startswith("One run of `.ci/run` (cold, commit abc): **31.7 min** in all, pytest 25.0 min wall "
                           "(1098 passed, 13 skipped). The machine: `.ci/machine.py`'s reference workload in 0.98 s on "
                           "one core before the run and 1.21 s after it; both cores 87 % busy while pytest ran.")
    assert "| venv (new clone) | 25 |\n| lint (beside the tests) | 16 |\n| CPU images | 360 |\n| pytest | 1500 |\n" \
           "| all of CI | 1900 |" in text
    assert "| `tests/integration/dags` | 508 | 10 |\n| `tests/unit/orchestration` | 339 | 143 |" in text
    with pytest.raises(SystemExit, match="has no CI steps"):
        ci_module("cost-table.py").table(LOG.replace("CI took 1900 s", ""), "cold")


def test_the_machine_script_times_its_workload_and_reads_how_busy_the_cores_were(tmp_path):
    import subprocess
    import sys

    from tests.support import ROOT

    machine = ci_module("machine.py")
    assert machine.busy([100, 0, 0, 300, 0, 0, 0, 0], [150, 0, 50, 400, 0, 0, 0, 0]) == 0.5  # 100 of 200 ticks idle
    assert machine.busy([0, 0, 0, 0, 0, 0, 0, 0], [0, 0, 0, 50, 50, 0, 0, 0]) == 0.0  # idle and iowait both count as idle
    script = str(ROOT / ".ci" / "machine.py")
    before = tmp_path / "cpu.txt"
    before.write_text(subprocess.run([sys.executable, script, "cpu"], capture_output=True, text=True, check=True).stdout)
    assert len(before.read_text().split()) == 8
    for what in (["speed"], ["busy", str(before)]):
        out = subprocess.run([sys.executable, script, *what], capture_output=True, text=True, check=True).stdout
        assert float(out) >= 0, out
    assert subprocess.run([sys.executable, script, "nonsense"], capture_output=True, text=True).returncode != 0

