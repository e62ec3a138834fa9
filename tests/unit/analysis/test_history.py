"""Hand-made nightly histories with known answers: a scaling regression told apart from a compute
regression, a fingerprint change that restarts the baseline, reruns that confirm or clear a flag,
the host's night factor, and the physical plausibility checks."""
import datetime as dt
import random
import re
import statistics

import pytest

from scalebench.analysis.history import build_series, diagnose
from scalebench.analysis.regress import (EFFICIENCY, NIGHT_FACTOR, Gates, Series, SeriesKey, fingerprint_change, judge,
                                night_factors)
from scalebench.report.model import Options
from scalebench.report.build import build
from tests.support.samples import sample_benchmark

D0 = dt.date(2026, 10, 1)
TORCH = {"image_digest": "sha256:" + "a" * 64, "framework": "pytorch", "framework_version": "2.5.1", "driver": "550.54"}


def cell(bench, night, gpus, train_s, *, epochs=1, repeat=1, role="measure", fingerprint=None, host="local",
         precision=0.8):
    key = f"{bench}-{night}-{gpus}-{epochs}-{repeat}-{role}"
    return {"key": key, "dag_id": f"scalebench_{bench}", "run_id": f"scheduled__{night}", "run_type": "scheduled",
            "benchmark": bench, "host": host, "gpus": gpus, "epochs": epochs, "repeat": repeat, "profile": "nightly",
            "precision": "bf16",
            "seed": 0, "scaling_mode": "weak", "per_device_batch": 32, "global_batch": 32 * gpus,
            "label": key, "night": night, "role": role, "rerun_of": None, "status": "valid", "reason": None,
            "figure": {"attempt": 1, "train_s": train_s, "images_per_s": 32 * gpus * 100 / train_s,
                       "metrics": {"precision": precision}, "image_digest": "sha256:x", "config_sha": "c" * 64,
                       "timing": {}, "fingerprint": fingerprint or TORCH}}


def nights_of(n):
    return [(D0 + dt.timedelta(days=i)).isoformat() for i in range(n)]


def study(bench, nights, rng, *, t1=100.0, eff=(1.0, 0.9, 0.85, 0.8), slow=lambda i, g: 1.0, cv=0.01, **kw):
    """One benchmark's cells at 1-4 GPUs: T(n) = T(1) / (n eff(n)), times `slow`, with noise."""
    out = []
    for i, night in enumerate(nights):
        for g in (1, 2, 3, 4):
            t = t1 / (g * eff[g - 1]) * slow(i, g) * (1 + rng.gauss(0, cv))
            out.append(cell(bench, night, g, t, **kw))
    return out


def tonight_of(cells, night, gates=Gates()):
    return [j for s in build_series(cells, {}, gates) for j in judge(s, gates) if j.night.isoformat() == night]


def test_a_communication_regression_is_named_a_scaling_regression():
    nights = nights_of(25)
    rng = random.Random(1)
    # from night 23 the 4-GPU step needs 17 % more time: 1 GPU unchanged, 4-GPU efficiency 0.80 -> ~0.68
    cells = study("b", nights, rng, slow=lambda i, g: 1.17 if i >= 23 and g == 4 else 1.0)
    js = tonight_of(cells, nights[24])
    eff4 = next(j for j in js if j.key.metric == EFFICIENCY and j.key.gpus == 4)
    assert eff4.alert and eff4.baseline == pytest.approx(0.80, abs=0.01) and eff4.value == pytest.approx(0.684, abs=0.015)
    assert not any(j.alert for j in js if j.key.metric == EFFICIENCY and j.key.gpus in (2, 3))
    [line] = diagnose(js)
    assert line.startswith("b: scaling regression (communication or topology): the 1-GPU throughput is unchanged")
    assert "4 GPUs efficiency fell from 0.80 to 0.6" in line


