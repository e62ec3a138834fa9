"""The scaling prediction: published multi-GPU tables (bench/public_scaling.csv) held to the
goals, and the step model given back on synthetic hosts whose truth is known."""
import importlib.util
import math
import random
import sys
from pathlib import Path

import pytest

from scalebench.analysis.prediction import Network, Point, fit, predict
from scalebench.analysis.scaling_table import points_from_csv

BENCH = Path(__file__).resolve().parents[3] / "bench" / "prediction.py"


def bench():
    spec = importlib.util.spec_from_file_location("prediction_bench", BENCH)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_the_held_out_public_tables_meet_the_goals_the_bench_prints_as_met():
    """The held-out part (tables the forms were not chosen on): per class no worse than the better
    naive rule and on average >= 25 % lower, the 90 % interval covering >= 80 %, multi-host rows
    within 15 %, nothing above its bound at 64 and 512 GPUs. The goals the bench prints as not met
    are not asserted here."""
    b = bench()
    rows, left = b.rows("held-out")
    assert len({r.table for r in rows}) >= 50 and len(left) <= 5
    assert {"regular", "poor", "multi-host"} <= {r.cls for r in rows}
    met = dict((text.split(":")[0], ok) for text, ok in b.goals(rows, b.far_predictions("held-out")))
    assert met["regular against the naive rules"] and met["poor against the naive rules"], met
    assert met["multi-host rows within 15 %"] and met["predictions at 64 and 512 GPUs above their bound"], met
    assert [ok for text, ok in met.items() if text.startswith("on average ")] == [True], met
    assert sum(r.covered for r in rows) >= 0.8 * len(rows)
    assert all(r.low <= r.predicted <= r.high for r in rows)


def test_the_split_is_fixed_by_the_name_and_each_table_lies_in_one_part():
    """A table's part is its name's SHA-256 parity (even: tune): a table added later cannot be
    placed where it helps."""
    import csv
    import hashlib

    split = {}
    for row in csv.DictReader(b_path().read_text().splitlines()):
        assert row["source"] and split.setdefault(row["table"], row["split"]) == row["split"], row["table"]
    assert set(split.values()) == {"tune", "held-out"}
    for name, part in split.items():
        even = int(hashlib.sha256(name.encode()).hexdigest(), 16) % 2 == 0
        assert part == ("tune" if even else "held-out"), name


def b_path():
    return BENCH.with_name("public_scaling.csv")


def table(counts, rate):
    """Points of a table: images/s at each count from a per-count efficiency."""
    return [Point(n, 100.0 * n * rate(n), per_gpu_batch=32) for n in counts]


@pytest.mark.parametrize("shape, rate", [
    ("amdahl", lambda n: 1 / (1 + 0.03 * (n - 1))),
    ("log", lambda n: 1 / (1 + 0.05 * math.log2(n))),
])
def test_the_form_that_predicted_the_largest_count_best_weighs_most(shape, rate):
    got = predict(table([1, 2, 4, 8], rate), 16, table=True)
    assert got.images_per_s == pytest.approx(1600 * rate(16), rel=0.02)
    [note] = [n for n in got.notes if n.startswith("form mix of ")]
    assert note.startswith(f"form mix of {shape} (") and "predicted the measured 8 from the counts below it" in note


def test_too_few_counts_to_score_says_so_and_takes_the_more_conservative_form():
    got = predict(table([1, 4], lambda n: 1 / (1 + 0.02 * math.log2(n))), 8, table=True)
    held = 8 * table([4], lambda n: 1 / (1 + 0.02 * math.log2(n)))[0].images_per_s / 4
    assert got.images_per_s < held and any("too few to score" in n and "(log)" in n for n in got.notes)
    assert got.low <= got.images_per_s <= got.high  # the other forms' spread: Amdahl below, held above


