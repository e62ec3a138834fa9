"""bench/report_scale.py at a small size, as CI runs it: it fills in batches, publishes a night's
report over every night, serves the pages, explains every query they ran and prints its goal
line (its times are the bench's, read by a person; nothing here holds a time)."""
import subprocess
import sys

import pytest

from tests.support import ROOT


@pytest.mark.timeout(300)
def test_the_scale_bench_runs_small_and_finds_no_query_that_scans_a_growing_table():
    done = subprocess.run([sys.executable, str(ROOT / "bench" / "report_scale.py"), "--cells", "1440,2880",
                           "--fresh-runs", "1"],
                          capture_output=True, text=True, timeout=280, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-3000:]
    out = done.stdout
    assert "query plans at 1440 cells" in out and "no query scans a table that grows with the nights" in out, out
    assert "     2880 cells (20 nights)" in out and "growth 1440 -> 2880 cells (x2): report x" in out
    assert out.count("(complete), in a fresh process ") == 2  # the night published again by a new process
    assert "goals at 2880 cells: report < 5 s in a fresh task" in out and "memory < 1 GB" in out
