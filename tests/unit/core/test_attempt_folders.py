"""A run id becomes a folder: it must stay one folder below its DAG's, whatever a trigger sends."""
import pytest

from scalebench.core import paths
from scalebench.core.attempt_folders import MAX_NAME, UnsafeName, run_dir, segment


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


@pytest.mark.parametrize("run_id, folder", [
    ("../../etc", ".._.._etc"),                       # slashes never reach the path
    ("a/b", "a_b"),
    ("manual__2026-12-01T01:00:00+00:00", "manual__2026-12-01T01_00_00_00_00"),
    ("nächtlich", "n_chtlich"),                       # unicode: a stable escape, the same folder every time
])
def test_other_run_ids_stay_one_folder_below_their_dag(isolated_state, run_id, folder):
    d = run_dir("scalebench_x", run_id)
    assert d.parent == paths.results_dir() / "scalebench_x" and d.name == folder == segment(run_id)