def test_a_strong_scaling_table_too_short_to_score_takes_amdahl_and_a_weak_one_does_not():
    """The same efficiencies at 1 and 4 GPUs: with the global batch held (each GPU's share
    shrinking) the fixed part of the step is Amdahl's, and 8 is predicted by it; with the per-GPU
    batch held the weak rule (the more conservative of log and held) stays."""
    rate = lambda n: 1 / (1 + 0.1 * (n - 1))  # noqa: E731  a fixed 10 % of the 1-GPU step
    strong = [Point(n, 100.0 * n * rate(n), per_gpu_batch=64 / n) for n in (1, 4)]
    got = predict(strong, 8, table=True)
    assert got.images_per_s == pytest.approx(800 * rate(8), rel=1e-6)
    assert any("strong scaling" in n and "(amdahl)" in n for n in got.notes)
    weak = predict(table([1, 4], rate), 8, table=True)
    assert weak.images_per_s > got.images_per_s * 1.1 and not any("strong scaling" in n for n in weak.notes)


def test_a_drop_at_the_largest_count_is_carried_forward_and_nothing_passes_the_compute_bound():
    points = [Point(1, 100.0), Point(2, 190.0), Point(3, 260.0), Point(4, 250.0)]  # 4 slower than 3
    for n in (8, 64, 512):
        got = predict(points, n, table=True)
        assert got.images_per_s <= 250.0 * (1 + 1e-9) and got.images_per_s <= 100.0 * n
        assert any(note.startswith("a plateau at 4 GPUs") for note in got.notes), got.notes
        assert got.limit.startswith(f"held at the measured plateau at {n}: "), got.limit  # never a part measured
    far = predict(table([1, 2, 4], lambda n: 0.9 ** math.log2(n)), 512, table=True)
    assert far.images_per_s <= 100.0 * 512 and any("an extrapolation: 512 GPUs" in n for n in far.notes)
    near = predict(table([1, 2, 4], lambda n: 0.9 ** math.log2(n)), 8, table=True)
    assert not any("extrapolation" in n for n in near.notes)
    assert (far.high - far.low) / far.images_per_s > 2 * (near.high - near.low) / near.images_per_s


def test_the_ring_all_reduce_bounds_the_step_where_the_sync_is_known():
    slow = Network(1e9, {1: 1.0}, hop_latency_s=1e-3)  # 1 GB of gradients at 1 GB/s: 2 s a step at 8 or more
    points = table([1, 2, 4], lambda n: 1.0)  # perfect scaling measured: no form grows
    got = predict(points, 64, network=slow, table=True)
    ring = 2 * 63 / 64 * 1.0 + 2 * 63 * 1e-3
    assert got.images_per_s == pytest.approx(64 * 32 / ring, rel=1e-6)
    assert any(n.startswith("bounded by the ring all-reduce alone at 64") for n in got.notes)


def test_hosts_from_a_table_with_a_multi_host_row_are_fitted_on_it_and_said():
    rows = table([1, 2, 4, 8], lambda n: 1 / (1 + 0.02 * math.log2(n)))
    eff8 = rows[-1].images_per_s
    rows += [Point(8, eff8 * 2 * 0.9, hosts=2, per_gpu_batch=32)]  # two hosts lose 10 %
    got = predict(rows, 8, 2, table=True)
    assert got.images_per_s == pytest.approx(eff8 * 2 * 0.9, rel=1e-6)
    four = predict(rows, 8, 4, table=True)
    assert four.images_per_s < 4 * eff8 * 0.9 and "what the hosts add" in four.limit
    assert any(n.startswith("across hosts, fitted on the 2-host row(s)") for n in four.notes)
    assert not any("assumed" in n for n in four.notes)
    # 25 M parameters on a 100 Gbit/s link: a ring at line rate would add 2 x 15/16 x 100 MB / 12.5 GB/s = 15 ms
    step8 = 8 * 32 / rows[3].images_per_s
    linked = predict(rows, 8, 4, Network(100e6, link_gbps=100.0), table=True)
    extra = step8 / 0.9 - step8
    assert any(f"reached {min(1.0, 2 * 15 / 16 * 0.1 / 12.5 / extra):.0%} of the link's 100 Gbit/s line rate at 2 "
               "hosts (fitted)" in n for n in linked.notes), linked.notes


