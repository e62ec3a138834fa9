"""A regression's whole life through the state machine (scalebench.analysis.lifecycle): the
reviewer's reproductions, each over many seeded histories, and properties that hold on any
history. Per-night CV 2 %; an A/B of 5 + 5 cells on the night a new image arrives flagged."""
import datetime as dt
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scalebench.analysis.lifecycle import RECENT_NIGHTS
from scalebench.analysis.regress import classify_change, Gates, Series, SeriesKey, judge
from scalebench.core.verdicts import ENDED, FIXED, NOT_A_VERDICT, NO_BETTER, NO_EFFECT, PARTLY_FIXED, REGRESSION, VERDICTS

KEY = SeriesKey("b", 4, "images_per_s")
D0 = dt.date(2026, 10, 1)
G = Gates()


def fp(image: str) -> dict:
    return {"image": f"scalebench/torch:{image}", "image_digest": "sha256:" + image * 64}


def life(segments, seed: int, cv: float = 0.02, ab_on: tuple[int, ...] = (), nights: int = 36) -> Series:
    """One figure: `segments` [(from night, image, level)], nightly values with CV `cv`; on the
    nights `ab_on` an A/B of 5 + 5 cells of the previous and the new image (cell CV `cv`)."""
    rng = random.Random(seed)

    def at(t):
        return [s for s in segments if s[0] <= t][-1]

    points, prints, previous, reruns = [], {}, {}, {}
    for t in range(nights):
        d = D0 + dt.timedelta(days=t)
        _, image, level = at(t)
        points.append((d, 1000 * level * (1 + rng.gauss(0, cv))))
        prints[d] = fp(image)
        if t in ab_on:
            previous[d] = [1000 * at(t - 1)[2] * (1 + rng.gauss(0, cv)) for _ in range(5)]
            reruns[d] = [1000 * level * (1 + rng.gauss(0, cv)) for _ in range(5)]
    return Series(KEY, points, reruns, prints, previous=previous)


SEEDS = range(40)


def goes_on(js) -> bool:
    """A regression that lasts: every night regressed; a night alerts only when flagged, and a
    flagged night after a flagged one always does (after a quiet night between the two levels,
    the next flagged night is confirmed again, as at first)."""
    return all(j.state == "regressed" and (j.flagged or not j.alert) for j in js) and \
        all(j.alert for before, j in zip(js, js[1:]) if before.flagged and j.flagged)


@pytest.mark.parametrize("with_ab", [True, False])
def test_a_new_image_as_slow_as_the_regressed_one_is_not_the_fix(with_ab):
    """A for 20 nights, B 10 % slower for 4 (confirmed), then C just as slow: never "fixed"; C is
    "still regressed: no better than B", and every later alert still blames B."""
    for seed in SEEDS:
        js = judge(life([(0, "a", 1.0), (20, "b", 0.9), (24, "c", 0.9)], seed, ab_on=(24,) if with_ab else ()))
        kinds = [j.kind for j in js]
        assert FIXED not in kinds and js[21].state == "regressed", [j.line() for j in js[20:]]
        said = [j for j in js if j.kind == NO_BETTER]  # the A/B decides tonight where it could (5 pairs), else the next night
        decided = with_ab and js[24].ab.verdict != "unknown"
        assert len(said) == 1 and said[0].night == D0 + dt.timedelta(days=24 if decided else 25)
        assert "is no better than image scalebench/torch:b" in said[0].note and said[0].news
        assert all(j.state == "regressed" and j.blamed.new_image == "scalebench/torch:b" for j in js[26:])
        assert goes_on(js[26:])


def test_a_partial_fix_is_partly_fixed_never_fixed_and_the_regression_goes_on():
    """B 20 % slower, C 10 %: the A/B shows C better than B; the night says "partly fixed", the
    regression stays blamed on B and alerts on, and no later night calls it fixed."""
    for seed in SEEDS:
        js = judge(life([(0, "a", 1.0), (20, "b", 0.8), (24, "c", 0.9)], seed, ab_on=(24,)))
        assert js[24].kind == PARTLY_FIXED and js[24].alert == js[24].flagged, js[24].line()
        assert FIXED not in [j.kind for j in js] and all(j.state == "regressed" for j in js[25:])
        assert goes_on(js[25:]) and all(j.blamed.new_image == "scalebench/torch:b" for j in js[25:])


