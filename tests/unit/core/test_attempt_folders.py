"""A run id becomes a folder: it must stay one folder below its DAG's, whatever a trigger sends,
and no two ids share one."""
import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scalebench.core import paths
from scalebench.core.attempt_folders import (HASH_CHARS, MAX_NAME, UnsafeName, cell_attempts, claim, run_dir,
                                             segment)
from scalebench_kit.names import CELL_SPEC_FILE


@pytest.mark.parametrize("run_id, why", [
    ("..", "would be the folder '..' (outside its own)"),
    (".", "would be the folder '.' (outside its own)"),
    ("...", "would be the folder '...' (outside its own)"),
    ("", "would be empty"),
    ("x" * 300, f"is 300 characters; at most {MAX_NAME} name a folder"),
])
def test_a_run_id_that_cannot_be_one_folder_is_refused_with_the_reason(run_id, why):
    with pytest.raises(UnsafeName) as exc:
        run_dir("scalebench_x", run_id)
    assert f"run id {run_id[:40]!r}" in str(exc.value) and why in str(exc.value)


@pytest.mark.parametrize("run_id, readable", [
    ("../../etc", ".._.._etc@"),                      # slashes never reach the path
    ("a/b", "a_b@"),
    ("manual__2026-12-01T01:00:00+00:00", "manual__2026-12-01T01_00_00_00_00@"),
    ("nächtlich", "n_chtlich@"),                      # unicode: a stable escape, the same folder every time
    ("scheduled__x.y-1", "scheduled__x.y-1"),         # letters, digits, _ . -: the name itself
])
def test_other_run_ids_stay_one_folder_below_their_dag(isolated_state, run_id, readable):
    d = run_dir("scalebench_x", run_id)
    assert d.parent == paths.results_dir() / "scalebench_x" and d.name == segment(run_id)
    assert d.name.startswith(readable) and len(d.name) == len(readable) + (HASH_CHARS if readable.endswith("@") else 0)


NAME = st.text(min_size=1, max_size=60)


@st.composite
def look_alikes(draw):
    """Two names the old scheme gave one folder: the same text with one kept character swapped
    for another that the old scheme also turned into `_`."""
    head, tail = draw(NAME), draw(NAME)
    a, b = draw(st.sampled_from(["_", ":", "+", "~", "/", " ", "ä", "@", "\x00"])), draw(st.characters())
    return head + a + tail, head + b + tail


@settings(max_examples=400, deadline=None)
@given(st.one_of(st.tuples(NAME, NAME), look_alikes()), st.sampled_from(["run id", "DAG id", "cell id"]))
def test_different_names_never_share_a_folder_and_none_escapes_its_parent(pair, what):
    a, b = pair
    try:
        fa, fb = segment(a, what), segment(b, what)
    except UnsafeName:
        return
    assert (fa == fb) == (a == b)
    assert segment(a, what) == fa  # the same name, the same folder
    for f in (fa, fb):
        assert "/" not in f and "\x00" not in f and set(f) != {"."} and len(f.encode()) <= 255
        assert (Path("/r") / f).parent == Path("/r")


def test_folders_written_before_are_read_where_their_cell_json_names_the_run(isolated_state):
    """The old name of `a:b` was `a_b`, shared with the run id `a_b` itself: only the attempts whose
    cell.json names the run count, and a new attempt is numbered past them."""
    cell = {"dag_id": "scalebench_x", "run_id": "a:b", "cell_id": "g1-fp32-e1-r1"}
    old = paths.results_dir() / "scalebench_x" / "a_b" / "g1-fp32-e1-r1"
    for n, run in ((1, "a:b"), (2, "a_b")):
        (old / f"attempt-{n}").mkdir(parents=True)
        (old / f"attempt-{n}" / CELL_SPEC_FILE).write_text(json.dumps({"cell": {"run_id": run}}))
    assert cell_attempts(cell) == [(1, old / "attempt-1")]
    number, folder = claim(cell, 1)
    assert number == 2 and folder == run_dir("scalebench_x", "a:b") / "g1-fp32-e1-r1" / "attempt-2"
    assert cell_attempts(cell) == [(1, old / "attempt-1"), (2, folder)]
