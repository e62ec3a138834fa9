"""Several `airflow dags test` runs, and commands between them, in one Python process: each DAG run
through the CLI's own `dags test` (the same parser and `dag_test`), so a sequence of report nights
pays Airflow's start (its imports, the in-process execution API, Great Expectations) once, not
once a night. Each step is announced to a marker URL before it runs, so a receiver of the DAG's
messages can tell the nights apart.

    python -m tests.support.nights MARKER_URL STEPS_JSON

STEPS_JSON: a list of steps, each ["dags", "test", DAG_ID, ...] or ["run", COMMAND, ARG...]. A DAG
run that fails is an outcome (the report DAG fails a night with a regression on purpose): it is
printed and the next step runs; a command that fails stops the sequence with a non-zero exit."""
import json
import subprocess
import sys
import urllib.request


def announce(url: str, index: int, step: list[str]) -> None:
    body = json.dumps({"step": index, "argv": step}).encode()
    request = urllib.request.Request(url, data=body, headers={"Content-Type": "application/json"})
    urllib.request.urlopen(request, timeout=30).read()


def main(argv: list[str]) -> int:
    url, steps = argv[0], json.loads(argv[1])
    from airflow.cli import cli_parser

    parser = cli_parser.get_parser()
    for index, step in enumerate(steps):
        announce(url, index, step)
        if step[0] == "run":
            done = subprocess.run(step[1:])
            if done.returncode:
                print(f"step {index}: {step[1:]} exited with {done.returncode}", flush=True)
                return 1
        else:
            args = parser.parse_args(step)
            try:
                args.func(args)
            except SystemExit as exc:  # `dags test` exits with "DagRun failed" when the run fails
                print(f"step {index}: {exc}", flush=True)
                continue
        print(f"step {index} done", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
