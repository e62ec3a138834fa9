"""Several steps in one process (scalebench.orchestration.airflow_steps): each step's outcome and log apart,
as each ends; a failed command stops the sequence; a process that dies or overruns fails the step it
was in, with its output and why. The DAG runs themselves: the rehearsal, mmdetection, UNet and
alert tests."""
import os
import time

import pytest

from scalebench.orchestration.airflow_steps import run_steps

pytestmark = pytest.mark.timeout(120)


def test_each_steps_log_and_outcome_come_back_apart_and_a_failed_command_stops_the_sequence():
    seen = []
    out = run_steps(dict(os.environ), [["run", "sh", "-c", "echo one"], ["run", "sh", "-c", "echo two; exit 3"],
                                       ["run", "echo", "never"]], on_step=lambda i, o: seen.append((i, o.rc)))
    assert [o.rc for o in out] == [0, 1] and seen == [(0, 0), (1, 1)]  # the third never ran: missing
    assert out[0].log.strip().splitlines()[-1] == "one" and "two" not in out[0].log
    assert "two\n" in out[1].log and "exited with 3" in out[1].log and "never" not in out[1].log
    assert all(o.seconds >= 0 for o in out)


def test_a_process_that_dies_mid_step_fails_that_step_with_what_it_printed():
    # the step's command kills the steps' process: no mark for the step, no end of the sequence
    out = run_steps(dict(os.environ), [["run", "echo", "first"], ["run", "sh", "-c", "echo partial; kill -9 $PPID"],
                                       ["run", "echo", "never"]])
    assert [o.rc for o in out] == [0, 1]
    assert "partial" in out[1].log and "the steps' process ended with exit code -9" in out[1].log


def test_a_sequence_past_its_deadline_is_stopped_with_the_commands_it_started():
    t = time.monotonic()
    out = run_steps(dict(os.environ), [["run", "sh", "-c", "echo waiting; sleep 300"]], timeout=20)
    assert time.monotonic() - t < 60  # the sleep was stopped with its process, not waited for
    assert [o.rc for o in out] == [1] and "the steps' process was stopped after 20 s" in out[0].log