def test_a_regression_that_ends_by_itself_is_not_credited_to_the_next_image():
    """B 10 % slower for 4 nights, back at A's level with no change for 3, then a harmless C:
    "ended by itself (no change since B)", and C is "no effect", never a fix."""
    for seed in SEEDS:
        js = judge(life([(0, "a", 1.0), (20, "b", 0.9), (24, "b", 1.0), (27, "c", 1.0)], seed))
        [ended] = [j for j in js[20:] if j.kind == ENDED]
        assert ended.night in (D0 + dt.timedelta(days=25), D0 + dt.timedelta(days=26)), ended.line()
        assert ended.note.startswith("regression ended by itself (no change since image scalebench/torch:b")
        assert FIXED not in [j.kind for j in js] and NO_EFFECT in [j.kind for j in js[27:]]
        assert not any(j.alert for j in js[27:])


def test_a_full_fix_with_the_ab_on_its_first_night():
    """C back at A's level: "fixed" on the night its level is confirmed (the next night; the same
    night where a flagged first night brought an A/B that decided)."""
    for seed in SEEDS:
        js = judge(life([(0, "a", 1.0), (20, "b", 0.9), (24, "c", 1.0)], seed))
        [fixed] = [j for j in js if j.kind == FIXED]
        assert fixed.night == D0 + dt.timedelta(days=25) and fixed.ended.new_image == "scalebench/torch:b"
        assert not any(j.alert for j in js[24:])


def test_a_slip_back_within_a_week_blames_the_same_change():
    """Fixed by C, then slow again three nights later with no change: the regression names B again."""
    js = judge(life([(0, "a", 1.0), (20, "b", 0.9), (24, "c", 1.0), (28, "c", 0.9)], 1))
    again = [j for j in js[28:] if j.alert]
    assert again and again[0].blamed.new_image == "scalebench/torch:b", [j.line() for j in js[24:]]
    assert "its regression ended on" in again[0].note and (again[0].night - js[25].night).days <= RECENT_NIGHTS


def test_two_changes_on_consecutive_nights_blame_the_first():
    """B slower on night 20, C (no better) on night 21, no A/B: the regression is B's."""
    for seed in SEEDS:
        js = judge(life([(0, "a", 1.0), (20, "b", 0.9), (21, "c", 0.9)], seed))
        first = next(j for j in js[20:] if j.alert)
        assert first.blamed.new_image == "scalebench/torch:b", first.line()


# properties on any history: a few images at random levels, noise, A/B nights
HISTORIES = st.lists(st.tuples(st.integers(8, 34), st.sampled_from("bcdef"), st.floats(0.7, 1.2)), max_size=4)


@settings(max_examples=150, deadline=None)
@given(HISTORIES, st.integers(0, 10_000), st.sets(st.integers(8, 35), max_size=3), st.sampled_from([0.01, 0.02, 0.05]))
def test_what_a_night_says_holds_on_any_history(changes, seed, ab_on, cv):
    js = judge(life([(0, "a", 1.0), *sorted(changes)], seed, cv, tuple(ab_on)))
    for before, j in zip([None, *js], js):
        if j.kind == FIXED and (j.ab is None or j.ab.verdict == "unknown"):
            # never "fixed" over nights on a night as much worse as the magnitude gate; a decided
            # A/B is not vetoed by the night that made it run
            assert j.worse_by < G.magnitude, j.line()
        if j.kind in (FIXED, PARTLY_FIXED, NO_BETTER, ENDED):  # said only while a regression lasted
            assert before is not None and before.state == "regressed" and j.blamed == before.blamed
        if j.alert:
            assert j.state == "regressed" and VERDICTS[j.kind].alerts
        if before is not None and before.state == j.state == "regressed":  # its baseline is the one before it
            assert j.baseline == before.baseline
        assert (j.verdict is None) == (j.kind is None or j.kind in NOT_A_VERDICT)
        assert j.kind is None or j.kind in VERDICTS


def test_every_message_kind_is_declared_once_and_the_report_orders_every_verdict():
    from scalebench.report.figures import SEVERITY
    from scalebench.report.render import FIX_LABELS

    verdicts = [k for k in VERDICTS if k not in NOT_A_VERDICT]
    assert sorted(SEVERITY) == sorted(verdicts)
    assert {k for k, m in VERDICTS.items() if m.ends} == {FIXED, ENDED} and VERDICTS[REGRESSION].alerts
    assert set(FIX_LABELS) == {FIXED, ENDED, PARTLY_FIXED, NO_BETTER}


def test_a_change_that_makes_a_lasting_regression_worse_is_a_regression_of_its_own():
    """B 10 % slower, then C 20 % slower: C's nights regress against B's level too; the night
    blames C, so its alerts open C's group while B's stays open."""
    for seed in SEEDS:
        js = judge(life([(0, "a", 1.0), (20, "b", 0.9), (24, "c", 0.8)], seed, ab_on=(24,)))
        again = next(j for j in js[24:] if j.kind == REGRESSION and j.blamed.new_image == "scalebench/torch:c")
        assert again.night <= D0 + dt.timedelta(days=25)  # the A/B's night, or the next where it could not decide
        assert "% worse than image scalebench/torch:b" in again.note and again.alert
        assert all(j.blamed.new_image == "scalebench/torch:c" for j in js[26:])