def test_everything_slower_is_a_compute_regression_with_unchanged_scaling():
    nights = nights_of(25)
    cells = study("b", nights, random.Random(2), slow=lambda i, g: 1.10 if i >= 23 else 1.0)
    js = tonight_of(cells, nights[24])
    assert not any(j.flagged for j in js if j.key.metric == EFFICIENCY)
    assert all(j.alert for j in js if j.key.metric == "images_per_s")
    [line] = diagnose(js)
    assert line.startswith("b: compute regression: every GPU count is slower (by ")
    assert 8 <= int(line.split("(by ")[1].split("%")[0]) <= 11  # 1/1.1: 9 % less throughput, give or take noise
    assert line.endswith("and the scaling efficiency is unchanged.")


IMAGE_A = {**TORCH, "image": "scalebench/torch:a"}
IMAGE_B = {**TORCH, "image": "scalebench/torch:b", "image_digest": "sha256:" + "b" * 64, "framework_version": "2.6.0"}
KEY2 = SeriesKey("b", 4, "images_per_s", "nightly", "local", "weak", "", "bf16")


def image_step(factor, *, new=IMAGE_B, cv=0.02, seed=3, before=25, after=5):
    """One benchmark at 1-4 GPUs (CV 2 %): image A for `before` nights, then image `new` whose step
    takes `factor` times as long (1.12 / 0.88 of the throughput: factor 1 / 0.88 and 1 / 1.12)."""
    nights = nights_of(before + after)
    rng = random.Random(seed)
    return (study("b", nights[:before], rng, cv=cv, fingerprint=IMAGE_A)
            + study("b", nights[before:], rng, cv=cv, slow=lambda i, g: factor, fingerprint=new))


def judged_at_4(cells, **kw):
    return judge(next(s for s in build_series(cells, {}) if s.key == KEY2), **kw)


def test_an_image_12_percent_slower_is_judged_against_the_old_baseline_and_alerts_naming_the_image():
    js = judged_at_4(image_step(1 / 0.88))
    first, second = js[25], js[26]  # nights 26 and 27
    assert first.changed_with is None and first.baseline == pytest.approx(js[24].baseline, rel=0.03)
    assert first.flagged and not first.alert and first.verdict == "inconclusive"
    assert first.suspect.kind == "image" and first.suspect.previous_image == "scalebench/torch:a"
    assert second.alert and second.verdict == "regression (confirmed)"
    assert second.line().startswith("b 4 GPUs bf16 images_per_s: regressed with image scalebench/torch:b (was "
                                    "scalebench/torch:a), framework version 2.5.1 -> 2.6.0: ")
    assert 0.08 < second.worse_by < 0.16
    # the slower level never becomes the baseline: later nights keep alerting against image A's
    assert all(j.alert for j in js[27:]) and js[29].baseline == pytest.approx(js[24].baseline, rel=0.03)


@pytest.mark.parametrize("factor,verdict", [(1.0, "no effect"), (0.88, "improvement")])
def test_an_image_with_no_effect_or_a_12_percent_improvement_never_alerts(factor, verdict):
    for seed in range(5):
        js = judged_at_4(image_step(factor, seed=seed))
        assert not any(j.alert for j in js), [j.line() for j in js if j.alert]
        assert js[25].suspect is not None and js[25].changed_with is None
        if verdict == "no effect":
            assert js[25].verdict == verdict
        else:  # one better night restarts nothing: the next night confirms it, then the baseline restarts
            assert (js[25].verdict, js[25].note) == ("inconclusive", "improved: to be confirmed by the next night")
            assert js[26].verdict == "improvement" and js[26].baseline == pytest.approx(js[24].baseline, rel=0.03)
            assert [j.kind for j in js[27:30]] == ["building baseline"] * 3  # two nights of the new level, three to go


def test_one_lucky_night_after_an_image_change_restarts_no_baseline():
    """A new image with no effect whose first night happens to look 12 % better: the next night is
    back at the old level, so the old baseline stands and both nights are judged against it."""
    cells = image_step(1.0, seed=3)
    s = next(s for s in build_series(cells, {}) if s.key == KEY2)
    s.points[25] = (s.points[25][0], s.points[25][1] / 0.88)  # images/s: 12 % more
    js = judge(s)
    assert js[25].verdict == "inconclusive" and js[26].verdict == "no effect"
    assert js[27].kind != "building baseline" and js[27].baseline == pytest.approx(js[24].baseline, rel=0.03)


