"""The night's plan and the config checks it rests on: enough timed steps, one timing basis."""
import json
import shutil

import pytest
import yaml

from scalebench import cli
from scalebench.cli.commands import plan as plan_command
from scalebench.core.config import ConfigError, Configs
from scalebench.core.plan import Cost, night_plan, stored_costs
from tests.support import CONFIGS, new_config_tree
from tests.support.samples import sample_benchmark

GPU_FLEET = CONFIGS / "fleet.gpu-example.yaml"


@pytest.fixture(scope="module")
def gpu():
    return Configs(CONFIGS, GPU_FLEET)


def test_shipped_nightly_plans_time_enough_steps_with_one_basis_per_benchmark_and_fit(gpu):
    plan = night_plan(gpu.benchmarks, gpu.fleet, "nightly")
    assert plan.feasible, plan.problems
    assert {(r.benchmark, r.gpus) for r in plan.rows} == {(b, n) for b in gpu.benchmarks for n in (1, 2, 3, 4)}
    assert min(r.timed_steps for r in plan.rows) >= 50
    for bench in gpu.benchmarks:
        mine = [r for r in plan.rows if r.benchmark == bench]
        assert len({r.timing_basis for r in mine}) == 1
        assert all(r.capped for r in mine) == (mine[0].timing_basis == "throughput")
        assert {r.repeats for r in mine} == {3}  # schedule_repeats' default
    # ResNet50 at 4 GPUs: 5 epochs of 15 steps, 20 warm-up -> 55 timed; 60 s set-up + 75 x 0.62 s + 20 s eval
    r = next(r for r in plan.rows if r.benchmark == "resnet50_keras_cifar10" and r.gpus == 4)
    assert (r.global_batch, r.steps_per_epoch, r.epochs, r.timed_steps) == (3200, 15, 5, 55)
    assert r.cell_s == pytest.approx(60 + 75 * 0.62 + 20) and r.cost_source == "config estimate"
    [host] = plan.hosts
    assert host.cell_minutes == pytest.approx(sum(r.seconds for r in plan.rows) / 60)


def _with_nightly(tmp_path, bench_id, sizes):
    tree = new_config_tree(tmp_path / "configs", fleet=yaml.safe_load(GPU_FLEET.read_text()))
    shutil.copy(CONFIGS / "benchmarks" / f"{bench_id}.yaml", tree / "benchmarks")
    path = tree / "benchmarks" / f"{bench_id}.yaml"
    doc = yaml.safe_load(path.read_text())
    doc["profiles"]["nightly"] = sizes
    path.write_text(yaml.safe_dump(doc))
    return Configs(tree, tree / "fleet.yaml")


def test_the_old_resnet50_nightly_profile_is_refused_naming_each_short_gpu_count(tmp_path):
    configs = _with_nightly(tmp_path, "resnet50_keras_cifar10",
                            {"epochs": [1], "max_steps_per_epoch": 150, "test_images": 2000, "warmup_steps": 20})
    with pytest.raises(ConfigError) as err:
        configs.benchmark("resnet50_keras_cifar10")
    msg = str(err.value)
    assert "resnet50_keras_cifar10.yaml: profile 'nightly'" in msg and "min_timed_steps 50" in msg
    for part in ("43 at 1 GPU (1 epoch(s) of 63 steps at global batch 800, 20 warm-up)", "12 at 2 GPUs",
                 "1 at 3 GPUs", "0 at 4 GPUs (1 epoch(s) of 16 steps at global batch 3200"):
        assert part in msg
    assert "max_steps_per_epoch: 15 and epochs: [5]" in msg  # the fix, computed


def test_a_cap_that_binds_at_some_gpu_counts_only_is_refused(tmp_path):
    configs = _with_nightly(tmp_path, "maskrcnn_mmdet_voc2012",
                            {"epochs": [1], "max_steps_per_epoch": 100, "test_images": 200, "warmup_steps": 10})
    with pytest.raises(ConfigError, match=r"caps the epoch at 1 GPU but not at 2, 3, 4 GPUs \(steps per pass 147 at "
                                          r"1, 74 at 2, 49 at 3, 37 at 4\), so one row would mix timing bases"):
        configs.benchmark("maskrcnn_mmdet_voc2012")


