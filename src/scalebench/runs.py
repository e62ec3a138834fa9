"""Old home of the attempt-folder helpers, kept as aliases for one release: use
scalebench.attempt_folders, scalebench.provenance and scalebench_kit.names instead."""
from scalebench_kit.names import FAILURE_FILE, PLACEMENT_FILE, VALIDATION_FILE  # noqa: F401

from .attempt_folders import attempt_dir, run_dir, safe  # noqa: F401
from .provenance import git_revision  # noqa: F401