IMAGE_C = {**TORCH, "image": "scalebench/torch:c", "image_digest": "sha256:" + "c" * 64, "framework_version": "2.6.1"}


def a_b_c(c_factor: float, b_factor: float = 1 / 0.9, seed: int = 3) -> list:
    """Image A for 25 nights, B slower for 5 (a confirmed regression), then C; factors of A's step time."""
    nights = nights_of(35)
    rng = random.Random(seed)
    return (study("b", nights[:25], rng, cv=0.02, fingerprint=IMAGE_A)
            + study("b", nights[25:30], rng, cv=0.02, slow=lambda i, g: b_factor, fingerprint=IMAGE_B)
            + study("b", nights[30:], rng, cv=0.02, slow=lambda i, g: c_factor, fingerprint=IMAGE_C))


def test_a_fix_is_reported_when_it_is_confirmed_and_the_baseline_is_the_one_before_the_regression():
    js = judged_at_4(a_b_c(1.0))
    assert any(j.alert and j.verdict == "regression (confirmed)" for j in js[25:30])
    first, c = js[30], js[31]  # C's first night is back within the gates; the next confirms it, as for a regression
    assert first.verdict == "back, to be confirmed" and not first.alert and first.news
    assert c.verdict == "regression fixed" and not c.alert and c.news
    assert c.note == ("regression ended with image scalebench/torch:c (was scalebench/torch:b), framework version "
                      "2.6.0 -> 2.6.1 (image scalebench/torch:b (was scalebench/torch:a), framework version 2.5.1 -> "
                      "2.6.0's regression fixed)")
    assert c.baseline == pytest.approx(js[24].baseline, rel=0.03)  # A's level, not B's
    assert not any(j.alert for j in js[32:]) and js[32].verdict is None


def test_the_fix_is_said_once_in_changes_tonight_and_to_the_alert_channel():
    from scalebench.core.config.alerts import AlertConfig
    from scalebench.report.alert_messages import fixed_message
    from scalebench.report.figures import changes_tonight

    cells = a_b_c(1.0)
    nights = sorted({c["night"] for c in cells})
    tonight = tonight_of(cells, nights[31])
    [change] = changes_tonight(tonight, lambda c: None)
    assert change["verdict"] == "regression fixed" and change["change"].startswith("image scalebench/torch:c")
    assert all("regression ended with image scalebench/torch:c" in n for n in change["numbers"])
    fixed = [j.line() for j in tonight if j.verdict == "regression fixed" and j.news]
    assert fixed and not changes_tonight(tonight_of(cells, nights[32]), lambda c: None)  # said once
    doc = fixed_message(nights[31], fixed, AlertConfig(notifier="webhook"))
    assert doc["kind"] == "fixed" and doc["text"].startswith(f"scalebench: {len(fixed)} regression(s) ended")


def test_the_fix_is_a_mark_of_its_first_night_on_the_history_page():
    from scalebench.report.summary import marks_of

    cells = a_b_c(1.0)
    nights = sorted({c["night"] for c in cells})
    marks = marks_of(build([c for c in cells if c["night"] <= nights[31]], nights[31], Options(), []))
    fixed = {key: [m["text"] for m in ms if m["kind"] == "fixed"] for key, ms in marks.items()}
    assert fixed[("b", 4, "bf16")] and all("regression ended with image scalebench/torch:c" in t
                                            for t in fixed[("b", 4, "bf16")])
    later = marks_of(build([c for c in cells if c["night"] <= nights[32]], nights[32], Options(), []))
    assert not any(m["kind"] == "fixed" for ms in later.values() for m in ms)  # once


def test_a_partial_fix_says_how_far_it_got_and_the_regression_goes_on():
    """B at 80 % of A's throughput, C at 90 %: C is 12.5 % faster than B and still 10 % short of A.
    B's level does not become the baseline (the old rule restarted it there through C's
    "improvement" against B)."""
    js = judged_at_4(a_b_c(1 / 0.9, b_factor=1 / 0.8))
    assert js[30].verdict == "inconclusive" and js[30].flagged  # no A/B: C's second night confirms
    c = js[31]
    assert c.verdict == "partly fixed" and c.flagged and c.news, c.line()
    assert c.note.startswith("partly fixed: image scalebench/torch:c (was scalebench/torch:b)")
    assert " % better than image scalebench/torch:b" in c.note and "% short of the level before it" in c.note
    assert c.baseline == pytest.approx(js[24].baseline, rel=0.03)
    assert all(j.alert and j.blamed.text.startswith("image scalebench/torch:b") for j in js[31:])  # B's regression goes on


