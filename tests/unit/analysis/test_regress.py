import datetime as dt
import random

import pytest

from scalebench.analysis.regress import Gates, Series, SeriesKey, Shift, judge, load_shifts

KEY = SeriesKey("resnet50_keras_cifar10", 2, "images_per_s")
D0 = dt.date(2026, 10, 1)


def series(values, key=KEY):
    return Series(key, [(D0 + dt.timedelta(days=i), v) for i, v in enumerate(values)])


def noisy(n, cv, seed, level=1000.0):
    rng = random.Random(seed)
    return [level * (1 + rng.gauss(0, cv)) for _ in range(n)]


def alerts(js):
    return [j.night for j in js if j.alert]


def test_steady_noise_raises_no_alert():
    for seed in range(20):
        assert alerts(judge(series(noisy(60, 0.02, seed)))) == []


def test_a_true_10_percent_step_alerts_on_the_second_night():
    values = noisy(30, 0.02, 1) + [v * 0.9 for v in noisy(5, 0.02, 2)]
    js = judge(series(values))
    assert js[30].flagged and not js[30].alert  # first night: flagged, waits for confirmation
    assert js[31].alert
    assert js[31].worse_by == pytest.approx(0.10, abs=0.04)
    assert js[31].line().startswith("resnet50_keras_cifar10 2 GPUs images_per_s:")


def test_a_single_outlier_night_does_not_alert():
    values = noisy(30, 0.02, 3)
    values[20] *= 0.6
    js = judge(series(values))
    assert js[20].flagged and alerts(js) == []
    assert js[21].baseline == pytest.approx(js[19].baseline, rel=0.01)  # the median shrugs it off


def test_an_acknowledged_shift_restarts_the_baseline():
    values = noisy(30, 0.02, 4) + [v * 0.8 for v in noisy(20, 0.02, 5)]
    assert alerts(judge(series(values)))  # unacknowledged: alerts
    shift = Shift("resnet50_keras_cifar10", D0 + dt.timedelta(days=30), "new TF release", gpus=(2,))
    js = judge(series(values), shifts=[shift])
    assert alerts(js) == [] and js[0].night == D0 + dt.timedelta(days=30)
    other = SeriesKey("resnet50_keras_cifar10", 4, "images_per_s")
    assert alerts(judge(series(values, other), shifts=[shift]))  # the shift covers 2 GPUs only


def test_lower_is_better_metrics_flag_increases():
    values = noisy(30, 0.02, 6, level=100.0) + [v * 1.15 for v in noisy(3, 0.02, 7, level=100.0)]
    js = judge(series(values, SeriesKey("resnet50_keras_cifar10", 1, "train_s")))
    assert alerts(js) == [D0 + dt.timedelta(days=31), D0 + dt.timedelta(days=32)]


def test_both_gates_must_hold():
    quiet = [1000.0] * 20 + [940.0, 940.0]  # 6 % worse on a flat history: z is huge, magnitude holds
    assert alerts(judge(series(quiet))) == [D0 + dt.timedelta(days=21)]
    small = [1000.0] * 20 + [970.0, 970.0]  # 3 %: under the magnitude gate, however significant
    assert alerts(judge(series(small))) == []
    wild = noisy(40, 0.15, 8) + [800.0, 800.0]  # 20 % worse but inside the noise
    last = judge(series(wild))[-1]
    assert last.worse_by > 0.05 and last.z < Gates().z and not last.flagged


def test_shift_file_is_validated(tmp_path):
    f = tmp_path / "shifts.yaml"
    f.write_text("shifts:\n  - {benchmark: b, since: 2026-11-01, reason: upgrade, gpus: [2]}\n")
    assert load_shifts(f) == [Shift("b", dt.date(2026, 11, 1), "upgrade", (2,), None)]
    f.write_text("shifts:\n  - {benchmark: b, when: 2026-11-01}\n")
    from scalebench.core.config import ConfigError

    with pytest.raises(ConfigError, match=r"shifts.yaml: field 'shifts.0.since': required field missing"):
        load_shifts(f)
    assert load_shifts(tmp_path / "absent.yaml") == []


def test_a_flagged_night_joins_the_baseline_only_once_the_next_night_clears_it():
    import statistics

    steady = [119.0 - i for i in range(20)]                  # drifting down 119 -> 100: median 109.5
    js = judge(series(steady + [85.0, 108.0, 108.0]))
    assert js[20].flagged and not js[20].alert
    # the night after a flagged one is judged against the baseline without it (before: 85 had
    # joined it, pushing out 119, and the median was 108.5)
    assert js[21].baseline == statistics.median(steady) == 109.5
    assert not js[21].flagged
    # night 21 cleared night 20: both have joined the trailing 20-night baseline of night 22
    assert js[22].baseline == statistics.median((steady + [85.0, 108.0])[-20:]) == 108.0


def test_every_night_of_a_step_is_judged_against_the_level_before_it():
    """Flagged nights stay out of the baseline while they are unconfirmed, and confirmed ones for
    good, so a step neither widens its own baseline nor drags its median."""
    steady = [1019.0 - i for i in range(20)]
    js = judge(series(steady + [900.0] * 6))
    assert [j.flagged for j in js[20:]] == [True] * 6 and js[21].alert
    assert {j.baseline for j in js[20:]} == {1009.5}
