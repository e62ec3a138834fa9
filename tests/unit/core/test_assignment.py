"""Benchmarks assigned to GPU hosts: balanced within each host's budget, kept from night to night
unless the fleet, a benchmark's `hosts:` or the budget forces a move, stored in the results store."""
import pytest
import yaml

from scalebench.core.assignment import assign
from scalebench.core.config import ConfigError, Configs, Fleet
from scalebench.core.plan import assigned_plan
from tests.support import CONFIGS


def fleet_of(n_hosts: int, budget: float = 480) -> Fleet:
    return Fleet(night_budget_minutes=budget, hosts=[
        {"name": f"gpu-node-{i}", "kind": "gpu", "queue": f"gpu-node-{i}", "device_ids": ["0", "1", "2", "3"]}
        for i in range(1, n_hosts + 1)])


@pytest.fixture(scope="module")
def benches():
    return Configs(CONFIGS, CONFIGS / "fleet.gpu-example.yaml").benchmarks


@pytest.mark.parametrize("n_hosts", [1, 2, 3])
def test_every_host_gets_work_and_every_night_fits(benches, n_hosts):
    plan, a = assigned_plan(benches, fleet_of(n_hosts), "nightly")
    assert plan.feasible, plan.problems
    assert set(a.hosts) == set(benches) and {a.why[b] for b in benches} == {"new"}
    assert set(a.hosts.values()) == {f"gpu-node-{i}" for i in range(1, n_hosts + 1)}  # none idle
    for h in plan.hosts:
        assert h.minutes <= h.budget_minutes
        assert {r.benchmark for r in plan.rows if r.host == h.host} == {b for b, x in a.hosts.items() if x == h.host}
    if n_hosts == 2:  # balanced: neither host carries much more than half
        loads = sorted(h.minutes for h in plan.hosts)
        assert loads[1] / sum(loads) < 0.6


def test_an_unrelated_config_change_moves_nothing(benches):
    fleet = fleet_of(2)
    _, first = assigned_plan(benches, fleet, "nightly")
    slower = dict(benches)
    b = "resnet50_keras_cifar10"
    est = slower[b].estimate.model_copy(update={"step_s": {n: 3 * s for n, s in slower[b].estimate.step_s.items()}})
    slower[b] = slower[b].model_copy(update={"estimate": est})
    _, again = assigned_plan(slower, fleet, "nightly", previous=first.hosts)
    assert again.hosts == first.hosts and set(again.why.values()) == {"kept"}


def test_a_removed_host_moves_only_its_benchmarks(benches):
    _, three = assigned_plan(benches, fleet_of(3), "nightly")
    _, two = assigned_plan(benches, fleet_of(2), "nightly", previous=three.hosts)
    for b, host in three.hosts.items():
        if host == "gpu-node-3":
            assert two.why[b] == "moved: gpu-node-3 left the fleet" and two.hosts[b] != "gpu-node-3"
        else:
            assert (two.hosts[b], two.why[b]) == (host, "kept")


def test_a_pinned_benchmark_runs_on_its_host(benches):
    pinned = dict(benches)
    b = "unet_torch_voc2007"
    pinned[b] = pinned[b].model_copy(update={"hosts": ["gpu-node-2"]})
    _, a = assigned_plan(pinned, fleet_of(2), "nightly", previous={b: "gpu-node-1"})
    assert (a.hosts[b], a.why[b]) == ("gpu-node-2", "moved: gpu-node-1 is not among its hosts")


def test_a_host_over_budget_gives_up_a_benchmark(benches):
    minutes = {b: 100.0 for b in benches}
    first, *rest = sorted(benches)
    five_on_one = {first: "gpu-node-2", **{b: "gpu-node-1" for b in rest}}  # both hosts known: none joined
    a = assign(benches, fleet_of(2, budget=400), minutes, five_on_one)
    # stability before balance: only as many move as it takes to fit (5 x 100 min on a 400 min night)
    assert a.load == {"gpu-node-1": 400, "gpu-node-2": 200}
    moved = [b for b, why in a.why.items() if why.startswith("moved:")]
    assert len(moved) == 1 and {a.hosts[b] for b in moved} == {"gpu-node-2"} and all(a.why[b] == "moved: gpu-node-1's night exceeded night_budget_minutes 400"
                                   for b in moved)
    # the same six on a host that joined the fleet: balanced, the largest night 300 min
    joined = assign(benches, fleet_of(2, budget=400), minutes, {b: "gpu-node-1" for b in benches})
    assert joined.load == {"gpu-node-1": 300, "gpu-node-2": 300}


@pytest.mark.parametrize("hosts, why", [
    (["gpu-node-9"], "field 'hosts': ['gpu-node-9'] are not hosts of the fleet; expected some of ['gpu-node-1', 'gpu-node-2', 'local']"),
    (["local"], "field 'hosts': none of ['local'] is a GPU host with 4 devices for gpu_counts [1, 2, 3, 4] "
                "({'local': ('cpu', 4)})"),
])
def test_a_benchmark_that_fits_no_host_is_refused_at_load_naming_it(config_tree, hosts, why):
    path = config_tree / "benchmarks" / "unet_torch_voc2007.yaml"
    doc = yaml.safe_load(path.read_text())
    doc["hosts"] = hosts
    path.write_text(yaml.safe_dump(doc))
    good, broken = Configs(config_tree, CONFIGS / "fleet.gpu-example.yaml").load_all()
    assert why in str(broken["unet_torch_voc2007"]) and str(path) in str(broken["unet_torch_voc2007"])
    assert "resnet50_keras_cifar10" in good


