"""Report time for a large results store (a benchmark script, not a timed test).

    .venv/bin/python bench/report_scale.py [--cells 10000,100000,1000000] [--store postgresql]

For each size, fills a throw-away SQLite store with scheduled nights of six benchmarks (4 GPU
counts x 2 epoch counts x 3 repeats = 144 cells a night; 1,000,000 cells is nineteen years of
such nights, or a year of a ten-host fleet), then times the whole report of the last night
(read, statistics, regression judgement of every series, GX table checks, plots,
Markdown/HTML/JSON and the index of nights) and the UI's pages served from it (the plugin's
app, in process, login dependency satisfied): the report files, a benchmark's history page and
its CSV (read from the night summaries: the last 30 nights summarized as a record step does,
timed, and the earlier ones copies of them), a night's cells and the comparison of the last two
nights. The imports a report task pays once (GX, matplotlib) are timed first and apart, so the
in-process report times compare like with like across sizes; the same night is then published
again by a new process, as an Airflow task does it (its GX checks in their own process beside
it), --fresh-runs times (3) one after the other, the goal judged on the slowest. The store is
filled in batches of BATCH cells, a transaction each (the bench's memory stays bounded), and
written to disk before anything is timed (settle); the smallest size explains every query of
the report and the pages (none may scan a table that grows with the nights). Goals: the report
< 5 s in a fresh task, each page < 1 s (the every-night history and its CSV: first bytes < 1 s,
the whole < 5 s, the page's whole counting the older nights history.js fetches after it), the
bench's memory < 1 GB, the report's time from 1M to 10M cells at most 1.5x.
"""
from __future__ import annotations

import argparse
import datetime as dt
import random
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests.support

from sqlalchemy import insert  # noqa: E402

from scalebench.core.cells import cell_key, cell_label  # noqa: E402
from scalebench.report.model import Options# noqa: E402
from scalebench.store.db import upgrade  # noqa: E402
from scalebench.store.results import AttemptRow, BenchmarkRunRow, CellRow, Store  # noqa: E402

BENCHES = ["resnet50_keras_cifar10", "unet_torch_voc2007", "frcnn_tf_voc2007", "frcnn_mmdet_voc2007",
           "maskrcnn_mmdet_voc2012", "msrcnn_mmdet_voc2012"]
REL = {1: 1.0, 2: 0.66, 3: 0.56, 4: 0.51}


BATCH = 20000  # cells generated, inserted and committed at a time: the bench's memory stays bounded at any size


def night_rows(night: str, b: str, rng: random.Random, cid: int, now: dt.datetime) -> tuple[list[dict], list[dict]]:
    """One benchmark's scheduled night: 4 GPU counts x 2 epoch counts x 3 repeats, cells from id cid + 1."""
    cells, attempts = [], []
    run_id = f"scheduled__{night}T01:00:00+00:00"
    for g in (1, 2, 3, 4):
        for e in (1, 2):
            for r in (1, 2, 3):
                cid += 1
                ident = {"dag_id": f"scalebench_{b}", "run_id": run_id, "benchmark": b, "host": "gpu-node-1",
                         "gpus": g, "epochs": e, "repeat": r, "profile": "nightly", "precision": "bf16"}
                cells.append({**ident, "id": cid, "key": cell_key(ident), "run_type": "scheduled", "seed": r,
                              "scaling_mode": "weak", "per_device_batch": 16, "global_batch": 16 * g,
                              "label": cell_label(g, e, r, precision="bf16"), "night": night, "created_at": now})
                t = 100 * e * REL[g] * (1 + rng.gauss(0, 0.02))
                attempts.append({"cell_id": cid, "attempt": 1, "status": "valid", "train_s": t,
                                 "images_per_s": 1600 * e * g / t, "metrics": {"precision": 0.8 + rng.gauss(0, 0.005),
                                                                               "recall": 0.7 + rng.gauss(0, 0.005)},
                                 "image_digest": "sha256:img", "config_sha": f"cfg-{b}", "recorded_at": now,
                                 "timing": {"setup_s": 30.0, "warmup_s": 5.0, "train_s": t, "eval_s": 8.0}})
    return cells, attempts


