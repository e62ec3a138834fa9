"""The nightly report reads what it shows: no query of a record step's night summary or of
building and publishing a night's report scans a table that grows with every night, or reads one
by its benchmark alone (SQLite's planner says so for each query it ran), so their time follows
the nights they show and the lookback, not all the years of nights."""
from scalebench.report.build import publish
from scalebench.report.model import Options
from scalebench.report.summary import summarize_night
from scalebench.store.results import Store
from tests.support.query_plans import recorded, whole_table_scans
from tests.support.samples import seed_nights


def test_no_query_of_a_nights_summary_or_report_scans_a_table_that_grows_with_the_nights(isolated_state):
    store = Store()
    facts = seed_nights(store, count=8)
    with recorded(store.engine) as queries:
        summarize_night(store, "resnet50_keras_cifar10", facts["last"])  # what a record step adds
        publish(store, facts["last"], Options(expected=["resnet50_keras_cifar10"]))
    assert len(queries) > 10  # the report's reads were recorded
    assert whole_table_scans(store.engine, queries) == []
