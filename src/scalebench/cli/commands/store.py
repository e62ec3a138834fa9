"""The results store and the files around it: its database (upgrade, backup, restore, summaries),
retention, an attempt's exact container again, and the datasets."""
from __future__ import annotations

from pathlib import Path

from scalebench.cli.arguments import Command, arg, number, url
from scalebench.core.config import PROFILES, ConfigError, Configs


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

    benches = ([configs.benchmark(args.benchmark)] if args.benchmark
               else [configs.benchmark(b) for b in sorted(configs.benchmarks)])
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
        files = fetch(name, root, args.mirror, {n: d.archives for n, d in configs.stacks.datasets.items()})
        missing = kit_datasets.missing_files(root, b.dataset.format)
        out[name] = {"root": str(root), "archives": [f.name for f in files], "format": b.dataset.format,
                     "complete": not missing, "missing_examples": missing[:3]}
    return out


def cmd_prune(args, configs: Configs) -> dict:
    from scalebench.core import paths
    from scalebench.store.prune import held_cells, prune

    days = args.older_than if args.older_than is not None else configs.fleet.retention_days
    try:
        found = prune(paths.results_dir(), paths.airflow_logs_dir(), days, dry_run=args.dry_run, held=held_cells())
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    return found.summary(days, args.dry_run)


def cmd_repro(args, configs: Configs) -> str:
    from scalebench.tools import repro

    try:
        folder = repro.find_attempt(args.target)
        if not args.run:
            return repro.show(folder)
        rc, out = repro.run(folder)
    except repro.ReproError as exc:
        raise ConfigError(str(exc)) from None
    return f"exit code {rc}; results in {out} (not recorded in the store)"


def cmd_db(args, configs: Configs) -> str:
    from scalebench.core import paths
    from scalebench.store import backup
    from scalebench.store.db import shown_url, summaries_outdated, upgrade

    url = paths.store_url()
    if args.action in ("backup", "restore"):
        if not args.file:
            raise ConfigError(f"scalebench db {args.action} needs a FILE")
        try:
            if args.action == "backup":
                return backup.backup(url, args.file, pg_container=args.pg_container)
            return backup.restore(args.file, url, pg_container=args.pg_container)
        except backup.BackupError as exc:
            raise ConfigError(str(exc)) from None
    if args.action == "summarize":
        return _summarize_all(url)
    before, after = upgrade(url)
    where = shown_url(url)
    if before == after:
        return f"results store {where}: already at schema revision {after}"
    done = f"results store {where}: upgraded from {before or 'an empty database'} to schema revision {after}"
    if before is not None and after is not None and summaries_outdated(before, after):  # a new table or figure column
        done += "; " + _summarize_all(url)
    return done


def _summarize_all(url: str) -> str:
    from scalebench.report.summary import summarize_night
    from scalebench.store.results import Store

    store = Store(url)
    nights = store.cell_nights()
    rows = sum(summarize_night(store, bench, night) for bench, night in nights)
    return f"history summaries rebuilt: {rows} rows for {len(nights)} (benchmark, night) pairs"


DATA = Command("data", "check a benchmark's dataset (smoke: make its synthetic data), or --fetch the real ones",
               cmd_data, (
    arg("benchmark", nargs="?", help="benchmark id (with --fetch: default every benchmark's dataset)"),
    arg("--profile", default="smoke", choices=PROFILES),
    arg("--fetch", action="store_true", help="download the real archives (resumable, sha256-checked) and unpack them "
                                             "into the data root"),
    arg("--data-root", help="where datasets live (default: the fleet host's data_root)"),
    arg("--mirror", type=url, help="base URL serving the same archive names (default: the official mirrors; env "
                                   "SCALEBENCH_DATA_MIRROR)"),
))
PRUNE = Command("prune", "remove bulky files older than the retention age (never a result row, an attempt's record "
                         "files or a report)", cmd_prune, (
    arg("--older-than", type=number(1, 36500), metavar="DAYS", help="age in days (default: fleet retention_days)"),
    arg("--dry-run", action="store_true", help="only count what would be removed"),
))
REPRO = Command("repro", "the exact docker run of an attempt (image digest, mounts, env, devices, command); --run runs "
                         "it into a new folder under a device lease", cmd_repro, (
    arg("target", help="an attempt folder, or a cell key (its newest attempt that started a container)"),
    arg("--run", action="store_true", help="run it now (outside the store: nothing is recorded)"),
))
DB = Command("db", "the results database", cmd_db, (
    arg("action", choices=["upgrade", "backup", "restore", "summarize"],
        help="upgrade: create or migrate the schema (idempotent, locked); backup FILE: the whole store to a new file; "
             "restore FILE: a backup into an empty store (SCALEBENCH_STORE_URL); summarize: rebuild the history "
             "pages' night summaries from the stored attempts"),
    arg("file", nargs="?", help="the backup file (backup, restore)"),
    arg("--pg-container", metavar="NAME", help="PostgreSQL: run pg_dump/pg_restore inside this container (e.g. the "
                                               "compose stack's postgres service)"),
))
