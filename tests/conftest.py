"""Fixtures and hooks for every test (tests/support/fixtures.py, shared with bench/drills), and
the time per test folder printed at the end of a run (tests/support/timing.py)."""
from tests.support.fixtures import *  # noqa: F401,F403
from tests.support.timing import pytest_runtest_logreport, pytest_terminal_summary  # noqa: F401
