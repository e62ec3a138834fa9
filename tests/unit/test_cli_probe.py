"""The command line under hostile input, as data: each row runs `scalebench` (in process) on its
own copy of the configs and its own home, and asserts that it ends in one `scalebench: ...`
line naming the parameter, file or field (never a traceback), with exit status 2, and that the
results store is byte for byte what it was. A new subcommand or config rule adds rows, not code."""
import hashlib
import os
import shutil
import sqlite3

import pytest
import yaml

from scalebench import cli
from scalebench.cli.commands.configs import STACKS
from tests.support import CONFIGS

BENCH = "unet_torch_voc2007"

# (id, argv, setup, what the line must name). setup: None, a store state ("garbage store",
# "foreign store", "no driver", "bad url"), or a config edit (file, dotted field, value | ("text", bytes)).
CASES = [
    # arguments, checked by the parser's types
    ("history nights huge", ["history", BENCH, "--nights", "99999999"], None, "--nights"),
    ("history nights zero", ["history", BENCH, "--nights", "0"], None, "--nights"),
    ("history nights word", ["history", BENCH, "--nights", "many"], None, "--nights"),
    ("history gpus zero", ["history", BENCH, "--gpus", "0"], None, "--gpus"),
    ("report bad night", ["report", "--night", "2026-13-45"], None, "--night"),
    ("report night text", ["report", "--night", "yesterday"], None, "--night"),
    ("results bad night", ["results", "--night", "2026-02-30"], None, "--night"),
    ("results bad since", ["results", "--since", "tomorrow"], None, "--since"),
    ("prune nan", ["prune", "--older-than", "nan", "--dry-run"], None, "--older-than"),
    ("prune negative", ["prune", "--older-than", "-1", "--dry-run"], None, "--older-than"),
    ("prune inf", ["prune", "--older-than", "inf"], None, "--older-than"),
    ("plan negative repeats", ["plan", "--repeats", "-2"], None, "--repeats"),
    ("plan zero repeats", ["plan", "--repeats", "0"], None, "--repeats"),
    ("plan bad profile", ["plan", "--profile", "weekly"], None, "--profile"),
    ("cells zero repeats", ["cells", BENCH, "--repeats", "0"], None, "--repeats"),
    ("cells negative seed", ["cells", BENCH, "--seed", "-1"], None, "--seed"),
    ("cells gpus words", ["cells", BENCH, "--gpus", "one,two"], None, "--gpus"),
    ("cells bad output", ["cells", BENCH, "-o", "xml"], None, "-o"),
    ("compare margin zero", ["compare", "a", "b", "--margin", "0"], None, "--margin"),
    ("compare margin nan", ["compare", "a", "b", "--margin", "nan"], None, "--margin"),
    ("compare bad nights", ["compare", "--nights", "2026-01-01", "soon"], None, "--nights"),
    ("bisect zero gpus", ["bisect", BENCH, "--gpus", "0", "--good", "a", "--bad", "b"], None, "--gpus"),
    ("bisect four pairs", ["bisect", BENCH, "--gpus", "1", "--good", "a", "--bad", "b", "--pairs", "4"], None, "--pairs"),
    ("bisect no good", ["bisect", BENCH, "--gpus", "1", "--bad", "b"], None, "--good"),
    ("rehearse scale inf", ["rehearse", "--scale", "inf"], None, "--scale"),
    ("rehearse scale zero", ["rehearse", "--scale", "0"], None, "--scale"),
    ("rehearse tolerance two", ["rehearse", "--tolerance", "2"], None, "--tolerance"),
    ("rehearse repeats zero", ["rehearse", "--repeats", "0"], None, "--repeats"),
    ("db bad action", ["db", "drop"], None, "action"),
    ("unknown command", ["frobnicate"], None, "invalid choice"),
    ("unknown option", ["configs", "--frobnicate"], None, "--frobnicate"),
    ("fleet is a folder", ["--fleet", "/tmp", "configs"], None, "/tmp: is a folder"),
    ("fleet missing", ["--fleet", "/nonexistent/fleet.yaml", "configs"], None, "/nonexistent/fleet.yaml"),
    ("unknown benchmark", ["cells", "no_such_benchmark"], None, "no_such_benchmark"),
    ("empty fleet option", ["--fleet", "", "configs"], None, "--fleet: expected a value, got an empty one"),
    ("empty benchmark", ["cells", " "], None, "benchmark: expected a value"),
    ("empty owner", ["alerts", "set", "1", "triaged", "--owner", ""], None, "--owner: expected a value"),
    ("predict no target", ["predict", "--gpus", "8"], None, "name a BENCHMARK"),
    ("predict zero gpus", ["predict", BENCH, "--gpus", "0"], None, "--gpus"),
    ("predict unknown benchmark", ["predict", "no_such_benchmark", "--gpus", "8"], None, "no_such_benchmark"),
    ("predict missing table", ["predict", "--from-table", "{tmp}/none.csv", "--gpus", "8"], None, "none.csv"),
    ("predict bad precision", ["predict", BENCH, "--gpus", "8", "--precision", "fp64"], None, "--precision"),
    # the results store
    ("garbage store: results", ["results"], "garbage store", "not a SQLite database"),
    ("garbage store: history", ["history", BENCH], "garbage store", "not a SQLite database"),
    ("garbage store: prune", ["prune", "--dry-run"], "garbage store", "not a SQLite database"),
    ("garbage store: upgrade", ["db", "upgrade"], "garbage store", "not a SQLite database"),
    ("foreign store: results", ["results"], "foreign store", "db upgrade"),
    ("no driver", ["results"], "no driver", "pip install"),
    ("bad store url", ["results"], "bad url", "not a database URL"),
    ("a store that keeps nothing", ["results"], "memory store", "an in-memory SQLite database keeps nothing"),
    ("a store in memory", ["db", "upgrade"], "memory file store", "an in-memory SQLite database keeps nothing"),
    # db restore never replaces a store, and refuses what is not a scalebench store before touching anything
    ("restore garbage", ["db", "restore", "{backup}"], "garbage backup", "not a SQLite database"),
    ("restore a foreign sqlite", ["db", "restore", "{backup}"], "foreign backup", "not a scalebench store"),
    ("restore a newer store", ["db", "restore", "{backup}"], "newer backup", "newer than this scalebench"),
    ("restore over a store", ["db", "restore", "{backup}"], "store and backup", "never over a store"),
    ("restore a folder", ["db", "restore", "{home}"], None, "no such backup file"),
    ("restore nothing", ["db", "restore"], None, "needs a FILE"),
    ("backup nothing", ["db", "backup"], None, "needs a FILE"),
    # config files, refused when they load (named by file and field)
    ("per_gpu_batch yes", ["configs"], ("benchmarks/unet_torch_voc2007.yaml", "per_gpu_batch", True), "per_gpu_batch"),
    ("warmup_steps true", ["configs"], ("benchmarks/unet_torch_voc2007.yaml", "warmup_steps", True), "warmup_steps"),
    ("retries no", ["configs"], ("benchmarks/unet_torch_voc2007.yaml", "retries", False), "retries"),
    ("bad cron", ["configs"], ("benchmarks/unet_torch_voc2007.yaml", "schedule", "every night"), "cron"),
    ("cron six fields", ["configs"], ("benchmarks/unet_torch_voc2007.yaml", "schedule", "0 0 1 * * *"), "cron"),
    ("cron out of range", ["configs"], ("benchmarks/unet_torch_voc2007.yaml", "schedule", "61 25 * * *"), "cron"),
    ("id of the report", ["configs"], ("benchmarks", "copy as", "nightly_report"), "the nightly report DAG"),
    ("id of the bisect", ["configs"], ("benchmarks", "copy as", "bisect"), "the bisect DAG"),
    ("id of the host probe", ["configs"], ("benchmarks", "copy as", "host_probe"), "the host probe DAG"),
    ("id with the accuracy suffix", ["configs"], ("benchmarks", "copy as", "unet_torch_voc2007_accuracy"), "_accuracy"),
    ("id too long", ["configs"], ("benchmarks", "copy as", "u" * 245), "the store's column cells.benchmark holds 100"),
    ("id of the all-reduce DAG", ["configs"], ("benchmarks", "copy as", "allreduce"), "the all-reduce DAG's"),
    ("id not the file name", ["configs"], ("benchmarks/unet_torch_voc2007.yaml", "id", "resnet50_keras_cifar10"),
     "must equal the file name"),
    ("not utf-8", ["configs"], ("benchmarks/unet_torch_voc2007.yaml", "text", b"id: caf\xe9\n"), "not UTF-8"),
    ("not yaml", ["configs"], ("benchmarks/unet_torch_voc2007.yaml", "text", b"id: unet: [\n"), "not valid YAML"),
    ("a list, not a mapping", ["configs"], ("benchmarks/unet_torch_voc2007.yaml", "text", b"- a\n- b\n"), "mapping"),
    ("topology of stray devices", ["configs"], ("fleet.yaml", "hosts.0.topology", {"7": {"9": "NV12"}}), "topology"),
    ("topology one-sided", ["configs"], ("fleet.yaml", "hosts.0.topology", {"0": {"1": "NV12"}, "1": {"0": "SYS"}}),
     "topology"),
    ("empty queue", ["configs"], ("fleet.yaml", "hosts.0.queue", " "), "queue"),
    ("two gpu hosts one queue", ["configs"], ("fleet.yaml", "two gpu hosts", "q"), "share the queue"),
    ("fleet device ids twice", ["configs"], ("fleet.yaml", "hosts.0.device_ids", ["0", "0"]), "device ids"),
    ("bounds of an unknown metric", ["configs"], ("benchmarks/unet_torch_voc2007.yaml", "bounds", {"iuo": [0, 1]}), "iuo"),
    ("bounds upside down", ["configs"], ("benchmarks/unet_torch_voc2007.yaml", "bounds", {"iou": [1, 0]}), "iou"),
    ("a .yml benchmark file", ["configs"], ("benchmarks", "copy as", "extra.yml"), "rename it to"),
    ("negative warm-up", ["configs"], ("benchmarks/unet_torch_voc2007.yaml", "warmup_steps", -1), "warmup_steps"),
    ("zero GPUs", ["configs"], ("benchmarks/unet_torch_voc2007.yaml", "gpu_counts", [0]), "gpu_counts"),
    ("schedule repeats eleven", ["configs"], ("benchmarks/unet_torch_voc2007.yaml", "schedule_repeats", 11),
     "schedule_repeats"),
    ("an unknown field", ["configs"], ("benchmarks/unet_torch_voc2007.yaml", "per_gpu_batchh", 4), "per_gpu_batchh"),
    ("stacks not yaml", ["configs"], ("stacks.yaml", "text", b"stacks: [\n"), "stacks.yaml"),
    ("fleet not utf-8", ["configs"], ("fleet.yaml", "text", b"hosts: caf\xe9\n"), "not UTF-8"),
    ("per_gpu_batch zero", ["configs"], ("benchmarks/unet_torch_voc2007.yaml", "per_gpu_batch", 0), "per_gpu_batch"),
    ("gpu_counts repeated", ["configs"], ("benchmarks/unet_torch_voc2007.yaml", "gpu_counts", [1, 1]), "gpu_counts"),
    ("gpu_counts beyond every host", ["configs"], ("benchmarks/unet_torch_voc2007.yaml", "gpu_counts", [1, 64]), "gpu_counts"),
    ("confirm_reruns eleven", ["configs"], ("benchmarks/unet_torch_voc2007.yaml", "confirm_reruns", 11), "confirm_reruns"),
    ("epochs empty", ["configs"], ("benchmarks/unet_torch_voc2007.yaml", "epochs", []), "epochs"),
    ("unknown stack", ["configs"], ("benchmarks/unet_torch_voc2007.yaml", "stack", "jax"), "jax"),
    ("unknown profile", ["configs"], ("benchmarks/unet_torch_voc2007.yaml", "profiles.weekly", {"epochs": [1]}), "weekly"),
    ("negative cell timeout", ["configs"], ("benchmarks/unet_torch_voc2007.yaml", "cell_timeout_minutes", -5), "cell_timeout_minutes"),
    ("time to accuracy of an unknown metric", ["configs"], ("benchmarks/unet_torch_voc2007.yaml", "time_to_accuracy", {"metric": "map", "target": 0.5}),
     "time_to_accuracy"),
    ("fleet retention zero", ["configs"], ("fleet.yaml", "retention_days", 0), "retention_days"),
    ("a key written twice", ["configs"], ("fleet.yaml", "text", b"retention_days: 30\nhosts: []\nretention_days: 7\n"),
     "key 'retention_days' is written twice, at lines 1 and 3"),
    ("a benchmark id longer than the store keeps", ["configs"], ("benchmarks", "copy as", "u" * 101),
     "is 101 characters; the store's column cells.benchmark holds 100"),
    ("a host name longer than the store keeps", ["configs"], ("fleet.yaml", "hosts.0.name", "h" * 101),
     "is 101 characters; the store's column cells.host holds 100"),
    ("a device id longer than the lease table keeps", ["configs"], ("fleet.yaml", "hosts.0.device_ids",
                                                                    ["GPU-" + "0" * 61]),
     "device id 'GPU-000"),
    ("an image reference longer than the store keeps", ["configs"],
     ("benchmarks/unet_torch_voc2007.yaml", "images", {"cpu": "scalebench/" + "t" * 290 + ":cpu"}),
     "the store's column image_packages.image holds 300"),
    ("an alert route name longer than the store keeps", ["configs"],
     ("alerts.yaml", "routes", [{"name": "r" * 101, "stacks": ["torch"], "connection": "c"}]),
     "the store's column alert_deliveries.channel holds 100"),
    ("two alert routes of one name", ["configs"],
     ("alerts.yaml", "routes", [{"stacks": ["torch"], "connection": "c"}, {"stacks": ["keras"], "connection": "c"}]),
     "each route needs its own name"),
    ("a boolean in a list of numbers", ["configs"], ("benchmarks/unet_torch_voc2007.yaml", "gpu_counts", [1, True]),
     "field 'gpu_counts[1]': expected a number, got a boolean"),
    ("a boolean in a mapping of numbers", ["configs"], ("benchmarks/unet_torch_voc2007.yaml", "bounds", {"iou": [True, 1]}),
     "field 'bounds.iou[0]': expected a number, got a boolean"),
    ("a stack without its Dockerfile", ["configs"], ("stacks.yaml", "stacks.jax", "copy of torch"),
     "containers/jax/Dockerfile"),
    ("fleet budget negative", ["configs"], ("fleet.yaml", "night_budget_minutes", -5), "night_budget_minutes"),
    ("fleet host kind tpu", ["configs"], ("fleet.yaml", "hosts.0.kind", "tpu"), "kind"),
    ("fleet no hosts", ["configs"], ("fleet.yaml", "hosts", []), "hosts"),
    ("alerts unknown notifier", ["configs"], ("alerts.yaml", "notifier", "pager"), "notifier"),
    ("alerts report url a script", ["configs"], ("alerts.yaml", "report_url", "javascript:alert(1)"), "report_url"),
    ("alerts not yaml", ["configs"], ("alerts.yaml", "text", b"notifier: [\n"), "alerts.yaml"),
    ("alert route to an unknown stack", ["configs"], ("alerts.yaml", "routes", [{"stacks": ["jax"], "connection": "c"}]),
     "routes.0.stacks"),
    ("alert route for nothing", ["configs"], ("alerts.yaml", "routes", [{"connection": "c"}]), "benchmarks or stacks"),
    ("remind after zero days", ["configs"], ("alerts.yaml", "remind_after_days", 0), "remind_after_days"),
    ("shift of an unknown benchmark", ["configs"], ("acknowledged_shifts.yaml", "shifts",
                                                     [{"benchmark": "nope", "since": "2026-12-01", "reason": "x"}]), "nope"),
    ("shift on no date", ["configs"], ("acknowledged_shifts.yaml", "shifts",
                                        [{"benchmark": BENCH, "since": "2026-13-01", "reason": "x"}]), "since"),
    ("shift without a reason", ["configs"], ("acknowledged_shifts.yaml", "shifts",
                                              [{"benchmark": BENCH, "since": "2026-12-01"}]), "reason"),
    # more arguments
    ("cells gpus twice", ["cells", BENCH, "--gpus", "1,1"], None, "--gpus"),
    ("cells gpus zero", ["cells", BENCH, "--gpus", "0,1"], None, "--gpus"),
    ("cells beyond the host", ["cells", BENCH, "--gpus", "64"], None, "64"),
    ("configs bad output", ["configs", "-o", "yaml"], None, "-o"),
    ("data unknown benchmark", ["data", "no_such"], None, "no_such"),
    ("data bad profile", ["data", BENCH, "--profile", "huge"], None, "--profile"),
    ("data nothing named", ["data"], None, "name a benchmark"),
    ("fetch mirror not a url", ["data", "--fetch", "--data-root", "{tmp}/data", "--mirror", "notaurl", BENCH], None,
     "--mirror"),
    ("fetch mirror without the archive", ["data", "--fetch", "--data-root", "{tmp}/data", "--mirror",
                                           "file:///nonexistent", BENCH], None, "file:///nonexistent/"),
    ("fetch data root is a file", ["data", "--fetch", "--data-root", "{backup}", BENCH], "garbage backup",
     "Not a directory"),
    ("bisect a count it does not run", ["bisect", BENCH, "--gpus", "5", "--good", "a", "--bad", "b"], None, "--gpus 5"),
    ("bisect one image twice", ["bisect", BENCH, "--gpus", "1", "--good", "a", "--bad", "a"], None, "distinct"),
    ("report out is a file", ["report", "--out", "{backup}"], "garbage backup", "--out"),
    ("rehearse names its own benchmark", ["rehearse", "--profile", "full", "--benchmark", "maskrcnn_mmdet_voc2012"],
     None, "maskrcnn_mmdet_voc2012: no GPU host"),
    # a store that exists (and stays byte for byte as it was)
    ("prune on a new home", ["prune", "--dry-run"], None, "db upgrade"),
    ("history of an unknown benchmark", ["history", "no_such"], "fresh store", "no_such"),
    ("repro of an unknown key", ["repro", "nothing"], "fresh store", "'nothing'"),
    ("repro of a path outside", ["repro", "../../etc/passwd"], "fresh store", "'../../etc/passwd'"),
    ("diff of unknown images", ["diff", "a", "b"], "fresh store", "image 'a'"),
    ("compare unknown runs", ["compare", "a", "b"], "fresh store", "run 'a'"),
    ("compare nights without runs", ["compare", "--nights", "2026-01-01", "2026-01-02"], "fresh store", "2026-01-01"),
    ("backup over the store", ["db", "backup", "{home}/results.db"], "fresh store", "never overwrites"),
    ("alerts show without an id", ["alerts", "show"], "fresh store", "needs a group ID"),
    ("alerts id not a number", ["alerts", "show", "1;drop"], None, "group number"),
    ("alerts unknown group", ["alerts", "show", "7"], "fresh store", "no alert group #7"),
    ("alerts set an unknown state", ["alerts", "set", "1", "closed"], None, "invalid choice"),
    ("alerts set nothing", ["alerts", "set", "1"], "fresh store", "nothing to change"),
    ("alerts set an unknown group", ["alerts", "set", "7", "investigating"], "fresh store", "no alert group #7"),
    ("alerts owner with a newline", ["alerts", "set", "7", "triaged", "--owner", "a\nb"], "fresh store", "owner"),
    ("alerts list a bad state", ["alerts", "list", "--state", "gone"], None, "--state"),
]


