"""Fixtures and hooks for every test (tests/support/fixtures.py, shared with bench/drills)."""
from tests.support.fixtures import *  # noqa: F401,F403