def synthetic(counts, nights=1, *, batch=32, c=0.004, s=0.02, d1=0.01, h=0.004, other=0.005, g=2.0,
              network=Network(100e6, {1: 100.0, 2: 80.0, 4: 60.0, 8: 50.0}), cv=0.0, seed=0, strong=None):
    """Points of a host whose step is the model's own form with known parts (per step, seconds)."""
    rng = random.Random(seed)
    out = []
    for night in range(nights):
        for n in counts:
            b = strong / n if strong else batch
            compute = c * b * (1 + s * math.log2(n))
            full = network.sync_s(n)
            sync = (compute ** g + full ** g) ** (1 / g) - compute if full else 0.0
            wait = d1 + h * (n - 1)
            noise = 1 + rng.gauss(0, cv)
            step = (compute + sync + wait + other) * noise
            out.append(Point(n, n * b / step, per_gpu_batch=b, step_s=step, compute_s=compute * noise,
                             data_wait_s=wait * noise, sync_s=sync * noise, other_s=other * noise,
                             night=f"2026-11-{night + 1:02d}"))
    return out


def truth(n, **kw):
    return synthetic([n], **kw)[0].images_per_s


def test_the_breakdown_model_gives_back_a_known_host_at_8_gpus_from_1_2_and_4():
    net = Network(100e6, {1: 100.0, 2: 80.0, 4: 60.0, 8: 50.0})
    got = predict(synthetic([1, 2, 4], network=net), 8, network=net)
    assert got.kind == "breakdown" and got.images_per_s == pytest.approx(truth(8, network=net), rel=0.01)
    assert got.efficiency == pytest.approx(truth(8, network=net) / (8 * truth(1, network=net)), abs=0.01)
    assert got.limit.startswith("compute-bound at 8") and "% of the step" in got.limit


def test_a_large_model_on_a_slow_ring_is_sync_bound_and_says_so():
    net = Network(1e9, {1: 20.0, 2: 12.0, 4: 8.0, 8: 6.0})
    got = predict(synthetic([1, 2, 4], network=net, g=1.5), 8, network=net)
    assert got.images_per_s == pytest.approx(truth(8, network=net, g=1.5), rel=0.02)
    assert got.limit.startswith("sync-bound at 8") and got.shares["sync"] > 0.4


def test_strong_scaling_shrinks_the_per_gpu_batch_and_is_modelled_too():
    net = Network(100e6, {1: 100.0, 2: 80.0, 4: 60.0, 8: 50.0})
    points = synthetic([1, 2, 4], network=net, strong=96)
    got = predict(points, 8, network=net)
    assert got.images_per_s == pytest.approx(truth(8, network=net, strong=96), rel=0.02)


def test_from_one_gpu_and_the_sweep_alone_it_predicts_without_overlap_and_without_the_sweep_it_does_not():
    net = Network(100e6, {2: 80.0, 4: 60.0, 8: 50.0})
    flat = {"network": net, "s": 0.0, "h": 0.0}  # a host whose only growth is the sync: one GPU says all else
    got = predict(synthetic([1], **flat), 8, network=net)
    assert got.images_per_s is not None and got.images_per_s < truth(8, **flat)  # no overlap: conservative
    assert got.images_per_s == pytest.approx(truth(8, **flat | {"g": 1.0}), rel=0.001)
    assert any("not overlapped" in n for n in got.notes)
    bare = predict(synthetic([1], network=net), 8)
    assert bare.images_per_s is None and "nothing to scale the sync from" in bare.why_not
    assert "not predicted" in bare.line()


def test_two_hosts_need_the_link_and_say_it_is_assumed():
    net = Network(100e6, {1: 100.0, 2: 80.0, 4: 60.0})
    points = synthetic([1, 2, 4], network=net)
    assert predict(points, 4, 2, net).images_per_s is None
    linked = Network(100e6, {1: 100.0, 2: 80.0, 4: 60.0}, link_gbps=100.0)
    got = predict(points, 4, 2, linked)
    fast = predict(points, 4, 2, Network(100e6, {1: 100.0, 2: 80.0, 4: 60.0}, link_gbps=10_000.0))
    assert got.images_per_s is not None and got.images_per_s < fast.images_per_s  # 12.5 GB/s across, 60 inside
    assert any("assumed at 100 Gbit/s, not measured" in n and "reaches 50% of its line rate (assumed, no multi-host "
               "row measures it)" in n for n in got.notes) and got.label == "4 GPUs x 2 hosts"
    given = predict(points, 4, 2, Network(100e6, {1: 100.0, 2: 80.0, 4: 60.0}, link_gbps=100.0, link_efficiency=0.9))
    assert given.images_per_s > got.images_per_s and any("reaches 90% of its line rate (given)" in n for n in given.notes)


