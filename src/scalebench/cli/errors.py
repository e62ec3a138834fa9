"""The command line's one error path: every error that reaches it becomes one line on stderr and
an exit status, never a traceback (--debug shows it)."""
from __future__ import annotations

import os
import sys

from scalebench.analysis.compare import CompareError
from scalebench.cell.datasets import DatasetError
from scalebench.cell.fetch import FetchError
from scalebench.core.config import ConfigError
from scalebench.core.errors import RunFailed
from scalebench.core.paths import ProjectNotFound
from scalebench.store.db import StoreNotReady


def explain(exc: BaseException, cmd: str) -> tuple[str | None, int]:
    """(one line, exit status) for an error that reached the command line: 2 for bad input (a
    config, an argument, a file or store that cannot be used), 1 for a run that failed, 130 for an
    interrupt, and a broken pipe (a reader that stopped reading) ends quietly."""
    if isinstance(exc, BrokenPipeError):
        try:  # Python's advice: point stdout at devnull so the interpreter's final flush stays quiet
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        except OSError:
            pass
        return None, 1
    if isinstance(exc, KeyboardInterrupt):
        return f"{cmd}: interrupted", 130
    if isinstance(exc, RunFailed):
        return str(exc), 1
    if isinstance(exc, (ConfigError, DatasetError, FetchError, StoreNotReady, ProjectNotFound, CompareError)):
        return str(exc), 2
    from scalebench.store.db import store_error

    store = store_error(exc)
    if store:
        return store, 2
    if isinstance(exc, UnicodeDecodeError):
        return f"{cmd}: a file is not UTF-8 text ({exc.reason} at byte {exc.start}); save it as UTF-8", 2
    if isinstance(exc, OSError):
        what = f"{exc.filename}: " if exc.filename else ""
        return f"{cmd}: {what}{exc.strerror or exc}; check the path and its permissions", 2
    first = (str(exc).strip().splitlines() or [""])[0][:300]
    return (f"{cmd}: {type(exc).__name__}: {first}; this is a bug or an unexpected state: run it again with "
            "--debug (or SCALEBENCH_DEBUG=1) for the traceback"), 1
