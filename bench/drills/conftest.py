"""The drills use the test suite's fixtures (isolated state, the drill row, Docker checks)."""
from tests.support.fixtures import *  # noqa: F401,F403
