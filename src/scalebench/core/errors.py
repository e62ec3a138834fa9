"""A run that failed for a reason outside the input (a subprocess, a DAG run): the command line
prints its one line and exits 1."""


class RunFailed(Exception):
    """A step that ran and failed; the message is one line and names the step and its telling log line."""


def telling_line(log: str) -> str:
    """The log line most likely to say why: the last one that mentions an error, else the last one."""
    lines = [ln.strip() for ln in log.splitlines() if ln.strip()]
    errors = [ln for ln in lines if "error" in ln.lower() or "failed" in ln.lower()]
    return ((errors or lines or ["no output"])[-1])[:300]