# images that change often (issue: nightly images judged, never absorbed)
def series(levels, images, drivers=None, ab_on=(), cv=0.02, seed=0, previous_cells=None, pairs=5) -> Series:
    """A figure from per-night `levels`, `images` and `drivers`; on the nights `ab_on` an A/B of
    `previous_cells` + `pairs` cells of the night before's image and tonight's."""
    rng = random.Random(seed)
    points, prints, previous, reruns = [], {}, {}, {}
    for t, (level, image) in enumerate(zip(levels, images)):
        d = D0 + dt.timedelta(days=t)
        points.append((d, 1000 * level * (1 + rng.gauss(0, cv))))
        prints[d] = {**fp(image), "driver": (drivers or ["550"] * len(levels))[t]}
        if t in ab_on:
            previous[d] = [1000 * levels[t - 1] * (1 + rng.gauss(0, cv)) for _ in range(previous_cells or pairs)]
            reruns[d] = [1000 * level * (1 + rng.gauss(0, cv)) for _ in range(pairs)]
    return Series(KEY, points, reruns, prints, previous=previous)


def every_night(nights: int) -> list[str]:
    return [f"n{t}" for t in range(nights)]


@pytest.mark.parametrize("step_at", [3, 12])
def test_a_new_image_every_night_builds_a_baseline_and_its_step_is_named(step_at):
    """A new image every night from the start, one of them 10 % slower: the baseline is built
    across images (no night stays 'building' past min_history), the step is a regression blamed on
    its own image on its night (its A/B), and nothing alerts before it."""
    for seed in range(20):
        levels = [0.9 if t >= step_at else 1.0 for t in range(24)]
        # CV 1 %: the mechanics; false regressions with nightly images are the bench's count (bench/lifecycle.py)
        js = judge(series(levels, every_night(24), ab_on=range(1, 24), seed=seed, cv=0.01))
        assert all(j.state != "building" for j in js[G.min_history:]), [j.line() for j in js[:8]]
        assert js[step_at].kind == REGRESSION and js[step_at].blamed.new_image == f"scalebench/torch:n{step_at}"
        assert not any(j.alert for j in js[:step_at]) and all(j.state == "regressed" for j in js[step_at:])


@pytest.mark.parametrize("after", [1, 2, 4])
def test_an_image_regression_soon_after_a_driver_change_is_judged_by_its_ab(after):
    """A driver change restarts the baseline; image B 10 % slower `after` nights later is a regression
    named with B (its same-night A/B), never 'changed with image B; baseline restarted'."""
    for seed in range(20):
        n, b = 30, 20 + after
        levels = [1.0] * 20 + [0.95] * after + [0.855] * (n - b)
        images = ["a"] * b + ["b"] * (n - b)
        drivers = ["550"] * 20 + ["560"] * (n - 20)
        js = judge(series(levels, images, drivers, ab_on=(b,), seed=seed))
        assert js[20].kind == "baseline restarted" and js[b].changed_with is None
        assert js[b].kind == REGRESSION and js[b].blamed.new_image == "scalebench/torch:b", js[b].line()
        assert "judged by its same-night A/B" in js[b].note and js[b].alert


def test_a_change_on_a_short_baseline_without_an_ab_is_said_not_judged_and_wants_one():
    from scalebench.analysis.regress import wants_ab

    js = judge(series([1.0] * 4, ["a", "a", "b", "b"]))
    j = js[2]
    assert j.kind == "building baseline" and j.needs_ab and wants_ab(j) and j.baseline is None
    assert "not judged: no A/B ran and the baseline holds 2 of 5 nights" in j.line()  # line() on a building night


@pytest.mark.parametrize("later", [2, 4, 6])
def test_a_step_after_an_image_its_ab_cleared_names_no_change(later):
    """A harmless C (its A/B: same) then, `later` nights on, a 10 % step with no change: the
    regression names no change and says which came before it; no bisection target."""
    cleared = 0
    for seed in range(20):
        c, n = 24, 36
        levels = [1.0] * (c + later) + [0.9] * (n - c - later)
        js = judge(series(levels, ["a"] * c + ["c"] * (n - c), ab_on=(c,), seed=seed, pairs=8))  # the DAG's cap
        if js[c].ab.verdict != "same":
            continue  # an A/B that could not clear C: not this case
        cleared += 1
        assert js[c].kind == "no effect", js[c].line()
        first = next(j for j in js if j.kind == REGRESSION)
        assert first.blamed is None and first.night >= D0 + dt.timedelta(days=c + later), first.line()
        k = js.index(first)
        while js[k - 1].flagged:  # the held nights that the regression confirmed: the step began at the first
            k -= 1
        began = js[k].night
        assert (f"no change at the step ({began}); image scalebench/torch:c (was scalebench/torch:a) came "
                f"{(began - js[c].night).days} nights before it and its A/B said same") in first.note
    assert cleared >= 15