def fill(store: Store, n_cells: int, seed: int = 0) -> str:
    """Scheduled nights up to 2026-11-28, generated and committed in batches of about BATCH cells
    (a transaction per batch: the write-ahead log and the memory stay small); returns the last night."""
    rng = random.Random(seed)
    per_night = len(BENCHES) * 4 * 2 * 3
    nights = -(-n_cells // per_night)
    start = dt.date(2026, 11, 28) - dt.timedelta(days=nights - 1)
    now = dt.datetime.now(dt.timezone.utc)
    cells: list[dict] = []
    attempts: list[dict] = []
    runs: list[dict] = []
    cid = 0

    def flush() -> None:
        with store.engine.begin() as conn:
            conn.execute(insert(CellRow.__table__), cells)
            conn.execute(insert(AttemptRow.__table__), attempts)
            conn.execute(insert(BenchmarkRunRow.__table__), runs)
        cells.clear(), attempts.clear(), runs.clear()

    for i in range(nights):
        night = (start + dt.timedelta(days=i)).isoformat()
        for b in BENCHES:
            c, a = night_rows(night, b, rng, cid, now)
            cid += len(c)
            cells += c
            attempts += a
            runs.append({"dag_id": f"scalebench_{b}", "run_id": f"scheduled__{night}T01:00:00+00:00", "benchmark": b,
                         "run_type": "scheduled", "night": night, "counts": {}, "recorded_at": now})
        if len(cells) >= BATCH:
            flush()
    if cells:
        flush()
    return (start + dt.timedelta(days=nights - 1)).isoformat()


def summaries(store: Store, recorded: int = 30) -> tuple[int, float]:
    """The night summaries the record steps would have written: the last `recorded` nights of each
    benchmark really summarized (timed: what one record step adds), every earlier night a copy of
    those rows under its own date (the pages read rows; how they were made does not change that)."""
    from scalebench.report.summary import summarize_night
    from tests.support.samples import copy_summaries, summary_rows

    pairs = store.cell_nights()
    last = sorted({n for _, n in pairs})[-recorded:]
    t = time.perf_counter()
    for bench, n in pairs:
        if n in last:
            summarize_night(store, bench, n)
    per_night = (time.perf_counter() - t) / sum(n in last for _, n in pairs)
    model = [r for bench in BENCHES for r in summary_rows(store, bench, last[-1])]
    copy_summaries(store, model, sorted({n for _, n in pairs} - set(last)), batch=BATCH)
    return len(pairs), per_night


EVERY_NIGHT = ("history page, every night", "history csv")  # these read a benchmark's every night, by design


def page_seconds(reports: Path, night: str, queries: list | None = None) -> dict[str, tuple[float, float]]:
    """The UI pages a user opens, timed through the plugin's FastAPI app (what the api-server mounts):
    (seconds to the first bytes, seconds to the last) each; `queries`: the store's queries of the
    pages that show a window (not EVERY_NIGHT's) are added to it."""
    from scalebench.orchestration.ui import shared
    from tests.support.query_plans import recorded

    from fastapi.testclient import TestClient

    from scalebench.orchestration.ui.webapp import create_app

    app = create_app()
    for route in app.routes:  # the login is Airflow's JWT check, not what is measured here
        for dep in getattr(getattr(route, "dependant", None), "dependencies", []):
            app.dependency_overrides[dep.call] = lambda: None
    client = TestClient(app)
    out = {}
    for name, path in (("index of nights", "/"), ("nights json", "/api/nights"), ("report page", f"/{night}/report.html"),
                       ("table json", f"/{night}/table.json"), ("history page", f"/benchmarks/{BENCHES[0]}"),
                       ("history page, every night", f"/benchmarks/{BENCHES[0]}?all=1"),
                       ("history csv", f"/api/benchmarks/{BENCHES[0]}/history.csv"), ("night page", f"/nights/{night}"),
                       ("compare page", "/compare"), ("benchmarks page", "/benchmarks")):
        with recorded(shared.store().engine) as seen:
            t = time.perf_counter()
            with client.stream("GET", path) as r:
                chunks = r.iter_bytes()
                body = [next(chunks, b"")]
                first = time.perf_counter() - t
                body += list(chunks)
            if name == "history page, every night":  # and the older nights history.js fetches, page by page
                more = _older(b"".join(body))
                while more:
                    more = client.get(more.removeprefix("/scalebench")).json()["next"]
            out[name] = (first, time.perf_counter() - t)
        if queries is not None and name not in EVERY_NIGHT:
            queries += seen
        assert r.status_code == 200, (path, r.status_code)
    return out


def _older(html: bytes) -> str | None:
    """The address of the older nights a history page hands history.js (None: it carries them all)."""
    import json
    import re

    return json.loads(re.search(rb'id="history-data">(.*?)</script>', html, re.S).group(1))["more"]


def fresh_report(home: str, url: str, night: str) -> float:
    """The night's report published again by a new Python process, as an Airflow task runs it:
    its imports, its Great Expectations process (report.checker) and all, timed end to end. It
    leaves as a task's process does: Airflow's supervisor forks it and it ends through os._exit,
    without the interpreter's teardown of its modules."""
    import os
    import subprocess

    code = ("from scalebench.report.build import publish; from scalebench.report.model import Options; "
            "from scalebench.store.results import Store; "
            f"publish(Store({url!r}), {night!r}, Options(expected={BENCHES!r})); "
            "import os, sys; sys.stdout.flush(); sys.stderr.flush(); os._exit(0)")
    src = str(Path(__file__).resolve().parents[1] / "src")
    env = {**os.environ, "SCALEBENCH_HOME": home, "PYTHONPATH": os.pathsep.join([src, os.environ.get("PYTHONPATH", "")])}
    t = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], env=env, check=True)
    return time.perf_counter() - t