def test_a_gpu_model_change_restarts_the_baseline_and_says_what_changed():
    js = judged_at_4(image_step(1 / 0.88, new={**IMAGE_A, "gpu_model": "NVIDIA H200"}))
    first = js[25]
    assert first.changed_with == "gpu model unknown -> NVIDIA H200" and first.suspect is None
    assert "baseline restarted" in first.line() and first.baseline == pytest.approx(js[24].value)
    assert [j.kind for j in js[26:30]] == ["building baseline"] * 4 and not any(j.alert for j in js)


def test_a_fleet_setting_puts_the_driver_under_test():
    from types import SimpleNamespace

    from scalebench.analysis.regress import gates_for

    cells = image_step(1 / 0.88, new={**IMAGE_A, "driver": "560.1"})
    assert judged_at_4(cells)[25].changed_with == "driver 550.54 -> 560.1"  # the default: an environment change
    js = judged_at_4(cells, gates=gates_for(SimpleNamespace(driver_under_test=True)))
    assert js[25].suspect.kind == "image" and js[25].suspect.text == "driver 550.54 -> 560.1"
    assert js[26].alert and js[26].line().startswith("b 4 GPUs bf16 images_per_s: regressed with driver 550.54 -> 560.1")


def test_a_new_tag_of_the_same_repository_is_the_same_series_judged_as_a_change():
    from scalebench.report.model import Options

    bench = sample_benchmark("b")
    opts = Options(benchmarks={"b": bench.model_copy(update={"images": {"gpu": "scalebench/torch:a"}})})
    cells = image_step(1 / 0.88)
    series = [s for s in build_series(cells, opts.lineage()) if s.key.metric == "images_per_s" and s.key.gpus == 4]
    assert len(series) == 1 and series[0].key.image_lineage == "scalebench/torch"
    # the config moved on to tag b: still the same series, and the change is judged
    moved = Options(benchmarks={"b": bench.model_copy(update={"images": {"gpu": "scalebench/torch:b"}})})
    assert moved.lineage() == opts.lineage()
    assert judge(series[0])[26].verdict == "regression (confirmed)"


def test_a_changed_plan_is_judged_and_reported_but_alerts_only_where_the_config_asks():
    """A redefined profile (here: more steps, so 20 % fewer images/s) changes config_sha, not the system."""
    nights = nights_of(30)
    rng = random.Random(5)
    cells = study("b", nights[:20], rng) + study("b", nights[20:], rng, slow=lambda i, g: 1.2)
    for c in cells[20 * 4:]:
        c["figure"]["config_sha"] = "d" * 64
    key = SeriesKey("b", 2, "images_per_s", "nightly", "local", "weak", "", "bf16")
    s = next(s for s in build_series(cells, {}) if s.key == key)
    js = judge(s)
    assert js[20].suspect.kind == "config" and js[20].suspect.text == f"config sha {'c' * 19} -> {'d' * 19}"
    assert js[21].verdict == "regression (confirmed)" and not any(j.alert for j in js)
    assert any(j.alert for j in judge(s, config_alerts=True))


def test_an_image_shift_acknowledges_the_new_image_from_its_first_night():
    from scalebench.analysis.regress import Shift

    cells = image_step(1 / 0.88)
    s = next(s for s in build_series(cells, {}) if s.key == KEY2)
    shift = Shift("b", D0, "torch 2.6: slower kernels, accepted", image="scalebench/torch:b")
    js = judge(s, shifts=[shift])
    assert js[0].night == D0 + dt.timedelta(days=25) and not any(j.alert for j in js)
    assert any(j.alert for j in judge(s, shifts=[Shift("b", D0, "other", image="scalebench/torch:c")]))


