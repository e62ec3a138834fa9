"""CI's table of time per test folder (tests/support/timing.py)."""
from tests.support.timing import folder_of, folder_table


def test_a_test_is_counted_in_its_files_folder_and_the_table_is_sorted_by_time():
    assert folder_of("tests/unit/analysis/test_x.py::test_y[a::b]") == "tests/unit/analysis"
    assert folder_of("containers/kit/tests/test_hold.py::test_z") == "containers/kit/tests"
    lines = folder_table({"tests/unit": [10.0, 4], "tests/integration/dags": [30.0, 2]})
    assert lines[0].split() == ["30.0", "s", "75.0%", "2", "tests", "tests/integration/dags"]
    assert lines[1].split() == ["10.0", "s", "25.0%", "4", "tests", "tests/unit"]
