"""Several `airflow dags test` runs, and commands between them, in one Python process: each DAG run
through the CLI's own `dags test` (the same parser and `dag_test`), so a sequence of runs pays
Airflow's start (its imports, the in-process execution API, Great Expectations: 15-20 s of CPU on
a 2-core build machine) once, not once a run. `scalebench rehearse` runs its nights so, and the
tests their shared runs.

    python -m scalebench.orchestration.airflow_steps MARKER_URL|- STEPS_JSON

STEPS_JSON: a list of steps, each ["dags", "test", DAG_ID, ...] or ["run", COMMAND, ARG...]. A DAG
run that fails is an outcome (the report DAG fails a night with a regression on purpose): the
next step runs; a command that fails stops the sequence. With a marker URL each step is announced
there before it runs, so a receiver of the DAG's messages can tell the runs apart."""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path
from typing import Callable, NamedTuple

MARK = "== scalebench step"
_MARK_LINE = re.compile(rf"^{re.escape(MARK)} (\d+): (done|failed) in ([\d.]+) s$")
_END = f"{MARK}s: ended"  # main returned: a sequence that stopped at a failed command did so by design


class StepOutcome(NamedTuple):
    rc: int         # 0, or 1: a DAG run that failed, a command that did, or the process that ended mid-step
    log: str        # the step's part of the output
    seconds: float  # the step's own time, end to end (Airflow's start not counted)


def run_steps(env: dict, steps: list[list[str]], *, marker_url: str | None = None, timeout: float = 1800,
              cwd: Path | str | None = None,
              on_step: Callable[[int, StepOutcome], None] | None = None) -> list[StepOutcome]:
    """Each step's outcome, in order, `on_step(index, outcome)` called as each one ends. A step the
    sequence never reached is missing from the list; one the process ended during (a crash, or
    `timeout` seconds for the whole sequence) is failed, with what it printed and why it ended."""
    # a session of its own: a stop ends the commands and containers' clients it started too
    proc = subprocess.Popen([sys.executable, "-m", "scalebench.orchestration.airflow_steps", marker_url or "-",
                             json.dumps(steps)], env=env, cwd=cwd, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    timed_out = threading.Event()

    def stop() -> None:
        timed_out.set()
        _kill(proc)

    timer = threading.Timer(timeout, stop)
    timer.start()
    done: list[StepOutcome] = []
    lines: list[str] = []
    started, ended = time.monotonic(), False
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            mark = _MARK_LINE.match(line.rstrip("\n"))
            ended = ended or line.rstrip("\n") == _END
            if mark is None:
                lines.append(line)
                continue
            done.append(StepOutcome(0 if mark.group(2) == "done" else 1, "".join(lines), float(mark.group(3))))
            lines, started = [], time.monotonic()
            if on_step:
                on_step(len(done) - 1, done[-1])
        proc.wait()
    except BaseException:  # an interrupted caller (Ctrl-C) leaves no run behind
        _kill(proc)
        raise
    finally:
        timer.cancel()
    if len(done) < len(steps) and not ended:
        why = (f"the steps' process was stopped after {timeout:.0f} s" if timed_out.is_set()
               else f"the steps' process ended with exit code {proc.returncode}")
        done.append(StepOutcome(1, "".join(lines) + f"\n{why}\n", time.monotonic() - started))
        if on_step:
            on_step(len(done) - 1, done[-1])
    return done


def _kill(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _announce(url: str, index: int, step: list[str]) -> None:
    body = json.dumps({"step": index, "argv": step}).encode()
    request = urllib.request.Request(url, data=body, headers={"Content-Type": "application/json"})
    urllib.request.urlopen(request, timeout=30).read()


def _finished(index: int, outcome: str, began: float) -> None:
    sys.stderr.flush()  # the step's own lines before its mark, in one stream
    print(f"{MARK} {index}: {outcome} in {time.perf_counter() - began:.1f} s", flush=True)


def main(argv: list[str]) -> int:
    rc = _steps(argv[0], json.loads(argv[1]))
    print(_END, flush=True)  # not after an exception: the parent then fails the step it interrupted
    return rc


def _steps(url: str, steps: list[list[str]]) -> int:
    os.dup2(sys.stdout.fileno(), sys.stderr.fileno())  # one stream: a step's lines stay before its mark
    from airflow.cli import cli_parser

    parser = cli_parser.get_parser()
    for index, step in enumerate(steps):
        if url != "-":
            _announce(url, index, step)
        began = time.perf_counter()
        if step[0] == "run":
            sys.stdout.flush()
            ran = subprocess.run(step[1:], stderr=subprocess.STDOUT)
            if ran.returncode:
                print(f"{step[1:]} exited with {ran.returncode}", flush=True)
                _finished(index, "failed", began)
                return 1
        else:
            args = parser.parse_args(step)
            try:
                args.func(args)
            except SystemExit as exc:  # `dags test` exits with "DagRun failed" when the run fails
                print(exc, flush=True)
                _finished(index, "failed", began)
                continue
        _finished(index, "done", began)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