def test_a_benchmark_no_gpu_host_fits_is_refused_alone(benches):
    small = Fleet(hosts=[{"name": "gpu-small", "kind": "gpu", "queue": "q", "device_ids": ["0", "1"]}])
    fits = {b for b, bench in benches.items() if max(bench.gpu_counts) <= 2}
    a = assign(benches, small, {b: 1.0 for b in benches})
    assert set(a.hosts) == fits and set(a.hosts.values()) <= {"gpu-small"}  # the others are assigned as before
    with pytest.raises(ConfigError, match=r"frcnn_mmdet_voc2007: no GPU host fits it \(needs 4 devices"):
        a.host_of("frcnn_mmdet_voc2007")


def test_settle_stores_the_assignment_and_keeps_it(isolated_state, monkeypatch, tmp_path):
    from scalebench.store.assignments import settle
    from scalebench.store.results import Store

    fleet = tmp_path / "fleet.yaml"
    fleet.write_text(yaml.safe_dump(fleet_of(2).model_dump(exclude_none=True)))
    configs = Configs(CONFIGS, fleet)
    store = Store()
    assert settle(configs, store, save=False) and store.assignments() == {}  # a preview stores nothing
    first = settle(configs, store)
    stored = store.assignments()
    assert {b: r["host"] for b, r in stored.items()} == first.hosts and {r["reason"] for r in stored.values()} == {"new"}
    again = settle(configs, store)
    assert again.hosts == first.hosts and set(again.why.values()) == {"kept"}
    assert store.assignments() == stored  # nothing rewritten: the since dates stay


def test_a_host_added_to_the_fleet_takes_work_with_the_fewest_moves(benches):
    _, one = assigned_plan(benches, fleet_of(1, budget=2000), "nightly")
    assert set(one.hosts.values()) == {"gpu-node-1"}
    plan, two = assigned_plan(benches, fleet_of(2, budget=2000), "nightly", previous=one.hosts)
    moved = two.changed(one.hosts)
    assert moved and set(moved.values()) == {"gpu-node-2"} and set(two.hosts.values()) == {"gpu-node-1", "gpu-node-2"}
    assert all(two.why[b].startswith("moved: gpu-node-2 joined the fleet; the largest host night goes from ")
               for b in moved)
    loads = {h.host: h.minutes for h in plan.hosts}
    assert max(loads.values()) < 0.7 * sum(loads.values()) and plan.feasible  # both carry work, both fit
    assert two.moves(one.hosts) == [f"{b}: gpu-node-1 -> gpu-node-2 ({two.why[b]})" for b in sorted(moved)]
    # the night after, nothing moves again
    _, three = assigned_plan(benches, fleet_of(2, budget=2000), "nightly", previous=two.hosts)
    assert three.hosts == two.hosts and set(three.why.values()) == {"kept"}


def test_settle_records_every_move_with_its_reason(isolated_state, tmp_path):
    from scalebench.store.assignments import settle
    from scalebench.store.results import Store

    store = Store()
    for n in (1, 2):
        fleet = tmp_path / f"fleet{n}.yaml"
        fleet.write_text(yaml.safe_dump(fleet_of(n, budget=2000).model_dump(exclude_none=True)))
        settle(Configs(CONFIGS, fleet), store)
    moves = store.assignment_moves()
    first = [m for m in moves if m["from"] is None]
    assert {m["benchmark"] for m in first} == set(Configs(CONFIGS).benchmarks) and {m["reason"] for m in first} == {"new"}
    later = [m for m in moves if m["from"] is not None]
    assert later and all(m["from"] == "gpu-node-1" and m["to"] == "gpu-node-2" and "joined the fleet" in m["reason"]
                         for m in later)
    assert {b: r["host"] for b, r in store.assignments().items()} == {
        **{m["benchmark"]: "gpu-node-1" for m in first}, **{m["benchmark"]: "gpu-node-2" for m in later}}


def test_plan_shows_the_moves_and_cells_list_the_assigned_host(isolated_state, tmp_path, capsys):
    from scalebench.cli import main
    from scalebench.store.assignments import settle
    from scalebench.store.results import Store

    one = tmp_path / "fleet1.yaml"
    one.write_text(yaml.safe_dump(fleet_of(1, budget=2000).model_dump(exclude_none=True)))
    settle(Configs(CONFIGS, one), Store())
    two = tmp_path / "fleet2.yaml"
    two.write_text(yaml.safe_dump(fleet_of(2, budget=2000).model_dump(exclude_none=True)))
    main(["--fleet", str(two), "plan", "--profile", "nightly"])
    out = capsys.readouterr().out
    moves = [line for line in out.splitlines() if line.startswith("moves: ")]
    assert moves and all(" gpu-node-1 -> gpu-node-2 (moved: gpu-node-2 joined the fleet" in m for m in moves)
    assert main(["--fleet", str(two), "cells", "--profile", "nightly", "-o", "json"]) == 0
    import json

    cells = json.loads(capsys.readouterr().out)["cells"]
    assert {c["host"] for c in cells} == {"gpu-node-1", "gpu-node-2"}