def test_min_timed_steps_is_a_profile_size_and_unknown_splits_are_refused_for_timed_profiles(tmp_path):
    configs = _with_nightly(tmp_path, "unet_torch_voc2007", {"epochs": [10], "min_timed_steps": 5})
    assert configs.benchmark("unet_torch_voc2007").resolved("nightly").steps(4).timed_steps == 17  # 10 epochs of 2 steps, 3 warm-up
    stacks = yaml.safe_load((configs.config_dir / "stacks.yaml").read_text())
    del stacks["datasets"]["voc2007"]["splits"]
    (configs.config_dir / "stacks.yaml").write_text(yaml.safe_dump(stacks))
    with pytest.raises(ConfigError, match=r"profile 'nightly': the train split's size of dataset 'voc2007' "
                                          r"\(vocdevkit-2007-seg\) is unknown.*datasets.voc2007.splits"):
        Configs(configs.config_dir, GPU_FLEET).benchmark("unet_torch_voc2007")


def test_stored_figures_set_the_cost_and_an_over_budget_night_is_infeasible(gpu):
    bench = gpu.benchmark("resnet50_keras_cifar10")

    def stored(night, step_s, role="measure"):
        timing = {"setup_s": 30.0, "eval_s": 10.0, "breakdown": {"timed_steps": 55, "step_s": 55 * step_s}}
        return {"benchmark": bench.id, "profile": "nightly", "host": "gpu-node-1", "gpus": 2, "precision": "bf16", "night": night,
                "role": role, "figure": {"timing": timing}}

    figures = [stored(f"2026-11-{d:02d}", 0.4 + d / 100) for d in range(1, 11)] + [stored("2026-11-10", 9.0, "rerun")]
    costs = stored_costs(figures)
    cost = costs[(bench.id, "nightly", "gpu-node-1", 2, "bf16")]
    assert cost.source == "stored: median of 7 nights" and cost.step_s == pytest.approx(0.47)  # nights 4-10
    plan = night_plan({bench.id: bench}, gpu.fleet, "nightly", stored=costs)
    two = next(r for r in plan.rows if r.gpus == 2)
    assert two.cost_source == cost.source and two.cell_s == pytest.approx(30 + 75 * 0.47 + 10)
    assert next(r for r in plan.rows if r.gpus == 1).cost_source == "config estimate"
    slow = {(bench.id, "nightly", "gpu-node-1", n, "bf16"): Cost(60, 30.0, 20, "stored: median of 1 night") for n in (1, 2, 3, 4)}
    late = night_plan({bench.id: bench}, gpu.fleet, "nightly", stored=slow)
    assert not late.feasible
    assert any("above its cell_timeout_minutes 30" in p for p in late.problems)
    assert any(p.startswith("host gpu-node-1: the night takes") and "night_budget_minutes (480 min)" in p
               for p in late.problems)


