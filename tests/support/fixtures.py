"""Fixtures and hooks: isolated state per test, an upgraded store, PostgreSQL, a probe benchmark, drill rows."""
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.support import CONFIGS
from tests.support.engine import POSTGRES_IMAGE, docker_ready, start_postgres
from tests.support.samples import make_probe

DRILL_ROWS = "SCALEBENCH_DRILL_ROWS"  # `make drills` sets it: each drill appends its row (docs/reliability.md)


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects
def pytest_collection_modifyitems(items):
    for item in items:  # `pytest -m drill` selects every test that fills a drill row
        if "drill" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.drill)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    setattr(item, f"report_{report.when}", report)


def pytest_collection_finish(session):
    """Under `make drills`: the drills selected, so the renderer can tell one that never wrote a row."""
    target = os.environ.get(DRILL_ROWS)
    if target:
        Path(target + ".expected").write_text("".join(f"{i.nodeid}\n" for i in session.items
                                                      if "drill" in getattr(i, "fixturenames", ())))


def _outcome(item) -> str:
    """passed, FAILED, SKIPPED (why) or ERROR (where): what a drill's row says it came to."""
    setup, call = getattr(item, "report_setup", None), getattr(item, "report_call", None)
    for rep in (setup, call):
        if rep is not None and rep.skipped:
            reason = rep.longrepr[2] if isinstance(rep.longrepr, tuple) else str(rep.longrepr)
            return f"SKIPPED ({reason.removeprefix('Skipped: ')})"
    if setup is not None and setup.failed:
        crash = getattr(getattr(setup.longrepr, "reprcrash", None), "message", None) or str(setup.longrepr)
        return f"ERROR before the drill ran ({crash.strip().splitlines()[0][:160]})"
    if call is None:
        return "ERROR (did not run)"
    return "passed" if call.passed else "FAILED"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """Under `make drills`, every drill writes its row, also one that was skipped or errored before
    its body ran (then the row says so, and `make drills` fails)."""
    yield
    target = os.environ.get(DRILL_ROWS)
    if not target or "drill" not in getattr(item, "fixturenames", ()) or getattr(item, "drill_written", False):
        return  # (tests/ and bench/drills/ both load these hooks: one row per drill)
    item.drill_written = True
    import json

    row = getattr(item, "drill_row", None) or {"drill": item.name.removeprefix("test_").replace("_", " "),
                                                "kind": "fault", "done": "", "happened": "", "figure": ""}
    row["outcome"], row["test"] = _outcome(item), item.nodeid
    with open(target, "a") as fh:
        fh.write(json.dumps(row) + "\n")


@pytest.fixture
def drill(request):
    """A fault drill or security check's row: what was done, what happened, the figure. The test
    fills it in and asserts the invariants; under `make drills` the row is kept with its outcome."""
    row = {"drill": request.node.originalname.removeprefix("test_").replace("_", " "), "kind": "fault",
           "done": "", "happened": "", "figure": ""}
    request.node.drill_row = row
    return row


@pytest.fixture(scope="session")
def upgraded_store_file(tmp_path_factory) -> Path:
    """A results database brought to the newest schema once (`scalebench db upgrade`), copied per test."""
    from scalebench.store.db import upgrade

    db = tmp_path_factory.mktemp("store-template") / "results.db"
    upgrade(f"sqlite:///{db}")
    return db


@pytest.fixture(autouse=True)
def isolated_state(tmp_path, monkeypatch, upgraded_store_file):
    """Each test gets its own runtime folder (results, an upgraded store, synthetic data)."""
    home = tmp_path / "state"
    home.mkdir()
    shutil.copy(upgraded_store_file, home / "results.db")
    monkeypatch.setenv("SCALEBENCH_HOME", str(home))
    monkeypatch.delenv("SCALEBENCH_STORE_URL", raising=False)
    monkeypatch.delenv("SCALEBENCH_FLEET", raising=False)
    return home


@pytest.fixture(scope="session")
def postgres_server():
    """A throwaway PostgreSQL (the deployment's image) on a free local port, for the session."""
    if not docker_ready(POSTGRES_IMAGE):
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI needs {POSTGRES_IMAGE} (make test builds it)")
        pytest.skip(f"needs a Docker engine and {POSTGRES_IMAGE} (make test builds it)")
    name = f"scalebench-test-pg-{os.getpid()}"
    try:
        yield name, start_postgres(name)
    finally:
        subprocess.run(["docker", "rm", "-f", name], capture_output=True)


@pytest.fixture
def postgres_database(postgres_server, request):
    """A fresh, empty database on the session's PostgreSQL; its URL."""
    import re

    name, base = postgres_server
    db = "t_" + re.sub(r"[^a-z0-9]+", "_", request.node.name.lower())[:50]
    for sql in (f"DROP DATABASE IF EXISTS {db}", f"CREATE DATABASE {db}"):
        subprocess.run(["docker", "exec", name, "psql", "-U", "postgres", "-c", sql], check=True, capture_output=True)
    return f"{base}/{db}"


@pytest.fixture(params=["sqlite", "postgresql"])
def both_stores(request, tmp_path):
    """A results store at the newest schema on each engine: SQLite (BEGIN IMMEDIATE, a file) and
    PostgreSQL (row locks, a throwaway database); its URL."""
    from scalebench.store.db import upgrade

    url = request.getfixturevalue("postgres_database") if request.param == "postgresql" else \
        f"sqlite:///{tmp_path / 'store.db'}"
    upgrade(url)
    return url


@pytest.fixture
def config_tree(tmp_path):
    """A writable copy of include/configs to break on purpose."""
    dst = tmp_path / "configs"
    shutil.copytree(CONFIGS, dst)
    return dst


@pytest.fixture
def probe(tmp_path, monkeypatch):
    def make(script, **kw):
        op, ctx, cell, tree = make_probe(tmp_path, script, **kw)
        monkeypatch.setenv("SCALEBENCH_CONFIG_DIR", str(tree))
        return op, ctx, cell

    return make