def _edit(tree, file: str, field: str, value) -> None:
    path = tree / file
    if field == "copy as":  # a second benchmark file (the UNet one) under this name and id
        doc = yaml.safe_load((tree / "benchmarks" / f"{BENCH}.yaml").read_text())
        name = value if value.endswith((".yaml", ".yml")) else f"{value}.yaml"
        (path / name).write_text(yaml.safe_dump({**doc, "id": name.rsplit(".", 1)[0]}))
        return
    if field == "text":
        path.write_bytes(value)
        return
    doc = yaml.safe_load(path.read_text())
    if value == "copy of torch":  # a stack entry like the torch one, under another name
        value = doc["stacks"]["torch"]
    if field == "two gpu hosts":
        host = {"name": "gpu-a", "kind": "gpu", "queue": value, "device_ids": ["0", "1"]}
        doc["hosts"] += [host, {**host, "name": "gpu-b"}]
    else:
        *parents, last = field.split(".")
        node = doc
        for key in parents:
            node = node[int(key)] if isinstance(node, list) else node[key]
        node[int(last) if isinstance(node, list) else last] = value
    path.write_text(yaml.safe_dump(doc, allow_unicode=True))


@pytest.fixture
def home(tmp_path, monkeypatch):
    tree = tmp_path / "configs"
    shutil.copytree(CONFIGS, tree)
    state = tmp_path / "home"
    state.mkdir()
    monkeypatch.setenv("SCALEBENCH_CONFIG_DIR", str(tree))
    monkeypatch.setenv("SCALEBENCH_HOME", str(state))
    for var in ("SCALEBENCH_STORE_URL", "SCALEBENCH_FLEET", "SCALEBENCH_DEBUG"):
        monkeypatch.delenv(var, raising=False)
    return tree, state