def settle(store: Store) -> float:
    """The filled store written to disk before anything is timed (SQLite's write-ahead log folded
    into the file, the kernel's dirty pages flushed): a nightly report reads a store that grew
    over years, not gigabytes written the minute before, whose writeback would hold the report's
    own commits. Returns the seconds it took."""
    import os

    t = time.perf_counter()
    if store.engine.dialect.name == "sqlite":
        with store.engine.connect() as conn:
            conn.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")
    os.sync()
    return time.perf_counter() - t


def database(cells: int, server: str | None, tmp: str) -> str:
    """The store's URL for one size: a SQLite file in `tmp`, or a new database on the PostgreSQL
    `server` (a URL without a database)."""
    if server is None:
        return f"sqlite:///{tmp}/results.db"
    from sqlalchemy import create_engine, text

    admin = create_engine(f"{server}/postgres", isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f"DROP DATABASE IF EXISTS bench_{cells}"))
        conn.execute(text(f"CREATE DATABASE bench_{cells}"))
    admin.dispose()
    return f"{server}/bench_{cells}"


def measure(cells: int, plans: bool = False, server: str | None = None, fresh_runs: int = 1) -> dict:
    """One size: fill, summaries, the night's report (publish), the pages; `plans`: each query of
    the report and the pages explained (tests/support/query_plans.py, SQLite's planner); `server`:
    a PostgreSQL server's URL to hold the store instead of a SQLite file; `fresh_runs`: fresh
    publishes timed, one after the other."""
    import json
    import os
    import resource

    from scalebench.core import paths
    from scalebench.report.build import publish
    from scalebench_kit.names import REPORT_TABLE
    from tests.support.query_plans import recorded, whole_table_scans

    with tempfile.TemporaryDirectory() as tmp:
        os.environ["SCALEBENCH_HOME"] = tmp  # publish() writes reports/<night>/ and the index of nights there
        url = os.environ["SCALEBENCH_STORE_URL"] = database(cells, server, tmp)  # the pages' store too
        upgrade(url)
        store = Store(url)
        t = time.perf_counter()
        night = fill(store, cells)
        fill_s = time.perf_counter() - t
        pairs, summarize_s = summaries(store)
        first = dt.date.fromisoformat(night) - dt.timedelta(days=-(-cells // 144) - 1)
        for k in range(-(-cells // 144) - 1):  # every earlier night's report is kept: the index lists them all
            d = paths.reports_dir() / (first + dt.timedelta(days=k + 1)).isoformat()
            d.mkdir(parents=True)
            (d / REPORT_TABLE).write_text(json.dumps({"complete": True, "alerts": [], "rows": [{}] * len(BENCHES)}))
        publish(store, (dt.date.fromisoformat(night) - dt.timedelta(days=1)).isoformat(), Options(expected=BENCHES))
        settle_s = settle(store)
        with recorded(store.engine) as queries:  # (the night before wrote the index, as each night does)
            t = time.perf_counter()
            _, path = publish(store, night, Options(expected=BENCHES))
            report_s = time.perf_counter() - t
        complete = "Complete:" in path.read_text()
        fresh_s = [fresh_report(tmp, url, night) for _ in range(fresh_runs)]
        from scalebench.orchestration.ui import shared

        shared._store.cache_clear()  # the routes' store: this size's file
        page_queries: list = []
        pages = page_seconds(paths.reports_dir(), night, page_queries)
        scans = whole_table_scans(store.engine, queries + page_queries) if plans else None
        shared._store.cache_clear()
        store.engine.dispose()
    return {"cells": cells, "nights": -(-cells // 144), "fill_s": fill_s, "settle_s": settle_s, "report_s": report_s,
            "fresh_s": fresh_s,
            "complete": complete,
            "pages": pages, "summarize_s": summarize_s, "summaries": pairs, "scans": scans,
            "queries": len(queries) + len(page_queries),
            "max_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cells", default="10000,100000,1000000")
    ap.add_argument("--store", choices=("sqlite", "postgresql"), default="sqlite",
                    help="postgresql: each size in its own database on a PostgreSQL container of the deployment's "
                         "image (scalebench/postgres:15, Docker needed), as the distributed deployment keeps it")
    ap.add_argument("--fresh-runs", type=int, default=3,
                    help="fresh publishes timed per size (the goal is judged on the slowest: the machine's speed varies)")
    args = ap.parse_args()
    server = None
    if args.store == "postgresql":
        import atexit
        import os
        import subprocess

        from tests.support.engine import start_postgres

        name = f"scalebench-report-scale-{os.getpid()}"
        server = start_postgres(name)
        atexit.register(subprocess.run, ["docker", "rm", "-f", name], capture_output=True)
        print(f"store: PostgreSQL ({name}), a database per size", flush=True)
    t = time.perf_counter()  # what every report task pays first, whatever the store's size
    import great_expectations  # noqa: F401
    import matplotlib.pyplot  # noqa: F401
    import_s = time.perf_counter() - t
    print(f"imports a report task pays once (Great Expectations, matplotlib): {import_s:.2f} s", flush=True)
    rows = []
    for i, n in enumerate(int(x) for x in args.cells.split(",")):
        r = measure(n, plans=i == 0 and server is None, server=server, fresh_runs=args.fresh_runs)
        rows.append(r)
        if r["scans"] is not None:
            print(f"query plans at {n} cells ({r['queries']} queries of the report and the pages of a window; "
                  f"{' and '.join(EVERY_NIGHT)} read every night by design): "
                  + ("no query scans a table that grows with the nights" if not r["scans"] else
                     f"{len(r['scans'])} scan a growing table: " + "; ".join(r["scans"])), flush=True)
        slowest = max(r["pages"], key=lambda k: r["pages"][k][1])
        print(f"{n:>9} cells ({r['nights']} nights): fill {r['fill_s']:.0f} s, written to disk in {r['settle_s']:.0f} s; "
              f"{r['summaries']} benchmark nights "
              f"summarized, {1000 * r['summarize_s']:.0f} ms each; report {r['report_s']:.2f} s "
              f"({'complete' if r['complete'] else 'partial'}), in a fresh process "
              f"{', '.join(f'{x:.2f}' for x in r['fresh_s'])} s; "
              f"slowest page {slowest} {r['pages'][slowest][1] * 1000:.0f} ms; "
              f"pages (first bytes / whole, ms): "
              + ", ".join(f"{k} {a * 1000:.0f}/{b * 1000:.0f}" for k, (a, b) in r["pages"].items())
              + f"; peak memory of this process so far {r['max_rss_mb']:.0f} MB", flush=True)
    for a, b in zip(rows, rows[1:]):
        print(f"growth {a['cells']} -> {b['cells']} cells (x{b['cells'] / a['cells']:.0f}): report "
              f"x{b['report_s'] / a['report_s']:.2f}, fill x{b['fill_s'] / a['fill_s']:.1f}; pages: "
              + ", ".join(f"{k} x{b['pages'][k][1] / a['pages'][k][1]:.1f}" for k in a["pages"]))
    last = rows[-1]
    total = max(last["fresh_s"])  # the slowest of the runs: the machine's speed varies from one to the next
    every = last["pages"]["history page, every night"]
    csv = last["pages"]["history csv"]
    others = max(v[1] for k, v in last["pages"].items() if k not in EVERY_NIGHT)
    growth = last["report_s"] / rows[-2]["report_s"] if len(rows) > 1 else None
    print(f"goals at {last['cells']} cells: report < 5 s in a fresh task (a new process, imports included, "
          f"the slowest of {len(last['fresh_s'])}): {'met' if total < 5 else 'NOT met'} ({total:.2f} s); "
          f"each page < 1 s: {'met' if others < 1 else 'NOT met'} "
          f"({others * 1000:.0f} ms); the every-night history's first bytes < 1 s: "
          f"{'met' if every[0] < 1 else 'NOT met'} ({every[0] * 1000:.0f} ms), whole < 5 s: "
          f"{'met' if every[1] < 5 else 'NOT met'} ({every[1] * 1000:.0f} ms); its CSV the same: "
          f"{'met' if csv[0] < 1 and csv[1] < 5 else 'NOT met'} ({csv[0] * 1000:.0f} / {csv[1] * 1000:.0f} ms); "
          f"memory < 1 GB: "
          f"{'met' if last['max_rss_mb'] < 1024 else 'NOT met'} ({last['max_rss_mb']:.0f} MB)"
          + (f"; report growth from the size before <= 1.5x: {'met' if growth <= 1.5 else 'NOT met'} (x{growth:.2f})"
             if growth else ""))


if __name__ == "__main__":
    main()
