"""What more GPUs would give: a prediction from the store's nights, or from a table of measured points."""
from __future__ import annotations

from pathlib import Path

from scalebench.cli.arguments import Command, arg, number, whole
from scalebench.cli.listing import Listing
from scalebench_kit.names import PRECISIONS

from scalebench.core.config import ConfigError, Configs

COLUMNS = ["series", "target", "images_per_s", "interval", "relative_time", "efficiency", "limit"]


def cmd_predict(args, configs: Configs) -> Listing:
    if args.from_table:
        return _from_table(args)
    if args.busbw or args.link_gbps or args.link_efficiency:  # nights have the fleet's links and stored sweeps
        raise ConfigError("predict: --busbw, --link-gbps and --link-efficiency go with --from-table; a benchmark's "
                          "nights use the "
                          "all-reduce sweeps in the store and each host's link_gbps in the fleet file")
    if not args.benchmark:
        raise ConfigError("predict: name a BENCHMARK (its stored nights) or give --from-table FILE.csv")
    import datetime as dt

    from scalebench.core import nights
    from scalebench.report.model import LOOKBACK_NIGHTS
    from scalebench.report.predictions import predict_series
    from scalebench.store.results import Store

    if args.benchmark not in configs.load_all()[0]:
        configs.benchmark(args.benchmark)  # names the benchmarks there are
    since = (dt.date.fromisoformat(nights.today()) - dt.timedelta(days=LOOKBACK_NIGHTS)).isoformat()
    store = Store()
    cells = store.figures(since_night=since, benchmark=args.benchmark)
    links = {h.name: h.link_gbps for h in configs.fleet.hosts if h.link_gbps}
    found = predict_series(store, cells, links, args.gpus, args.hosts, host=args.host, precision=args.precision)
    rows = [_row(f"{b} on {h} ({p})", pred) for (b, h, p), _, pred in found]
    notes = [f"{b} on {h} ({p}): fitted on {len({x.night for x in pts})} night(s) at "
             f"{', '.join(str(n) for n in sorted({x.total for x in pts}))} GPU(s); " + "; ".join(pred.notes)
             for (b, h, p), pts, pred in found]
    return Listing(COLUMNS, rows, [{"benchmark": b, "host": h, "precision": p, **pred.to_json()}
                                   for (b, h, p), _, pred in found], notes,
                   empty=f"no valid measured cell of {args.benchmark} in the last {LOOKBACK_NIGHTS} nights",
                   exit_code=_refused(pred for _, _, pred in found))


def _from_table(args) -> Listing:
    from scalebench.analysis.prediction import Network, predict
    from scalebench.analysis.scaling_table import points_from_csv

    path = Path(args.from_table)
    try:
        tables, params = points_from_csv(path.read_text(), str(path))
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    if args.table and args.table not in tables:
        raise ConfigError(f"--table {args.table}: not in {path}; its tables: {sorted(tables)}")
    if not args.table and len(tables) > 1:
        raise ConfigError(f"{path} holds {len(tables)} tables: name one with --table (one of {sorted(tables)})")
    name = args.table or next(iter(tables))
    points = tables[name]
    if not any(p.total == 1 for p in points):
        raise ConfigError(f"{path}: table {name}: no row at 1 GPU; the prediction is relative to it")
    inside, across = args.busbw or (None, None)
    net = Network(params[name] * 4 if name in params else None, {1: inside} if inside else {}, args.link_gbps, across,
                  args.link_efficiency)
    got = predict(points, args.gpus, args.hosts, net, table=True)
    return Listing(COLUMNS, [_row(name, got)], got.to_json(), list(got.notes), exit_code=_refused([got]))


def _refused(predictions) -> int:
    """1 when a prediction asked for could not be made (its row says why), else 0."""
    return 1 if any(p.images_per_s is None for p in predictions) else 0


def bus_bandwidths(text: str) -> tuple[float, float | None]:
    """--busbw INSIDE[,ACROSS]: GB/s of an all-reduce on one host, and across hosts where measured."""
    import argparse

    parse = number(0, 100_000, open_low=True)
    parts = text.split(",")
    if len(parts) > 2:
        raise argparse.ArgumentTypeError(f"{text!r}: expected INSIDE or INSIDE,ACROSS (GB/s)")
    return parse(parts[0]), parse(parts[1]) if len(parts) == 2 else None


def _row(series: str, p) -> dict:
    return {"series": series, "target": p.label, "images_per_s": round(p.images_per_s, 1) if p.images_per_s else None,
            "interval": f"{p.low:.1f}-{p.high:.1f}" if p.low is not None else "",
            "relative_time": f"{p.relative_time:.1%}" if p.relative_time else "",
            "efficiency": f"{p.efficiency:.1%}" if p.efficiency else "", "limit": p.limit or p.why_not}


PREDICT = Command("predict", "what more GPUs would give: images/s, time relative to 1 GPU, efficiency, interval and "
                             "the limiting part at --gpus (and --hosts), from a benchmark's stored nights or a CSV "
                             "table of measured points", cmd_predict, (
    arg("benchmark", nargs="?", help="benchmark id (its stored nights on the current image)"),
    arg("--gpus", type=whole(1, 4096), required=True, help="GPUs per host to predict"),
    arg("--hosts", type=whole(1, 512), default=1, help="hosts (default 1; two hosts need the fleet's link_gbps)"),
    arg("--precision", choices=PRECISIONS, help="one precision (default: each measured)"),
    arg("--host", help="one host (default: each the benchmark ran on)"),
    arg("--from-table", metavar="FILE.csv", help="measured points instead of the store: columns gpus, "
                                                 "images_per_s and where known hosts, per_gpu_batch, step_s, "
                                                 "compute_s, data_wait_s, sync_s, params (table, source)"),
    arg("--table", help="with --from-table: which table of the file (its `table` column)"),
    arg("--link-gbps", type=whole(1, 100_000), help="with --from-table: the link between hosts, Gbit/s (assumed)"),
    arg("--link-efficiency", type=number(0, 1, open_low=True), metavar="FRACTION",
        help="with --from-table and --link-gbps: the fraction of line rate a ring across hosts reaches "
             "(default: assumed 0.5 and said; a table's multi-host row is fitted instead)"),
    arg("--busbw", type=bus_bandwidths, metavar="INSIDE[,ACROSS]",
        help="with --from-table: all-reduce bus bandwidth in GB/s (as nccl-tests reports it) on one host, and "
             "across hosts where measured (else --link-gbps is assumed)"),
), listing=True)
