"""Several `airflow dags test` runs, and commands between them, in one Python process: each DAG run
through the CLI's own `dags test` (the same parser and `dag_test`), so a sequence of runs pays
Airflow's start (its imports, the in-process execution API, Great Expectations) once, not once a
run. `run_steps` runs it and hands back each step's exit code and its part of the log; with a
marker URL each step is announced there before it runs, so a receiver of the DAG's messages can
tell the runs apart.

    python -m tests.support.nights MARKER_URL|- STEPS_JSON

STEPS_JSON: a list of steps, each ["dags", "test", DAG_ID, ...] or ["run", COMMAND, ARG...]. A DAG
run that fails is an outcome (the report DAG fails a night with a regression on purpose): the
next step runs; a command that fails stops the sequence."""
import json
import os
import re
import subprocess
import sys
import urllib.request

MARK = "== tests.support.nights step"


def run_steps(env: dict, steps: list[list[str]], marker_url: str | None = None,
              timeout: float = 1800) -> list[tuple[int, str]]:
    """Each step's (exit code, log): 0, or 1 for a DAG run that failed or a command that did; a
    step the sequence never reached is missing from the list."""
    from tests.support.airflow_home import BIN, run

    _, log = run([BIN / "python", "-m", "tests.support.nights", marker_url or "-", json.dumps(steps)], env, timeout)
    parts = re.split(rf"^{re.escape(MARK)} \d+: (done|failed)$", log, flags=re.MULTILINE)
    # [log of step 0, outcome 0, log of step 1, outcome 1, ..., what followed the last step]
    return [(0 if outcome == "done" else 1, text) for text, outcome in zip(parts[0::2], parts[1::2])]


def announce(url: str, index: int, step: list[str]) -> None:
    body = json.dumps({"step": index, "argv": step}).encode()
    request = urllib.request.Request(url, data=body, headers={"Content-Type": "application/json"})
    urllib.request.urlopen(request, timeout=30).read()


def finished(index: int, outcome: str) -> None:
    sys.stderr.flush()  # the step's own lines before its mark, in one stream
    print(f"{MARK} {index}: {outcome}", flush=True)


def main(argv: list[str]) -> int:
    url, steps = argv[0], json.loads(argv[1])
    os.dup2(sys.stdout.fileno(), sys.stderr.fileno())  # one stream: a step's lines stay before its mark
    from airflow.cli import cli_parser

    parser = cli_parser.get_parser()
    for index, step in enumerate(steps):
        if url != "-":
            announce(url, index, step)
        if step[0] == "run":
            sys.stdout.flush()
            done = subprocess.run(step[1:], stderr=subprocess.STDOUT)
            if done.returncode:
                print(f"{step[1:]} exited with {done.returncode}", flush=True)
                finished(index, "failed")
                return 1
        else:
            args = parser.parse_args(step)
            try:
                args.func(args)
            except SystemExit as exc:  # `dags test` exits with "DagRun failed" when the run fails
                print(exc, flush=True)
                finished(index, "failed")
                continue
        finished(index, "done")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
