"""The DAG bundle `make airflow` and the stack use: the DAG files are marked changed (and so parsed
again by the DAG processor) when their inputs change, and only then."""
import os
import shutil

import pytest

from scalebench.orchestration import dag_bundle
from scalebench.orchestration.dag_bundle import GeneratedDagBundle, fingerprint


@pytest.fixture
def tree(tmp_path):
    configs = tmp_path / "configs"
    (configs / "benchmarks").mkdir(parents=True)
    (configs / "benchmarks" / "a.yaml").write_text("id: a\n")
    (configs / "fleet.yaml").write_text("hosts: []\n")
    dags = tmp_path / "dags"
    dags.mkdir()
    for name in ("scalebench_benchmarks.py", "scalebench_report.py"):
        (dags / name).write_text("# a DAG file\n")
        os.utime(dags / name, (1_000_000, 1_000_000))  # long ago: a touch is plain to see
    return configs, dags


def edits(configs):
    """Each kind of change a user makes to the configs."""
    bench = configs / "benchmarks" / "a.yaml"
    yield "edit", lambda: bench.write_text("id: a\nper_gpu_batch: 64\n")
    yield "add", lambda: (configs / "benchmarks" / "b.yaml").write_text("id: b\n")
    yield "remove", lambda: (configs / "benchmarks" / "b.yaml").unlink()
    older = configs.parent / "older.yaml"
    older.write_text("id: a\nper_gpu_batch: 32\n")
    os.utime(older, (1_000_000, 1_000_000))
    yield "an older file copied in with its time", lambda: shutil.copy2(older, bench)


def test_every_kind_of_config_change_changes_the_fingerprint(tree):
    configs, _ = tree
    before = fingerprint([configs])
    assert fingerprint([configs]) == before  # nothing changed, nothing seen
    for what, change in edits(configs):
        change()
        after = fingerprint([configs])
        assert after != before, what
        before = after


def test_the_dag_files_are_marked_changed_after_an_input_change_and_not_before(tree, monkeypatch):
    configs, dags = tree
    monkeypatch.setattr(dag_bundle, "dag_inputs", lambda: [configs])
    bundle = GeneratedDagBundle(name="dags-folder", path=str(dags), refresh_interval=20)
    times = lambda: {f.name: f.stat().st_mtime for f in dags.glob("*.py")}  # noqa: E731
    bundle.refresh()  # at start-up every file is parsed anyway
    bundle.refresh()
    assert set(times().values()) == {1_000_000}
    def parsed():  # the processor parses them: their times are behind its last parse again
        for f in dags.glob("*.py"):
            os.utime(f, (1_000_000, 1_000_000))

    for what, change in edits(configs):
        parsed()
        change()
        bundle.refresh()
        assert all(t > 1_000_000 for t in times().values()), what
        parsed()  # a parse that began before the change ends after the touch: marked once more
        bundle.refresh()
        assert all(t > 1_000_000 for t in times().values()), what
        parsed()
        bundle.refresh()  # seen, and checked again: not marked any more
        assert set(times().values()) == {1_000_000}, what


def test_the_inputs_are_the_configs_the_fleet_and_the_code_the_dag_files_import(monkeypatch, tmp_path):
    import scalebench
    import scalebench_kit

    monkeypatch.setenv("SCALEBENCH_CONFIG_DIR", str(tmp_path / "configs"))
    monkeypatch.setenv("SCALEBENCH_FLEET", str(tmp_path / "elsewhere" / "fleet.yaml"))
    inputs = dag_bundle.dag_inputs() + dag_bundle.code_inputs()  # each refresh fingerprints both, each once
    assert tmp_path / "configs" in inputs and tmp_path / "elsewhere" / "fleet.yaml" in inputs
    assert os.path.dirname(scalebench.__file__) in map(str, inputs)
    assert os.path.dirname(scalebench_kit.__file__) in map(str, inputs)


def test_a_symlinked_benchmarks_folder_is_followed(tmp_path):
    """benchmarks/ kept elsewhere and linked in: an edit there is seen (a link loop is walked once)."""
    elsewhere = tmp_path / "team" / "benchmarks"
    elsewhere.mkdir(parents=True)
    (elsewhere / "a.yaml").write_text("id: a\n")
    (elsewhere / "loop").symlink_to(elsewhere)
    configs = tmp_path / "configs"
    configs.mkdir()
    (configs / "benchmarks").symlink_to(elsewhere)
    before = fingerprint([configs])
    (elsewhere / "a.yaml").write_text("id: a\nper_gpu_batch: 64\n")
    assert fingerprint([configs]) != before


def test_an_upgrade_of_scalebench_restarts_the_processor_and_a_config_edit_does_not(tree, monkeypatch, tmp_path):
    configs, dags = tree
    code = tmp_path / "site-packages" / "scalebench"
    code.mkdir(parents=True)
    (code / "cells.py").write_text("# 1\n")
    monkeypatch.setattr(dag_bundle, "dag_inputs", lambda: [configs, code])
    monkeypatch.setattr(dag_bundle, "code_inputs", lambda: [code])
    restarts = []
    monkeypatch.setattr(dag_bundle, "restart_processor", restarts.append)
    bundle = GeneratedDagBundle(name="dags-folder", path=str(dags), refresh_interval=20)
    bundle.refresh()
    (configs / "fleet.yaml").write_text("hosts: [] # edited\n")
    bundle.refresh()
    assert restarts == []
    (code / "cells.py").write_text("# 2, upgraded\n")
    bundle.refresh()
    assert restarts == ["scalebench's code changed (an upgrade)"]


def test_the_processor_restarts_in_place_with_its_own_command_line(monkeypatch):
    import sys

    calls = []
    monkeypatch.setattr(sys, "argv", ["/venv/bin/airflow", "dag-processor"])
    monkeypatch.setattr(os, "execv", lambda exe, argv: calls.append((exe, argv)))
    dag_bundle.restart_processor("upgrade")
    assert calls == [(sys.executable, [sys.executable, "/venv/bin/airflow", "dag-processor"])]
