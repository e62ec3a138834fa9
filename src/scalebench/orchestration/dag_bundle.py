"""The DAG folder as Airflow's DAG processor sees it, parsed again when what the DAGs are generated
from changes, instead of on a short timer.

Airflow parses every DAG file again each `[dag_processor] min_file_process_interval` and, sooner,
any file whose modification time is newer than its last parse. Our DAG files barely change: the
DAGs come from include/configs/ and scalebench's code. So the interval is long (see
deploy/airflow/settings.env) and this bundle, refreshed every `refresh_interval` seconds,
touches the DAG files when any of those inputs changed since the last refresh; the processor
then parses them within its next loop. A check costs a few hundred `stat` calls.

Airflow parses a file again when its modification time is newer than its last parse's *end*: a
touch that lands while a parse that began before the change is still running would be older
than that end and missed for an hour, so the files are touched again at the next refresh. A
symlinked folder (a benchmarks/ kept elsewhere) is followed. When scalebench's own code changed
(an upgrade), the processor's main process, which forks every parse from the modules it has
imported, is restarted in place (exec, same pid), so no parse runs the old code."""
from __future__ import annotations

import logging
import os
from pathlib import Path

from airflow.dag_processing.bundles.local import LocalDagBundle

log = logging.getLogger(__name__)


def code_inputs() -> list[Path]:
    """scalebench's and its kit's code: what the processor's own process has imported."""
    import scalebench
    import scalebench_kit

    return [Path(scalebench.__file__).parent, Path(scalebench_kit.__file__).parent]


def dag_inputs() -> list[Path]:
    """The configs the generated DAGs are built from (benchmarks, fleet, stacks); with the code
    of code_inputs, everything they are built from."""
    from scalebench.core import paths

    return list(dict.fromkeys([paths.config_dir(), paths.fleet_file()]))


def fingerprint(roots: list[Path]) -> int:
    """What every file and folder under `roots` looks like from outside (path, size, modification
    time): any edit, added or removed file changes it, an older time copied in (`cp -p`) too."""
    seen = []
    for root in roots:
        visited: set[str] = set()
        walk = os.walk(root, followlinks=True) if root.is_dir() else [(str(root.parent), [], [root.name])]
        for folder, dirs, files in walk:
            real = os.path.realpath(folder)
            if real in visited:  # a symlink loop, or a folder linked twice: once is enough
                dirs[:] = []
                continue
            visited.add(real)
            dirs[:] = sorted(d for d in dirs if d != "__pycache__")
            for name in sorted(files):
                try:
                    st = os.stat(os.path.join(folder, name))
                except OSError:
                    continue  # removed while walking
                seen.append((folder, name, st.st_size, st.st_mtime_ns))
    return hash(tuple(seen))


class GeneratedDagBundle(LocalDagBundle):
    """A local DAG folder whose files are marked changed when their generated DAGs' inputs change."""

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self._seen: int | None = None
        self._code: int | None = None
        self._again = False  # touch once more at the next refresh (a parse may have begun before the change)

    def refresh(self) -> None:
        code = fingerprint(code_inputs())  # each folder walked once a refresh
        if self._code is not None and code != self._code:
            restart_processor("scalebench's code changed (an upgrade)")
        self._code = code
        now = hash((code, fingerprint(dag_inputs())))
        if self._seen is not None and now != self._seen:
            touched = mark_changed(self.path)
            self._again = True
            log.info("DAG inputs changed: %d DAG files marked for parsing", touched)
        elif self._again:
            mark_changed(self.path)
            self._again = False
        self._seen = now  # the first refresh is at start-up, when every file is parsed anyway


def restart_processor(why: str) -> None:
    """The DAG processor again, in place (exec: the same pid, the service's records stay true), so
    its parses fork from the new code; anywhere else (a test, a CLI) only said."""
    import sys

    if "dag-processor" not in sys.argv:
        log.warning("%s: a DAG processor would restart here", why)
        return
    log.warning("%s: restarting the DAG processor (pid %d) on it", why, os.getpid())
    logging.shutdown()
    os.execv(sys.executable, [sys.executable, *sys.argv])


def mark_changed(dag_folder: Path) -> int:
    """Set the DAG files' modification time to now, which the DAG processor takes as changed."""
    touched = 0
    for f in sorted(dag_folder.glob("*.py")):
        try:
            os.utime(f)
            touched += 1
        except OSError as e:  # a read-only folder: the edit waits for min_file_process_interval
            log.warning("cannot mark %s changed (%s); it is parsed again at the next interval", f, e)
    return touched
