"""Time per test folder, printed at the end of every run (CI's cost table: docs/testing.md): each
test's setup, call and teardown added to its file's folder (a module fixture's shared run counts
in the folder of the first test that asks for it)."""
from __future__ import annotations

from collections import defaultdict
from pathlib import PurePosixPath

_SPENT: dict[str, list[float]] = defaultdict(lambda: [0.0, 0])


def folder_of(nodeid: str) -> str:
    """'tests/unit/analysis/test_x.py::test_y[1]' -> 'tests/unit/analysis'."""
    return str(PurePosixPath(nodeid.split("::", 1)[0]).parent)


def pytest_runtest_logreport(report) -> None:
    spent = _SPENT[folder_of(report.nodeid)]
    spent[0] += report.duration
    spent[1] += report.when == "call"


def folder_table(spent: dict[str, list[float]]) -> list[str]:
    total = sum(s for s, _ in spent.values()) or 1.0
    rows = sorted(spent.items(), key=lambda kv: -kv[1][0])
    return [f"{s:8.1f} s {s / total:6.1%} {int(n):5d} tests  {folder}" for folder, (s, n) in rows]


def pytest_terminal_summary(terminalreporter) -> None:
    if _SPENT:
        terminalreporter.write_sep("=", "time per test folder (setup + call + teardown)")
        for line in folder_table(_SPENT):
            terminalreporter.write_line(line)
