"""The drills use the test suite's fixtures (isolated state, the drill row, Docker checks)."""
from tests.conftest import *  # noqa: F401,F403
