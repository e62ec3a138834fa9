"""Where a result came from, beyond what the cell spec says: the orchestrator's own revision."""
from __future__ import annotations

import os
import subprocess

from . import paths


def git_revision() -> str:
    """The checkout's commit (+ "-dirty" with uncommitted changes to tracked files), read afresh
    for every cell: a long-lived worker must not report the revision it started with."""
    if os.environ.get("SCALEBENCH_GIT_REVISION"):  # an installed image has no checkout: its build records it
        return os.environ["SCALEBENCH_GIT_REVISION"]
    root = paths.project_root()
    if root is None:
        return "unknown"
    try:
        out = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10)
        rev = out.stdout.strip()
        if out.returncode == 0 and rev:
            dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
                                   capture_output=True, text=True, timeout=10).stdout.strip()
            return rev + ("-dirty" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        pass
    return "unknown"
