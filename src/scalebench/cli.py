"""`scalebench` command line: configs, cells, results, compare, report, data, pools, db, prune."""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from scalebench.analysis.compare import CompareError
from scalebench.core.config import PROFILES, ConfigError, Configs
from scalebench.cell.datasets import DatasetError
from scalebench.cell.fetch import FetchError
from scalebench.store.db import StoreNotReady
from scalebench.core.paths import ProjectNotFound


def _gpus(text: str) -> list[int]:
    try:
        return [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"--gpus expects a comma-separated list of integers like 1,2; got {text!r}")


def cmd_configs(args, configs: Configs) -> dict:
    return {"fleet": configs.fleet.model_dump(),
            "benchmarks": {bid: {**b.model_dump(), "resolved": {p: b.resolved(p).summary() for p in PROFILES}}
                           for bid, b in configs.benchmarks.items()}}


def cmd_cells(args, configs: Configs) -> dict:
    from scalebench.core import cells as cellmod

    ids = [args.benchmark] if args.benchmark else sorted(configs.benchmarks)
    plans = {}
    for bid in ids:
        b = configs.benchmark(bid)
        plans[bid] = (b, cellmod.plan(b, configs.fleet, profile=args.profile, run_id=args.run_id, gpu_counts=args.gpus,
                                      repeats=args.repeats, seed=args.seed))
    out = {"cells": [c for _, cs in plans.values() for c in cs]}
    out["estimate"] = cellmod.night_estimate(plans, args.profile, configs.fleet.night_budget_minutes)
    return out


def cmd_results(args, configs: Configs):
    from scalebench.store.results import Store

    cells = Store().cells(benchmark=args.benchmark, run_id=args.run_id)
    if args.json:
        return cells
    return "\n".join(_result_line(c) for c in cells) or "no stored cells"


def _result_line(c: dict) -> str:
    """One cell: its figure when valid; else the last attempt's class, exit code and message."""
    head = f"{c['benchmark']:28} {c['run_id']:40} {c['label']:30} {c['status']:8}"
    if c["figure"]:
        return f"{head} train {c['figure']['train_s']:.2f} s (attempt {c['figure']['attempt']})"
    if not c["attempts"]:
        return f"{head} never started"
    last = c["attempts"][-1]
    code = "none" if last["exit_code"] is None else last["exit_code"]
    return (f"{head} {last['reason']}, exit code {code}, attempt {last['attempt']} of {len(c['attempts'])}\n"
            f"{'':4}{last['message']}")


def cmd_compare(args, configs: Configs):
    from scalebench.analysis.compare import compare, render
    from scalebench.store.results import Store

    cmp = compare(Store(), args.run_a, args.run_b, args.benchmark, args.margin)
    if args.json:
        from dataclasses import asdict

        return asdict(cmp)
    return render(cmp)


def cmd_report(args, configs: Configs) -> str:
    from scalebench.report.nightly import write_report
    from scalebench.store.results import Store

    path = write_report(Store(), args.out, night=args.night)
    return f"report written: {path} (and report.html, table.json and plots beside it; index: {path.parent.parent / 'index.html'})"


def cmd_data(args, configs: Configs) -> dict:
    from scalebench.core.cells import host_for
    from scalebench.cell.datasets import prepare

    if args.fetch:
        return fetch_data(args, configs)
    if not args.benchmark:
        raise ConfigError("scalebench data: name a benchmark to check (or use --fetch to download datasets)")
    b = configs.benchmark(args.benchmark)
    return prepare(b, args.profile, host_for(b, args.profile, configs.fleet, b.gpu_counts))


def fetch_data(args, configs: Configs) -> dict:
    """Download the real datasets of one benchmark (or of every benchmark) into the data root."""
    from scalebench_kit import datasets as kit_datasets

    from scalebench.cell.fetch import fetch

    benches = [configs.benchmark(args.benchmark)] if args.benchmark else [configs.benchmark(b) for b in sorted(configs.benchmarks)]
    roots = {h.data_root for h in configs.fleet.hosts if h.data_root}
    data_root = args.data_root or (roots.pop() if len(roots) == 1 else None)
    if not data_root:
        raise ConfigError("scalebench data --fetch: no data root; give --data-root PATH or set data_root on the "
                          f"host in the fleet config (hosts with one: {sorted(roots) or 'none'})")
    out = {}
    for b in benches:
        name, root = b.dataset.name, Path(data_root) / b.dataset.path
        if name in out:
            continue
        files = fetch(name, root, args.mirror)
        missing = kit_datasets.missing_files(root, b.dataset.format)
        out[name] = {"root": str(root), "archives": [f.name for f in files], "format": b.dataset.format,
                     "complete": not missing, "missing_examples": missing[:3]}
    return out


