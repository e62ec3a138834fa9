"""The tests' shared runs: several `airflow dags test` runs, and commands between them, in one
Python process (scalebench.orchestration.airflow_steps, as `scalebench rehearse` runs its nights)."""
from scalebench.orchestration.airflow_steps import run_steps as _run_steps


def run_steps(env: dict, steps: list[list[str]], marker_url: str | None = None,
              timeout: float = 1800) -> list[tuple[int, str]]:
    """Each step's (exit code, log): 0, or 1 for a DAG run that failed or a command that did; a
    step the sequence never reached is missing from the list."""
    from tests.support import ROOT

    return [(o.rc, o.log) for o in _run_steps(env, steps, marker_url=marker_url, timeout=timeout, cwd=ROOT)]
