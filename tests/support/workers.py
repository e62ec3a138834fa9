"""The units of work of `make test`'s two pytest-xdist workers (one per core).

A unit runs whole on one worker: a test module (its module fixtures, one `airflow dags test`
shared by its tests, run once), or a serial folder: the system tests start the real scheduler,
API server and databases and hold time-bound drills, so they never run beside each other.
Units with slow tests go first, so the many short ones fill the end of the run. Without xdist
nothing here applies."""
from __future__ import annotations

import pytest

SERIAL_FOLDERS = ("tests/system/",)


def unit_of(nodeid: str) -> str:
    """'tests/unit/x/test_a.py::test_b[1]' -> 'tests/unit/x/test_a.py'; a serial folder is one unit."""
    path = nodeid.split("::", 1)[0]
    return next((folder for folder in SERIAL_FOLDERS if path.startswith(folder)), path)


def slow_first(items: list) -> list:
    """The items, each unit kept together, units with a `slow` test first (else in collection order)."""
    order: dict[str, int] = {}
    slow: set[str] = set()
    for item in items:
        unit = unit_of(item.nodeid)
        order.setdefault(unit, len(order))
        if item.get_closest_marker("slow"):
            slow.add(unit)
    return sorted(items, key=lambda item: (unit_of(item.nodeid) not in slow, order[unit_of(item.nodeid)]))


@pytest.hookimpl(trylast=True)  # after the marks are final
def pytest_collection_modifyitems(config, items) -> None:
    if hasattr(config, "workerinput"):  # every worker sorts the same collection the same way
        items[:] = slow_first(items)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    from xdist.scheduler import LoadScopeScheduling

    class ByUnit(LoadScopeScheduling):
        """xdist's per-module scheduling, with our units, in the order the workers collected."""

        def _split_scope(self, nodeid: str) -> str:
            return unit_of(nodeid)

    config.option.loadscopereorder = False
    return ByUnit(config, log)
