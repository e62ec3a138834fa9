"""Fixtures and hooks for every test (tests/support/fixtures.py, shared with bench/drills), and
the time per test folder printed at the end of a run (tests/support/timing.py), the units
shared by one xdist worker (tests/support/workers.py)."""
from tests.support.fixtures import *  # noqa: F401,F403
from tests.support.timing import pytest_runtest_logreport, pytest_terminal_summary  # noqa: F401


def pytest_configure(config):
    from tests.support import workers

    if not config.pluginmanager.is_registered(workers):
        config.pluginmanager.register(workers, "scalebench-workers")