def test_plan_cli_prints_the_table_and_exits_non_zero_when_infeasible(capsys, monkeypatch):
    monkeypatch.setattr(plan_command, "_stored_figures", lambda: [])
    assert cli.main(["plan", "--profile", "nightly", "--fleet", str(GPU_FLEET), "-o", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["feasible"] and len(doc["rows"]) == 24 + 2 and [h["host"] for h in doc["hosts"]] == ["gpu-node-1",
                                                                                            "gpu-node-2"]
    # the host probe: its cells on every GPU host, in each host's night (both hosts busy, both fit)
    probes = [r for r in doc["rows"] if r["benchmark"] == "probe (unet_torch_voc2007)"]
    assert [(r["host"], r["gpus"], r["repeats"]) for r in probes] == [("gpu-node-1", 1, 24), ("gpu-node-2", 1, 24)]
    assert all(h["cell_minutes"] > 60 and h["fits"] for h in doc["hosts"])
    assert {a["host"] for a in doc["assignment"].values()} == {"gpu-node-1", "gpu-node-2"}
    assert cli.main(["--fleet", str(GPU_FLEET), "plan", "--benchmark", "unet_torch_voc2007"]) == 0
    out = capsys.readouterr().out
    assert "unet_torch_voc2007" in out and "1 (cap)" in out and "fits" in out and "feasible (nightly)" in out
    # the full profile is planned as the weekly accuracy run: full passes timed by training time, cut
    # to the largest epoch value and three repeats (fewer cannot show equivalence), against the host's window
    assert cli.main(["--fleet", str(GPU_FLEET), "plan", "--benchmark", "unet_torch_voc2007", "--profile", "full",
                     "-o", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert {(r["epochs"], r["repeats"], r["timing_basis"]) for r in doc["rows"]} == {(100, 3, "train time")}
    assert [r["gpus"] for r in doc["rows"]] == [1, 2, 3, 4]
    host = doc["hosts"][0]
    assert (host["budget_name"], host["budget_minutes"], host["rerun_minutes"]) == ("accuracy_window_hours 48", 2880, 0)
    # the CPU-only default fleet has no host for a nightly run
    assert cli.main(["plan", "--profile", "nightly"]) == 1
    assert "infeasible: resnet50_keras_cifar10: no GPU host" in capsys.readouterr().out


def test_a_weekly_accuracy_run_longer_than_its_window_is_infeasible_and_names_cuts_that_fit(gpu):
    import re

    fleet = gpu.fleet.model_copy(update={"accuracy_window_hours": 12.0})
    plan = night_plan(gpu.benchmarks, fleet, "full")
    assert {r.repeats for r in plan.rows} == {3}
    assert {(r.benchmark, r.epochs) for r in plan.rows} == {(b, bench.accuracy_cut()[0][0])
                                                           for b, bench in gpu.benchmarks.items()}
    assert not plan.feasible
    [problem] = [p for p in plan.problems if p.startswith("host gpu-node-1: the weekly accuracy run takes")]
    assert "accuracy_window_hours 12 (720 min); cuts that fit: accuracy_epochs [" in problem
    # each cut named is one that fits: plan it and see
    cut = dict((b, int(e)) for e, b in re.findall(r"\[(\d+)\] for (\w+)", problem))
    cut_benches = {b: bench.model_copy(update={"accuracy_epochs": [cut[b]]}) for b, bench in gpu.benchmarks.items()
                   if b in cut}
    for b, bench in cut_benches.items():
        bench._stack, bench._splits = gpu.benchmarks[b]._stack, gpu.benchmarks[b]._splits
    host = next(h for h in night_plan(cut_benches, fleet, "full").hosts if h.host == "gpu-node-1")
    assert host.fits and 0.75 * 720 < host.minutes <= 720  # cut in steps of 5 % of the epochs: little is left unused
    hours = int(re.search(r"accuracy_window_hours (\d+)$", problem).group(1))
    wide = night_plan(gpu.benchmarks, gpu.fleet.model_copy(update={"accuracy_window_hours": float(hours)}), "full")
    assert next(h for h in wide.hosts if h.host == "gpu-node-1").fits


def test_capped_cells_say_their_steps_in_the_label(gpu):
    from scalebench.core import cells as cellmod

    cells = cellmod.plan(gpu.benchmark("resnet50_keras_cifar10"), gpu.fleet, profile="nightly", run_id="n",
                         gpu_counts=[1])
    assert cells[0]["label"] == "1 GPU · bf16 · 5 epochs of 15 steps · repeat 1"
    assert sample_benchmark("x").resolved("nightly").timing_basis([1, 2, 3, 4]) == "throughput"


def test_a_short_baseline_nights_abs_are_counted_and_shared_out_of_what_the_cells_leave(gpu, capsys, monkeypatch):
    """A new image on a short baseline runs an A/B (ab_pairs pairs) at every GPU count: the plan
    counts its cells and minutes per host, its last pair's two profiling windows included, and
    each benchmark may spend its share of what the night's cells leave of the budget (the DAG
    then runs the largest GPU counts first)."""
    from scalebench.core.plan import profile_window_s

    plan = night_plan(gpu.benchmarks, gpu.fleet, "nightly")
    [host] = plan.hosts
    for b, bench in gpu.benchmarks.items():
        longest = {n: max(r.cell_s for r in plan.rows if r.benchmark == b and r.gpus == n) for n in (1, 2, 3, 4)}
        step = {n: max(r.step_s for r in plan.rows if r.benchmark == b and r.gpus == n) for n in (1, 2, 3, 4)}
        windows = {n: 2 * profile_window_s(bench.resolved("nightly").profile_steps, step[n]) / 60 for n in step}
        assert host.ab_profile[b] == pytest.approx(windows) and all(0 < w < longest[n] / 60 for n, w in windows.items())
        assert host.ab_counts[b] == pytest.approx({n: 2 * bench.ab_pairs * s / 60 + windows[n]
                                                   for n, s in longest.items()})
    assert host.ab_cells == sum(2 * b.ab_pairs * 4 for b in gpu.benchmarks.values())
    free = host.budget_minutes - host.cell_minutes
    shares = {b: host.ab_allowed(b) for b in gpu.benchmarks}
    assert sum(shares.values()) == pytest.approx(min(free, host.ab_minutes))
    assert all(shares[b] <= sum(host.ab_counts[b].values()) + 1e-9 for b in shares)
    monkeypatch.setattr(plan_command, "_stored_figures", lambda: [])
    assert cli.main(["plan", "--profile", "nightly", "--fleet", str(GPU_FLEET)]) == 0
    out = capsys.readouterr().out
    assert "a new image on a short baseline (a series' first nights, after a restart or an improvement) adds an A/B" \
           " at every GPU count: 120 cells" in out
    assert "an A/B profiles its last pair (a profiling window in each of its two cells, after the timed steps)" in out