def test_the_interval_comes_from_the_nights_and_one_night_has_none():
    """The interval is the nights' spread carried through the fit (not the model's own error):
    it holds the estimate and widens with noisier nights."""
    net = Network(100e6, {1: 100.0, 2: 80.0, 4: 60.0, 8: 50.0})
    quiet, noisy = (predict(synthetic([1, 2, 4], nights=8, cv=cv, network=net), 8, network=net) for cv in (0.005, 0.03))
    for got in (quiet, noisy):
        assert got.low is not None and got.high is not None and got.low < got.images_per_s < got.high
    assert noisy.high - noisy.low > 2 * (quiet.high - quiet.low)
    one = predict(synthetic([1, 2, 4], network=net), 8, network=net)
    assert one.low is None and "no interval: one night" in one.line()


def test_a_framework_without_a_breakdown_gets_the_aggregate_fit_and_says_so():
    points = [Point(p.gpus, p.images_per_s, per_gpu_batch=p.per_gpu_batch) for p in synthetic([1, 2, 4])]
    model = fit(points)
    assert model.kind == "aggregate" and any("aggregate fit" in n for n in model.notes)
    # one term for every growth misses the parts' shapes (the breakdown is within 1 % on this host)
    got = predict(points, 8)
    assert got.images_per_s == pytest.approx(truth(8), rel=0.10)
    # no sync was measured: the growth is named as what it is, never as a sync
    assert got.limit.startswith("overhead grows with N: ") and "sync-bound" not in got.limit, got.limit
    assert "no breakdown measured" in got.limit and set(got.shares) == {"compute", "data_wait", "sync", "other",
                                                                        "overhead"} and got.shares["sync"] == 0


@pytest.mark.parametrize("text, says", [
    ("gpus,images_per_s\n1,100\ntwo,190\n", "line 3: column gpus: 'two' is not a number"),
    ("gpus,images_per_s\n1,100\n2,-5\n", "line 3: column images_per_s: '-5' must be a number above 0"),
    ("gpus,images_per_s\n1.5,100\n", "line 2: column gpus: '1.5' must be a whole number above 0"),
    ("gpus,throughput\n1,100\n", "expected a CSV with at least the columns gpus and images_per_s"),
    ("gpus,images_per_s\n1,\n", "line 2: column images_per_s is empty"),
])
def test_a_bad_table_names_the_file_line_and_column(text, says):
    with pytest.raises(ValueError, match="t.csv: .*" + says.replace("(", r"\(").replace(")", r"\)")):
        points_from_csv(text, "t.csv")


def test_the_fit_keeps_the_nightly_scheduled_runs_of_the_current_image():
    """A weekly full run, a manual trial of a candidate image, a rerun or the host probe on a
    later night neither joins the fit nor restarts it; a new scheduled image does restart it."""
    from scalebench.analysis.prediction_series import series_points

    def row(night, gpus, digest="sha256:a", profile="nightly", run_type="scheduled", role="measure"):
        return {"benchmark": "b", "host": "h", "precision": "bf16", "night": night, "run_id": f"{run_type}__{night}",
                "run_type": run_type, "profile": profile, "role": role, "status": "valid", "gpus": gpus,
                "per_device_batch": 16, "figure": {"images_per_s": 100.0 * gpus, "image_digest": digest, "timing": {}}}

    rows = [row(f"2026-11-0{i}", g) for i in (1, 2, 3) for g in (1, 2)]
    rows += [row("2026-11-04", 4, profile="full"), row("2026-11-05", 4, digest="sha256:new", run_type="manual"),
             row("2026-11-05", 4, role="rerun"), row("2026-11-05", 1, role="probe")]
    [(key, points)] = series_points(rows).items()
    assert key == ("b", "h", "bf16") and sorted({p.night for p in points}) == ["2026-11-01", "2026-11-02", "2026-11-03"]
    assert {p.total for p in points} == {1, 2}
    rows.append(row("2026-11-06", 1, digest="sha256:new"))
    [points] = series_points(rows).values()
    assert [p.night for p in points] == ["2026-11-06"]