def _store(state, setup, monkeypatch):
    db = state / "results.db"
    if setup == "fresh store":
        from scalebench.store.db import upgrade

        upgrade(f"sqlite:///{db}")
        with sqlite3.connect(db) as conn:  # as the store runs (WAL), so that a read leaves the file as it was
            conn.execute("pragma journal_mode=wal")
    elif setup == "garbage store":
        db.write_bytes(os.urandom(4096))
    elif setup == "foreign store":
        with sqlite3.connect(db) as conn:
            conn.execute("create table notes (id integer primary key, body text)")
            conn.execute("insert into notes (body) values ('not scalebench')")
    elif setup == "no driver":
        monkeypatch.setenv("SCALEBENCH_STORE_URL", "postgresql+psycopg://u:secret@db.invalid/scalebench")
    elif setup == "bad url":
        monkeypatch.setenv("SCALEBENCH_STORE_URL", "a database somewhere")
    elif setup == "memory store":
        monkeypatch.setenv("SCALEBENCH_STORE_URL", "sqlite://")
    elif setup == "memory file store":
        monkeypatch.setenv("SCALEBENCH_STORE_URL", "sqlite:///:memory:")
    backup = state.parent / "backup.db"  # beside the home: the file a restore reads
    if setup == "garbage backup":
        backup.write_bytes(os.urandom(8192))
    elif setup in ("foreign backup", "newer backup", "store and backup"):
        with sqlite3.connect(backup) as conn:
            conn.execute("create table notes (id integer primary key, body text)")
            if setup != "foreign backup":
                conn.execute("create table alembic_version (version_num varchar(32) primary key)")
                conn.execute("insert into alembic_version values ('9999_from_the_future')"
                             if setup == "newer backup" else "insert into alembic_version values ('0001_initial')")
        if setup == "store and backup":
            db.write_bytes(b"SQLite format 3\x00" + os.urandom(4080))  # something already there
    return db