def test_an_ab_of_the_previous_image_confirms_an_image_regression_on_its_first_night():
    cells = image_step(1 / 0.88, after=1)
    s = next(s for s in build_series(cells, {}) if s.key == KEY2)
    night = s.points[-1][0]
    rng = random.Random(9)
    level = statistics.median(v for _, v in s.points[:25])
    s.previous[night] = [level * 0.9 * (1 + rng.gauss(0, 0.02)) for _ in range(5)]  # a bad night for the host:
    s.reruns[night] = [level * 0.9 * 0.88 * (1 + rng.gauss(0, 0.02)) for _ in range(5)]  # both arms 10 % down
    s.host = "gpu-node-1"
    j = judge(s)[-1]
    assert j.alert and j.verdict == "regression (confirmed)" and j.ab.verdict == "worse"
    assert re.fullmatch(r"image scalebench/torch:b 1\d\.\d % slower than image scalebench/torch:a \(97\.5 % interval "
                        r"\d+\.\d\.\.\d+\.\d %\) tonight on gpu-node-1 \(p = 0\.00\d+, 5 \+ 5 cells\)", j.ab.line()), j.ab.line()
    # the same A/B with no difference between the images clears the flag: the host had a bad night
    s.reruns[night] = [level * 0.9 * (1 + rng.gauss(0, 0.02)) for _ in range(5)]
    j = judge(s)[-1]
    assert not j.alert and not j.flagged and j.ab.verdict == "same" and j.verdict == "no effect"


def test_fingerprint_change_lists_each_field_and_ignores_unknown_history():
    assert fingerprint_change(None, TORCH) is None and fingerprint_change({}, TORCH) is None
    assert fingerprint_change(TORCH, dict(TORCH)) is None
    assert fingerprint_change(TORCH, {**TORCH, "driver": "560.1", "gpu_model": "H100"}) == \
        "driver 550.54 -> 560.1, gpu model unknown -> H100"
    # an image reference is compared only where both fingerprints carry one (older history has none)
    assert fingerprint_change(TORCH, IMAGE_A) is None
    assert fingerprint_change(IMAGE_A, IMAGE_B) == "image scalebench/torch:b (was scalebench/torch:a), framework version 2.5.1 -> 2.6.0"


def series_with_reruns(tonight, reruns, n=20, seed=4):
    rng = random.Random(seed)
    pts = [(D0 + dt.timedelta(days=i), 1000 * (1 + rng.gauss(0, 0.02))) for i in range(n)]
    pts.append((D0 + dt.timedelta(days=n), tonight))
    return Series(SeriesKey("b", 2, "images_per_s"), pts, reruns={D0 + dt.timedelta(days=n): reruns})


def test_reruns_confirm_a_regression_the_same_night():
    j = judge(series_with_reruns(850, [860, 845, 855]))[-1]
    assert j.flagged and j.alert and j.confirmed_by_reruns is True and j.rerun_p < 0.01
    assert "reruns 860, 845, 855: confirmed (Mann-Whitney U p = " in j.line()


def test_reruns_at_the_usual_level_clear_the_flag_and_the_night_joins_the_baseline():
    s = series_with_reruns(850, [1003, 992, 1010])
    j = judge(s)[-1]
    assert not j.flagged and not j.alert and j.confirmed_by_reruns is False and "cleared" in j.line()
    s.points.append((D0 + dt.timedelta(days=21), 860))  # a flag the next night starts a new streak of one
    assert not judge(s)[-1].alert


def test_reruns_that_show_neither_the_step_nor_equivalence_leave_the_flag_to_the_next_night():
    s = series_with_reruns(850, [950, 1000, 930])
    j = judge(s)[-1]
    assert j.flagged and not j.alert and j.confirmed_by_reruns is None and j.rerun.verdict == "undecided"
    assert re.search(r"reruns 950, 1000, 930: undecided \(Mann-Whitney U p = 0\.0\d+, 90 % interval "
                     r"\+0\.\d\.\.\+7\.\d% worse, not inside ±5 %\): the next night decides", j.line()), j.line()
    s.points.append((D0 + dt.timedelta(days=21), 852))
    assert judge(s)[-1].alert  # the second flagged night confirms, as without reruns