def cmd_pools(args, configs: Configs) -> dict:
    """One Airflow pool per host, sized to its devices (pool_slots of a cell = its GPU count)."""
    wanted = {h.pool: len(h.device_ids) for h in configs.fleet.hosts}
    if args.apply:
        from airflow.models.pool import Pool

        for h in configs.fleet.hosts:
            Pool.create_or_update_pool(h.pool, len(h.device_ids), f"scalebench host {h.name} ({h.kind})", False)
    return {"pools": wanted, "applied": bool(args.apply)}


def cmd_prune(args, configs: Configs) -> dict:
    from scalebench.core import paths
    from scalebench.store.prune import prune

    days = args.older_than if args.older_than is not None else configs.fleet.retention_days
    try:
        found = prune(paths.results_dir(), paths.airflow_logs_dir(), days, dry_run=args.dry_run)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    return found.summary(days, args.dry_run)


def cmd_db(args, configs: Configs) -> str:
    from scalebench.core import paths
    from scalebench.store.db import upgrade

    url = paths.store_url()
    before, after = upgrade(url)
    where = url.split("@")[-1]
    if before == after:
        return f"results store {where}: already at schema revision {after}"
    return f"results store {where}: upgraded from {before or 'an empty database'} to schema revision {after}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="scalebench", description=__doc__)
    parser.add_argument("--fleet", help="fleet YAML (default include/configs/fleet.yaml or $SCALEBENCH_FLEET)")
    sub = parser.add_subparsers(dest="cmd", required=True)
    sub.add_parser("configs", help="validate and print the resolved configs as JSON")
    p = sub.add_parser("cells", help="the cell matrix as JSON, with the night-time estimate")
    p.add_argument("benchmark", nargs="?", help="benchmark id (default: all)")
    p.add_argument("--profile", default="smoke", choices=PROFILES)
    p.add_argument("--gpus", type=_gpus, help="GPU counts, e.g. 1,2 (default: the config's)")
    p.add_argument("--repeats", type=int, default=1)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--run-id", default="preview")
    p = sub.add_parser("results", help="stored cells")
    p.add_argument("--benchmark")
    p.add_argument("--run-id")
    p.add_argument("--json", action="store_true")
    p = sub.add_parser("compare", help="a candidate run B against run A per cell: time ratio with its CI, "
                                       "throughput, accuracy equivalence (e.g. a new image tag)")
    p.add_argument("run_a")
    p.add_argument("run_b")
    p.add_argument("--benchmark", help="needed when a run id belongs to several benchmarks' DAGs")
    p.add_argument("--margin", type=float, default=0.01, help="accuracy equivalence margin (default 0.01)")
    p.add_argument("--json", action="store_true")
    p = sub.add_parser("report", help="write the report (Markdown, HTML, plot)")
    p.add_argument("--out", help="output folder (default .state/reports/<night>)")
    p.add_argument("--night", help="night label, YYYY-MM-DD (default today, UTC)")
    p = sub.add_parser("data", help="check a benchmark's dataset (smoke: make its synthetic data), or --fetch the "
                                    "real ones")
    p.add_argument("benchmark", nargs="?", help="benchmark id (with --fetch: default every benchmark's dataset)")
    p.add_argument("--profile", default="smoke", choices=PROFILES)
    p.add_argument("--fetch", action="store_true", help="download the real archives (resumable, sha256-checked) "
                                                        "and unpack them into the data root")
    p.add_argument("--data-root", help="where datasets live (default: the fleet host's data_root)")
    p.add_argument("--mirror", help="base URL serving the same archive names (default: the official mirrors; "
                                    "env SCALEBENCH_DATA_MIRROR)")
    p = sub.add_parser("pools", help="the Airflow pools of the fleet (one per host)")
    p.add_argument("--apply", action="store_true", help="create or update them in the Airflow metadata DB")
    p = sub.add_parser("prune", help="remove bulky files older than the retention age (never a result row, "
                                     "an attempt's record files or a report)")
    p.add_argument("--older-than", type=float, metavar="DAYS", help="age in days (default: fleet retention_days)")
    p.add_argument("--dry-run", action="store_true", help="only count what would be removed")
    p = sub.add_parser("db", help="the results database")
    p.add_argument("action", choices=["upgrade"], help="upgrade: create or migrate the schema (idempotent, locked)")
    args = parser.parse_args(argv)
    try:
        configs = Configs(fleet_path=args.fleet)
        result = {"configs": cmd_configs, "cells": cmd_cells, "results": cmd_results, "compare": cmd_compare, "report": cmd_report,
                  "data": cmd_data, "pools": cmd_pools, "db": cmd_db, "prune": cmd_prune}[args.cmd](args, configs)
    except (ConfigError, DatasetError, FetchError, StoreNotReady, ProjectNotFound, CompareError) as exc:
        print(f"scalebench: {exc}", file=sys.stderr)
        return 2
    print(result if isinstance(result, str) else json.dumps(result, indent=2, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