def _digest(folder) -> dict:
    """Every file of the home (the store and any file beside it) by content; db upgrade's lock file
    beside the store, SQLite's shared-memory index and an empty write-ahead log (what any reader
    of a WAL database leaves) are no part of it."""
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir())
            if p.is_file() and not p.name.endswith((".migrate-lock", "-shm"))
            and not (p.name.endswith("-wal") and p.stat().st_size == 0)}


@pytest.mark.parametrize("argv, setup, names", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_input_ends_in_one_line_that_names_it_and_changes_nothing(home, monkeypatch, capsys, argv, setup, names):
    tree, state = home
    if isinstance(setup, tuple):
        _edit(tree, *setup)
    elif setup:
        _store(state, setup, monkeypatch)
    argv = [a.format(backup=state.parent / "backup.db", home=state, tmp=state.parent) for a in argv]
    before = _digest(state)
    try:
        status = cli.main(argv)
    except SystemExit as exc:  # argparse's exit, as the console script would see it
        status = exc.code
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    assert status == 2, (status, out, err)
    lines = err.strip().splitlines()
    assert lines and lines[0].startswith("scalebench: "), err
    assert len(lines) <= 4, err  # a config error names each broken field (YAML: its place) on a line; no usage dump
    assert names in err, err
    assert "secret" not in err  # a store URL is shown without its password
    assert _digest(state) == before  # nothing recorded is lost or replaced, no store file created


def test_debug_shows_the_traceback_that_the_one_line_hides(home, monkeypatch, capsys):
    _, state = home
    _store(state, "garbage store", monkeypatch)
    monkeypatch.setenv("SCALEBENCH_DEBUG", "1")
    with pytest.raises(Exception, match="file is not a database"):
        cli.main(["results"])


def test_a_broken_pipe_ends_quietly(home, monkeypatch, capsys):
    def stopped_reading(*a, **k):
        raise BrokenPipeError(32, "Broken pipe")

    monkeypatch.setattr(STACKS, "run", stopped_reading)
    r, w = os.pipe()
    saved = os.dup(1)
    try:
        assert cli.main(["stacks"]) == 1
    finally:
        os.dup2(saved, 1)
        os.close(saved)
        os.close(r)
        os.close(w)
    assert capsys.readouterr().err == ""


def test_an_unexpected_error_is_one_line_with_the_way_to_its_traceback(home, monkeypatch, capsys):
    monkeypatch.setattr(STACKS, "run", lambda *a: {}["missing key"])
    assert cli.main(["stacks"]) == 1
    [line] = capsys.readouterr().err.splitlines()
    assert line == ("scalebench: stacks: KeyError: 'missing key'; this is a bug or an unexpected state: run it again "
                    "with --debug (or SCALEBENCH_DEBUG=1) for the traceback")


def test_one_broken_benchmark_file_does_not_stop_another_benchmarks_plan(home, capsys):
    tree, _ = home
    _edit(tree, "benchmarks/frcnn_mmdet_voc2007.yaml", "per_gpu_batch", "many")
    assert cli.main(["plan", "--benchmark", BENCH]) in (0, 1)  # 1: the night does not fit; planned either way
    out = capsys.readouterr().out
    assert BENCH in out and "frcnn_mmdet_voc2007" not in out.split("\n\n")[0]