@pytest.mark.parametrize("cv, step, verdict, bound", [
    (0.10, 0.10, "cleared", ("<=", 0.05)),  # a real 10 % step is (almost) never cleared, even at CV 10 %
    (0.05, 0.10, "cleared", ("<=", 0.05)),
    (0.02, 0.05, "cleared", ("<=", 0.05 + 0.015)),  # at the margin itself: the test's 5 % (+ 3 simulation SE)
    (0.02, 0.00, "cleared", (">=", 0.80)),   # an unlucky cell among quiet nights is cleared
    (0.05, 0.10, "undecided", ("between", 0.25, 0.35)),  # what the rule before cleared; now the next night decides
])
def test_reruns_clear_a_flag_only_by_equivalence_simulated(cv, step, verdict, bound):
    """3 reruns against 20 baseline nights, normal noise at the cell's CV, 1000 draws."""
    from scalebench.analysis.regress import reruns_confirm

    rng, runs = random.Random(7), 1000
    got = sum(reruns_confirm([1000 * (1 - step) * (1 + rng.gauss(0, cv)) for _ in range(3)],
                             [1000 * (1 + rng.gauss(0, cv)) for _ in range(20)], +1, Gates()).verdict == verdict
              for _ in range(runs)) / runs
    low, high = {"<=": (0.0, bound[1]), ">=": (bound[1], 1.0), "between": bound[1:]}[bound[0]]
    assert low <= got <= high, got


def test_without_reruns_the_next_night_confirms_as_before():
    s = series_with_reruns(850, [])
    assert judge(s)[-1].flagged and not judge(s)[-1].alert
    s.points.append((D0 + dt.timedelta(days=21), 852))
    assert judge(s)[-1].alert


def test_reruns_never_become_nights_of_the_baseline():
    nights = nights_of(22)
    cells = study("b", nights, random.Random(5))
    cells += [cell("b", nights[21], 2, 50.0 * 3, repeat=r, role="rerun") for r in (1, 2, 3)]  # much slower reruns
    [s] = [s for s in build_series(cells, {}) if s.key.metric == "images_per_s" and s.key.gpus == 2]
    assert len(s.points) == 22 and len(s.reruns[dt.date.fromisoformat(nights[21])]) == 3
    rep = build(cells, nights[21], Options(), [])
    assert rep.rows[0].cells == 4  # the study's table: measuring cells only


def test_the_night_factor_divides_out_a_bad_night_for_the_whole_host():
    nights = nights_of(25)
    rng = random.Random(6)
    bad = 22  # every benchmark on the host 30 % slower that night
    cells = []
    for b in ("a", "b", "c"):
        cells += study(b, nights, rng, slow=lambda i, g: 1.3 if i == bad else 1.0)
    js = tonight_of(cells, nights[bad])
    tput = [j for j in js if j.key.metric == "images_per_s"]
    assert len(tput) == 12 and all(j.factor == pytest.approx(1 / 1.3, abs=0.03) for j in tput)
    assert not any(j.flagged for j in tput)
    host = [j for j in js if j.key.metric == NIGHT_FACTOR]
    assert len(host) == 1 and host[0].flagged and not host[0].alert  # one bad night: flagged, not an alert
    # a slowdown of the whole host that stays is still an alert, on the host's own series
    cells = []
    for b in ("a", "b", "c"):
        cells += study(b, nights, rng, slow=lambda i, g: 1.3 if i >= bad else 1.0)
    js = tonight_of(cells, nights[bad + 1])
    assert [j.key.benchmark for j in js if j.alert] == ["host local"]


def test_night_factors_are_leave_one_out():
    days = [D0 + dt.timedelta(days=i) for i in range(10)]
    values = {name: {d: 100.0 for d in days} for name in ("a", "b", "c", "d")}
    values["a"][days[-1]] = 50.0  # only 'a' regressed: its own factor stays 1
    f = night_factors(values, window=5)
    assert f["a"][days[-1]] == 1.0 and f["b"][days[-1]] == 1.0
    assert days[2] not in f["a"]  # fewer than 3 nights before it: no factor
    # a benchmark's own GPU counts are not its peers: with a and b one benchmark, b has 2 peers (< 3)
    f = night_factors(values, window=5, groups={"a": "ab", "b": "ab", "c": "c", "d": "d"})
    assert f["b"] == {} and f["c"][days[-1]] == 1.0


