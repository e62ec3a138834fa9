"""Repeats from measured noise: a figure's CV after the night factor, looked up in the shipped
detection-power table, says whether the configured repeats and reruns meet the goals and what
the cheapest setting that does is."""
import datetime as dt
import random

import pytest

from scalebench.analysis.noise import MIN_NIGHTS, judge_noise, lookup, power_table, residual_cv
from scalebench.analysis.regress import Series, SeriesKey

D0 = dt.date(2026, 11, 1)


def series(cv: float, nights: int, gpus: int = 4, host: str = "gpu-node-1", bench: str = "b", seed: int = 0) -> Series:
    """Nights whose shared night factor is known and divided out, leaving `cv` of the figure's own noise."""
    rng = random.Random(seed)
    factors = {D0 + dt.timedelta(days=i): 1 + rng.gauss(0, 0.03) for i in range(nights)}
    points = [(d, 1000 * f * (1 + rng.gauss(0, cv))) for d, f in factors.items()]
    return Series(SeriesKey(bench, gpus, "images_per_s", host_class=host, precision="bf16"), points, factors=factors)


def test_the_table_is_generated_data_with_goals_and_every_setting():
    goals, rows, how = power_table()
    assert goals == {"within_two": 0.95, "false_per_1000": 1.0} and how.startswith("bench/regressions.py --power-table")
    assert len({(r.cv, r.peers, r.repeats, r.reruns) for r in rows}) == len(rows) == 160
    # more repeats never leave a noisier figure after the factor (same CV and peers)
    for r in rows:
        more = [m for m in rows if (m.cv, m.peers, m.reruns) == (r.cv, r.peers, r.reruns) and m.repeats > r.repeats]
        assert all(m.residual_cv <= r.residual_cv + 1e-9 for m in more)


def test_the_night_factor_is_divided_out_before_the_cv():
    cv, nights = residual_cv(series(0.01, 30))
    assert nights == 30 and 0.006 < cv < 0.014  # the 3 % night noise is gone


@pytest.mark.parametrize("cv, meets", [(0.008, True), (0.035, False)])
def test_a_quiet_host_meets_the_goals_and_a_noisy_one_is_told_the_cheapest_setting_that_does(cv, meets):
    [v] = judge_noise([series(cv, 30, gpus=n, seed=n) for n in (4,)] + [series(0.005, 30, gpus=g, seed=g)
                                                                        for g in (1, 2, 3)], {"b": (3, 3)})
    assert v.figure == "4 GPUs bf16" and v.peers == 3 and v.nights == 30  # the noisiest of its four figures
    assert v.meets is meets
    assert v.cheapest is not None and v.cheapest.meets(power_table()[0])
    if meets:
        assert "meets the goals" in v.line() and v.cheapest.cells <= v.configured.cells
    else:
        assert "misses the goals" in v.line() and v.cheapest.cells > 3.3
        assert f"cheapest that meets them: {v.cheapest.setting()}" in v.line()


def test_too_little_history_or_none_says_so_and_beyond_the_table_says_no_setting_meets():
    few = judge_noise([series(0.01, MIN_NIGHTS - 1)], {"b": (3, 3), "other": (2, 5)})
    assert few[0].cv is None and "too little history" in few[0].line() and f"{MIN_NIGHTS - 1} nights" in few[0].line()
    assert few[1].benchmark == "other" and few[1].nights == 0 and "2 repeats + 5 reruns" in few[1].line()
    [wild] = judge_noise([series(0.2, 30)], {"b": (3, 3)})
    assert wild.table_cv is None and "no setting in it meets the goals" in wild.line()


def test_peers_and_reruns_round_down_to_the_tables_levels():
    assert lookup(0.01, peers=19, repeats=3, reruns=7)[1].peers == 4  # 19 peers: the 4-peer rows
    assert lookup(0.01, peers=25, repeats=9, reruns=7)[1].reruns == 5
    assert lookup(0.01, peers=25, repeats=9, reruns=7)[1].repeats == 4


def test_plan_prints_a_noise_line_per_benchmark_and_host_from_the_stored_nights(isolated_state, capsys):
    """A seeded store: 24 scheduled nights of ResNet50 on gpu-node-1 at 4 % cell noise."""
    from scalebench.cli import main
    from scalebench.core.cells import plan
    from scalebench.core.config import Configs
    from scalebench.store.results import Store
    from tests.support import CONFIGS
    from tests.support.samples import sample_contract

    configs = Configs(CONFIGS, CONFIGS / "fleet.gpu-example.yaml")
    bench, store, rng = configs.benchmark("resnet50_keras_cifar10"), Store(), random.Random(1)
    for i in range(24):
        night = (D0 + dt.timedelta(days=i)).isoformat()
        for c in plan(bench, configs.fleet, profile="nightly", run_id=f"scheduled__{night}", run_type="scheduled",
                      night=night, host=configs.fleet.host("gpu-node-1")):
            contract = sample_contract(c)
            contract["timing"]["images_per_s"] = 900.0 * c["gpus"] * (1 + rng.gauss(0, 0.04))
            store.record_attempt(c, 1, "valid", contract=contract)
    assert main(["--fleet", str(CONFIGS / "fleet.gpu-example.yaml"), "plan", "--profile", "nightly"]) == 0
    lines = [x for x in capsys.readouterr().out.splitlines() if x.startswith("noise: ")]
    [mine] = [x for x in lines if x.startswith("noise: resnet50_keras_cifar10 on gpu-node-1: noisiest figure")]
    assert "over 24 nights" in mine and "misses the goals" in mine, mine
    assert sum("too little history" in x for x in lines) == 5  # the benchmarks with no stored night
    print("\n".join(lines))
