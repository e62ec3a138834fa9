"""The GX table checks in their own process (report.checker): the same failures as in this
process, a process that cannot check said as a failure, nothing left running."""
import pytest

from scalebench.cell.validation import check_table
from scalebench.report.checker import TableChecker

ROWS = [{"benchmark": "a", "gpus": None, "efficiency": None, "status": "valid", "baseline_ok": True},
        {"benchmark": "a", "gpus": 2, "efficiency": 0.91, "status": "valid", "baseline_ok": True},
        {"benchmark": "b", "gpus": 4, "efficiency": 1.7, "status": "valid", "baseline_ok": True},
        {"benchmark": "b", "gpus": None, "efficiency": None, "status": "refused", "baseline_ok": False}]


@pytest.mark.timeout(120)
def test_the_process_finds_what_the_suite_finds_here():
    here = check_table(ROWS)
    assert len(here) == 3 and any("max_value=1.5" in f and "1.7" in f for f in here)  # efficiency above 1.5
    assert any("value_set=['valid'" in f and "refused" in f for f in here)  # a status the suite does not know
    checker = TableChecker().start()
    try:
        assert checker.check(ROWS) == here
    finally:
        checker.close()
    assert check_table(ROWS[:2]) == []  # a sound table passes


@pytest.mark.timeout(60)
def test_a_process_that_cannot_check_is_a_failure_not_a_pass():
    checker = TableChecker(module="scalebench.report.no_such_checker").start()
    [failure] = checker.check(ROWS)
    assert failure.startswith("the table checks could not run (exit 1): ") and "no_such_checker" in failure


def test_result_before_send_is_refused_and_close_ends_the_process():
    checker = TableChecker().start()
    with pytest.raises(RuntimeError, match="before send"):
        checker.result()
    checker.close()
    assert checker._proc.poll() is not None


@pytest.mark.timeout(120)
def test_a_published_report_takes_its_table_checks_from_the_process(monkeypatch):
    """A report task's process has not loaded GX: its first publish starts the checking process,
    draws the plots while it checks, and the report says what it found (a 2-GPU time at 30 % of
    the 1-GPU one: efficiency 1.67, above the suite's 1.5); its next publish checks in place."""
    import sys

    from scalebench.report.build import publish
    from scalebench.report.checks import table_checks
    from scalebench.report.model import Options
    from scalebench.store.results import Store
    from tests.unit.report.test_summary import NIGHT, record

    store = Store()
    for r in (1, 2, 3):
        record(store, 1, r, 100.0)
        record(store, 2, r, 30.0)
    started = []
    from scalebench.report import build

    monkeypatch.setitem(build._FIRST_REPORT, "apart", True)  # this process's first report (restored after)
    with monkeypatch.context() as m:
        m.delitem(sys.modules, "great_expectations", raising=False)
        m.setattr(TableChecker, "start", lambda self, _start=TableChecker.start: started.append(1) or _start(self))
        rep, path = publish(store, NIGHT, Options(expected=["resnet50_keras_cifar10"]))
    assert started and rep.table_checks == table_checks(rep) and len(rep.table_checks) == 1
    assert "max_value=1.5" in rep.table_checks[0] and rep.table_checks[0] in path.read_text()
    with monkeypatch.context() as m:  # its next report: GX is loaded here, not in another process again
        m.delitem(sys.modules, "great_expectations", raising=False)
        m.setattr(TableChecker, "start", lambda self: started.append(2) or self)
        again, _ = publish(store, NIGHT, Options(expected=["resnet50_keras_cifar10"]))
    assert started == [1] and again.table_checks == rep.table_checks
