"""The kit's events in MLPerf's `:::MLLOG` format, read back with the mlperf-logging package's own parser."""
from mlperf_logging.compliance_checker import mlp_parser
from mlperf_logging.mllog import constants

from scalebench_kit.events import EventLog
from scalebench_kit.names import MLLOG_KEYS, MLLOG_NAMESPACE


def test_every_event_is_an_mllog_line_the_mlperf_parser_reads(tmp_path):
    log = EventLog(tmp_path / "events.jsonl", rank=0, world_size=2, echo=False)
    for key, value in (("run_start", None), ("init_start", None), ("init_stop", None), ("epoch_start", 1),
                       ("step_breakdown", {"step_s": 0.2}), ("epoch_stop", 1), ("eval_start", None),
                       ("metric", 0.61), ("eval_stop", None), ("run_stop", "success")):
        log.log(key, value, images=128)
    lines, errors = mlp_parser.parse_file(str(tmp_path / "mlperf.log"), ruleset="4.1.0")
    assert errors == []
    assert [ll.key for ll in lines] == ["run_start", "init_start", "init_stop", "epoch_start",
                                        "scalebench.step_breakdown", "epoch_stop", "eval_start", "scalebench.metric",
                                        "eval_stop", "run_stop"]
    assert lines[3].value == {"value": 1, "metadata": {"rank": 0, "world_size": 2, "pid": lines[3].value["metadata"]["pid"],
                                                       "images": 128}}
    assert lines[0].timestamp <= lines[-1].timestamp


def test_keys_that_mllog_defines_are_its_own_and_ours_are_namespaced():
    from scalebench_kit.names import EVENT_KEYS

    assert set(MLLOG_KEYS) == EVENT_KEYS
    for ours, (key, kind) in MLLOG_KEYS.items():
        assert kind in (constants.INTERVAL_START, constants.INTERVAL_END, constants.POINT_IN_TIME)
        if key.startswith(MLLOG_NAMESPACE):
            assert getattr(constants, ours.upper(), None) is None, f"{ours} is an mllog key: use it"
        else:
            assert getattr(constants, ours.upper()) == key
