"""The Great Expectations checks on a night's aggregate, in a process of their own. Importing GX
takes seconds (about 4 s on the 2-core build machine, more than the rest of a report), so a
process's first report starts this process first (report.build.publish): GX loads on another
core while the report reads the store and decides, then the table's rows go over a pipe and the
failures come back.

    python -m scalebench.report.checker     # rows as JSON on stdin, the failures as JSON on stdout
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import threading

TIMEOUT_S = 300
MODULE = "scalebench.report.checker"


class TableChecker:
    """One checking process: `start()` as early as possible, `send(rows)` once the table is decided
    (it does not wait), `result()` when the failures are needed, `close()` always (a report that
    failed before its checks leaves no process behind)."""

    def __init__(self, module: str = MODULE) -> None:
        self.module = module
        self._proc: subprocess.Popen | None = None
        self._talk: threading.Thread | None = None
        self._answer: list[str] = []

    def start(self) -> "TableChecker":
        # the child sees what this process imports from (an Airflow task adds folders at run time)
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
        self._proc = subprocess.Popen([sys.executable, "-m", self.module], stdin=subprocess.PIPE,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        return self

    def send(self, rows: list[dict]) -> None:
        """Hand the rows over; a thread talks to the process (it reads them only once GX is loaded)."""
        proc = self._proc or self.start()._proc
        assert proc is not None
        self._talk = threading.Thread(target=self._communicate, args=(proc, json.dumps(rows)), daemon=True)
        self._talk.start()

    def _communicate(self, proc: subprocess.Popen, data: str) -> None:
        try:
            out, err = proc.communicate(data, timeout=TIMEOUT_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            self._answer = [f"the table checks did not finish in {TIMEOUT_S} s"]
            return
        if proc.returncode != 0:
            last = (err.strip().splitlines() or ["no output"])[-1]
            self._answer = [f"the table checks could not run (exit {proc.returncode}): {last}"]
            return
        self._answer = json.loads(out)

    def result(self) -> list[str]:
        """The failures of the GX suite on the rows sent (empty: all met); a process that could not
        check says so as a failure."""
        if self._talk is None:
            raise RuntimeError("TableChecker.result() before send()")
        self._talk.join()
        return self._answer

    def check(self, rows: list[dict]) -> list[str]:
        self.send(rows)
        return self.result()

    def close(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            self._proc.kill()
            self._proc.wait()


def main() -> None:
    from scalebench.cell.validation import check_table

    import great_expectations  # noqa: F401  loaded before the rows arrive: that is this process's use

    json.dump(check_table(json.load(sys.stdin)), sys.stdout)
    sys.stdout.flush()
    # the answer is out and nothing is left to close: skip the interpreter's teardown of GX's modules
    # (0.7 s of a core the report is still using; the report waits for this process to end)
    os._exit(0)


if __name__ == "__main__":
    main()