def test_implausible_figures_are_flagged_suspect_and_left_out_of_the_average():
    from scalebench.core.config import ReferenceAccuracy

    night = "2026-10-01"
    cells = [cell("b", night, 1, 100.0), cell("b", night, 2, 45.0), cell("b", night, 4, 27.0, precision=0.3)]
    ref = ReferenceAccuracy(metric="precision", by_global_batch={32: 0.8, 128: 0.78}, tolerance=0.1)
    bench = sample_benchmark("b", {"nightly": {"reference_accuracy": ref.model_dump()}})
    rep = build(cells, night, Options(benchmarks={"b": bench}, expected=[]), [])
    [row] = rep.rows
    assert sorted(row.suspect) == [2, 4]
    assert row.suspect[2] == ["efficiency 1.11 is above 1 (faster than linear scaling)"]
    assert row.suspect[4] == ["precision 0.300 is far from the reference 0.780 (±0.1) at global batch 128"]
    assert set(rep.average) == {1}  # suspect GPU counts never make the average
    from scalebench.report.render import markdown

    md = markdown(rep)
    assert "(suspect)" in md and "- b (bf16) at 2 GPUs: efficiency 1.11 is above 1" in md


def test_grouped_night_factors_give_each_benchmark_one_voice_and_a_neutral_third_for_two():
    days = [D0 + dt.timedelta(days=i) for i in range(10)]
    values = {f"p{g}": {d: 100.0 for d in days} for g in range(4)} | {"q": {d: 100.0 for d in days},
                                                                      "me": {d: 100.0 for d in days}}
    groups = {"p0": "p", "p1": "p", "p2": "p", "p3": "p", "q": "q", "me": "me"}
    for g in range(4):
        values[f"p{g}"][days[-1]] = 120.0  # benchmark p alone got 20 % faster (a change of its own)
    f = night_factors(values, window=5, groups=groups, by_group=True, only=["me"])
    # voices p (1.2) and q (1.0) and the neutral 1.0: the median is 1.0, p's four figures do not outvote q
    assert f["me"][days[-1]] == 1.0
    # by figures, p's four GPU counts make the median 1.2: "me" would look 17 % slower
    assert night_factors(values, window=5, groups=groups, only=["me"])["me"][days[-1]] == pytest.approx(1.2)
    # a whole-host slow night moves every voice: the factor follows it
    for name in ("p0", "p1", "p2", "p3", "q"):
        values[name][days[-2]] = 70.0
    assert night_factors(values, window=5, groups=groups, by_group=True, only=["me"])["me"][days[-2]] == 0.7


def test_the_probe_is_the_factor_where_it_ran_and_a_restart_keeps_a_peer_change_out():
    days = [D0 + dt.timedelta(days=i) for i in range(12)]
    values = {"me": {d: 100.0 for d in days}, "peer": {d: 100.0 for d in days},
              "probe": {d: 50.0 for d in days}}
    values["probe"][days[-1]] = 45.0  # the host was 10 % slow tonight: the probe says so
    f = night_factors(values, window=5, only=["me"], probe="probe", by_group=True)
    assert f["me"][days[-1]] == pytest.approx(0.9)
    del values["probe"][days[-2]]  # no probe that night: one other benchmark is not the host, no factor
    assert days[-2] not in night_factors(values, window=5, only=["me"], probe="probe", by_group=True)["me"]
    # two peers on one stack get a new framework image from night 8 on, 30 % faster: without the
    # restart their ratios outvote the third peer and read as the host's night
    values = {name: {d: 100.0 for d in days} for name in ("me", "p1", "p2", "other")}
    for name in ("p1", "p2"):
        for d in days[8:]:
            values[name][d] = 130.0
    plain = night_factors(values, window=5, only=["me"], by_group=True)
    assert plain["me"][days[9]] == pytest.approx(1.3)  # "me" would look 23 % slower
    new_image = {"p1": {days[8]}, "p2": {days[8]}}
    restarted = night_factors(values, window=5, only=["me"], by_group=True, restarts=new_image)
    assert days[9] not in restarted["me"]  # their ratios start again: one voice left, no factor
    assert restarted["me"][days[11]] == 1.0  # three nights on the new image: they are voices again


