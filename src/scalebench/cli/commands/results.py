"""What the store holds: cells and their figures, one benchmark's nights, and two runs or nights compared."""
from __future__ import annotations

from scalebench.analysis.compare import CompareError
from scalebench.cli.arguments import Command, arg, night, number, whole
from scalebench.cli.listing import Listing
from scalebench.core import tables
from scalebench.core.config import Configs


def cmd_results(args, configs: Configs) -> Listing:
    from scalebench.store.results import Store

    cells = Store().cells(benchmark=args.benchmark, run_id=args.run_id, night=args.night, since=args.since)
    if args.failed:  # cells with no figure: failed, invalid or never started
        cells = [c for c in cells if c["figure"] is None]
    from scalebench.report.exports import RESULT_COLUMNS, result_row

    rows = [result_row(c) for c in cells]
    return Listing(RESULT_COLUMNS, rows, cells, empty="no stored cells" + (" without a valid result" if args.failed else ""))


def cmd_history(args, configs: Configs) -> Listing:
    """One benchmark's night summaries (what its history page shows): the terminal's table from the
    same columns as the page's; CSV and JSON as the page's downloads."""
    import datetime as dt

    from scalebench.report.exports import HISTORY_COLUMNS, history_row, history_table
    from scalebench.store.results import Store

    since = (dt.datetime.now(dt.timezone.utc).date() - dt.timedelta(days=args.nights - 1)).isoformat()
    summaries = Store().summaries(benchmark=args.benchmark, since=None if args.all else since)
    if not summaries and args.benchmark not in configs.load_all()[0]:
        configs.benchmark(args.benchmark)  # no night and no such benchmark: says which ones there are
    if args.gpus:
        summaries = [s for s in summaries if s["gpus"] == args.gpus]
    text = tables.text(tables.build(history_table(), summaries)) if summaries else None
    return Listing(HISTORY_COLUMNS, [history_row(s) for s in summaries], summaries, text=text,
                   empty=f"no night of {args.benchmark} summarized" + ("" if args.all else f" since {since}"))


def cmd_compare(args, configs: Configs) -> Listing:
    from dataclasses import asdict

    from scalebench.analysis.compare import (COMPARISON_COLUMNS, compare, compare_nights, comparison_rows, render,
                                             render_nights)
    from scalebench.store.results import Store

    store = Store()
    if args.nights:
        a, b = args.nights
        cmp = compare_nights(store.cells(night=a), store.cells(night=b), a, b, args.benchmark, args.margin)
        rows = [r for c in cmp.benchmarks for r in comparison_rows(c)]
        return Listing(COMPARISON_COLUMNS, rows, asdict(cmp), text=render_nights(cmp))
    if not (args.run_a and args.run_b):
        raise CompareError("give two run ids (RUN_A RUN_B) or --nights A B")
    runs = compare(store, args.run_a, args.run_b, args.benchmark, args.margin)
    return Listing(COMPARISON_COLUMNS, comparison_rows(runs), asdict(runs), text=render(runs))


RESULTS = Command("results", "stored cells: the figure, or why the last attempt failed", cmd_results, (
    arg("--benchmark"),
    arg("--run-id"),
    arg("--night", exclusive="when", type=night, metavar="YYYY-MM-DD", help="one night (a DAG run's logical date, UTC)"),
    arg("--since", exclusive="when", type=night, metavar="YYYY-MM-DD", help="that night and every later one"),
    arg("--failed", action="store_true", help="only cells without a valid result"),
), listing=True)
HISTORY = Command("history", "one benchmark across nights: its figures per night, GPU count and precision (the "
                             "history page's table)", cmd_history, (
    arg("benchmark"),
    arg("--nights", type=whole(1, 36500), default=30, help="the last N nights (default 30)"),
    arg("--all", action="store_true", help="every summarized night"),
    arg("--gpus", type=whole(1, 1024), help="one GPU count"),
), listing=True)
COMPARE = Command("compare", "a candidate run B against run A per cell: time ratio with its CI, throughput, accuracy "
                             "equivalence (e.g. a new image tag)", cmd_compare, (
    arg("run_a", nargs="?", help="reference run id (or --nights)"),
    arg("run_b", nargs="?", help="candidate run id"),
    arg("--nights", nargs=2, type=night, metavar=("A", "B"),
        help="two nights instead: per benchmark, the run each night's report reads"),
    arg("--benchmark", help="one benchmark (needed when a run id belongs to several benchmarks' DAGs)"),
    arg("--margin", type=number(0, 1, open_low=True), default=0.01, help="accuracy equivalence margin (default 0.01)"),
), listing=True)
