"""The trainers' shared evaluation bookkeeping: which epochs are scored, what is recorded and logged."""
import time

import pytest

from scalebench_kit.evaluation import Evaluations
from scalebench_kit.events import EventLog, read_events


def run(tmp_path, each_epoch, epochs=3):
    events = EventLog(tmp_path / "events.jsonl", echo=False)
    evals = Evaluations(events, {"epochs": epochs, "eval_each_epoch": each_epoch})
    calls = []

    def score(epoch):
        def evaluate():
            calls.append(epoch)
            return {"iou": epoch / 10}
        return evaluate

    scored = [evals.after_epoch(e, 10.0 * e, score(e)) for e in range(1, epochs + 1)]
    metrics = evals.final(10.0 * epochs + 0.123456, score(epochs))
    return evals, scored, metrics, calls, read_events(tmp_path / "events.jsonl")


def test_each_epoch_but_the_last_is_scored_during_training_and_the_final_score_is_the_last_row(tmp_path):
    evals, scored, metrics, calls, events = run(tmp_path, True)
    assert calls == [1, 2, 3] and scored == [{"iou": 0.1}, {"iou": 0.2}, None] and metrics == {"iou": 0.3}
    assert evals.rows == [{"epoch": 1, "train_s": 10.0, "metrics": {"iou": 0.1}},
                          {"epoch": 2, "train_s": 20.0, "metrics": {"iou": 0.2}},
                          {"epoch": 3, "train_s": 30.1235, "metrics": {"iou": 0.3}}]
    assert [(e["key"], e.get("epoch")) for e in events] == [("metric", 1), ("metric", 2), ("eval_start", None),
                                                            ("eval_stop", None)]
    stop = events[-1]
    assert stop["iou"] == 0.3 and stop["value"] == pytest.approx(evals.seconds) and evals.seconds > 0


def test_without_eval_each_epoch_only_the_final_evaluation_runs_and_no_row_is_kept(tmp_path):
    evals, scored, metrics, calls, events = run(tmp_path, False)
    assert calls == [3] and scored == [None, None, None] and metrics == {"iou": 0.3} and evals.rows == []
    assert [e["key"] for e in events] == ["eval_start", "eval_stop"]


def test_a_failed_evaluation_still_counts_its_time_and_records_nothing(tmp_path):
    events = EventLog(tmp_path / "events.jsonl", echo=False)
    evals = Evaluations(events, {"epochs": 3, "eval_each_epoch": True})

    def out_of_memory():
        time.sleep(0.01)
        raise RuntimeError("out of memory")

    with pytest.raises(RuntimeError, match="out of memory"):
        evals.after_epoch(1, 10.0, out_of_memory)
    assert evals.seconds >= 0.01 and evals.rows == [] and not (tmp_path / "events.jsonl").exists()