def test_the_host_probe_cells_make_the_factor_for_a_benchmark_with_one_peer():
    """Three GPU hosts for six benchmarks: a host has two benchmarks. Tonight the host is 30 % slow
    and the peer benchmark is 25 % faster with a new image: the probe tells the host's night."""
    nights = nights_of(25)
    rng = random.Random(8)
    bad = 22
    newer = {**TORCH, "image_digest": "sha256:" + "c" * 64}
    cells = study("a", nights, rng, slow=lambda i, g: 1.3 if i == bad else 1.0)
    cells += study("b", nights[:bad], rng) + study("b", nights[bad:], rng, fingerprint=newer,
                                                    slow=lambda i, g: (1.3 if i == 0 else 1.0) / 1.25)
    for i, night in enumerate(nights):
        for r in range(4):
            c = cell("unet", night, 1, 50.0 * (1.3 if i == bad else 1.0) * (1 + rng.gauss(0, 0.01)), repeat=r + 1,
                     role="probe")
            cells.append(c)
    js = [j for j in tonight_of(cells, nights[bad]) if j.key.benchmark == "a" and j.key.metric == "images_per_s"]
    assert len(js) == 4 and all(j.factor == pytest.approx(1 / 1.3, abs=0.03) for j in js)
    assert not any(j.flagged for j in js)
    # the probe never becomes a series of its own benchmark: it is not a row, not a figure
    assert not [s for s in build_series(cells, {}) if s.key.benchmark == "unet"]


def test_a_regression_that_ends_by_itself_is_said_once_in_the_report_and_marked_on_the_history_page():
    from scalebench.report.render import markdown
    from scalebench.report.summary import marks_of

    nights = nights_of(35)
    rng = random.Random(3)
    cells = (study("b", nights[:25], rng, cv=0.02, fingerprint=IMAGE_A)
             + study("b", nights[25:29], rng, cv=0.02, slow=lambda i, g: 1 / 0.9, fingerprint=IMAGE_B)
             + study("b", nights[29:], rng, cv=0.02, fingerprint=IMAGE_B))  # back, no change
    js = judged_at_4(cells)
    [ended] = [j for j in js if j.kind == "regression ended by itself"]
    night = ended.night.isoformat()
    rep = build([c for c in cells if c["night"] <= night], night, Options(), [])
    mine = [f for f in rep.fixed if f["line"].startswith("b 4 GPUs bf16 images_per_s")]
    assert [f["verdict"] for f in mine] == ["regression ended by itself"]
    assert "- ENDED BY ITSELF: b 4 GPUs bf16 images_per_s" in markdown(rep)
    assert any(m["kind"] == "fixed" for m in marks_of(rep)[("b", 4, "bf16")])
    assert any(d["gpus"] == 4 and d["key"] == "image:scalebench/torch:b" for d in rep.fixed_details)


def test_a_still_regressed_night_alerts_in_the_regressed_images_group_with_its_package_diff():
    """C no better than B: the night's alert names B (its group) and B's packages against A's, not C's."""
    cells = a_b_c(1 / 0.9)
    nights = sorted({c["night"] for c in cells})
    torch = {"sha256:" + "a" * 64: "2.5.1", "sha256:" + "b" * 64: "2.6.0", "sha256:" + "c" * 64: "2.6.1"}
    rep = build([c for c in cells if c["night"] <= nights[31]], nights[31], Options(), [],
                packages=lambda digest: {"python": {"torch": torch[digest]}})
    [detail] = [d for d in rep.alert_details if d["gpus"] == 4 and d["metric"] == "images_per_s"]
    assert "still regressed: image scalebench/torch:c" in detail["line"]
    assert detail["suspect"]["new_image"] == "scalebench/torch:b"
    assert detail["suspect"]["what_changed"].startswith("torch 2.5.1 -> 2.6.0")