def test_a_step_the_night_after_a_change_no_ab_cleared_may_name_it():
    js = judge(series([1.0] * 24 + [0.9] * 6, ["a"] * 23 + ["c"] * 7, seed=3))
    first = next(j for j in js if j.kind == REGRESSION)
    assert first.blamed is not None and first.blamed.new_image == "scalebench/torch:c", first.line()


def test_a_rollback_to_the_exact_previous_image_is_fixed_by_its_ab_even_on_a_bad_night():
    """B 10 % slower, then image A again with an A/B that decides: 'regression fixed' on that
    night, never vetoed by the night's own value, never 'partly fixed' or 'ended by itself'."""
    for seed in range(40):
        levels, images = [1.0] * 20 + [0.9] * 4 + [1.0] * 8, ["a"] * 20 + ["b"] * 4 + ["a"] * 8
        s = series(levels, images, ab_on=(24,), seed=seed, cv=0.01)
        d = D0 + dt.timedelta(days=24)
        s.points[24] = (d, s.points[24][1] * 0.93)  # tonight's own night looks 7 % worse: what made the A/B run
        js = judge(s)
        kinds = [j.kind for j in js[20:]]
        assert js[24].kind == FIXED and PARTLY_FIXED not in kinds and ENDED not in kinds, js[24].line()
        assert "again the build first measured on 2026-10-01" in js[24].note


def test_a_partial_fix_that_then_comes_all_the_way_back_is_credited_fixed():
    from scalebench.analysis.lifecycle import Machine, Night, Regressed

    m, c = Machine(G, +1), classify_change(fp("b"), fp("c"))
    state = Regressed(base=(1000.0,) * 10, change=classify_change(fp("a"), fp("b")), level=(900.0,) * 3, partly=c)
    for t, v in enumerate([1001.0, 999.0]):
        state, move = m.step(state, Night(D0 + dt.timedelta(days=t), v, None, (), (), (), before=1000.0))
    assert move.verdict == FIXED and move.suspect == c and "judged partly fixed at first" in move.note


def test_an_ab_with_too_few_previous_cells_lets_the_new_cells_count_as_reruns():
    s = series([1.0] * 20 + [0.85] * 2, ["a"] * 20 + ["b"] * 2, ab_on=(20,), previous_cells=2, seed=1)
    j = judge(s)[20]
    assert j.ab is None and j.rerun is not None and j.confirmed_by_reruns, j.line()
    assert "A/B with 2 previous-image cell(s), fewer than 5: tonight's 5 new-image cells judged as reruns" in j.line()


def test_the_machine_step_is_pure():
    from scalebench.analysis.lifecycle import Machine, Night, Steady

    m = Machine(G, +1)
    state, night = Steady(base=(1000.0,) * 10), Night(D0, 880.0, None, (), (), (), before=1000.0)
    assert m.step(state, night) == m.step(state, night) and m.state == type(m.state)()


def test_odd_fingerprints_are_judged_and_what_was_assumed_is_said():
    """A night without an image digest, a tag moved back to an older build, two images alternating
    night by night: every night judged, no traceback, the assumption in the line."""
    images = ["a"] * 10 + ["b", "a"] * 5
    s = series([1.0] * 20, images, ab_on=range(10, 20), seed=2)
    d = D0 + dt.timedelta(days=5)
    s.fingerprints[d] = {**s.fingerprints[d], "image_digest": ""}
    s.fingerprints[d + dt.timedelta(days=1)] = {k: v for k, v in s.fingerprints[d].items() if k != "image_digest"}
    js = judge(s)
    for j in js[5:7]:  # empty, then missing: the same build as the night before, said; no change judged
        assert "no image digest recorded tonight: assumed the build of the night before" in j.line(), j.line()
        assert j.suspect is None and j.kind is None
    assert all(j.line() for j in js)
    assert "the image is again the build first measured on 2026-10-01" in js[11].line()
    assert not any(j.alert for j in js)


def test_the_judges_vocabulary_is_a_leaf_module():
    import subprocess
    import sys

    code = ("import sys, scalebench.analysis.judgement; "
            "assert not {'scalebench.analysis.lifecycle', 'scalebench.analysis.regress'} & set(sys.modules); "
            "import scalebench.analysis.lifecycle; assert 'scalebench.analysis.regress' not in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True)
