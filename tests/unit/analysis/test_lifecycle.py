"""A regression's whole life through the state machine (scalebench.analysis.lifecycle): the
reviewer's reproductions, each over many seeded histories, and properties that hold on any
history. Per-night CV 2 %; an A/B of 5 + 5 cells on the night a new image arrives flagged."""
import datetime as dt
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scalebench.analysis.lifecycle import MESSAGES, RECENT_NIGHTS
from scalebench.analysis.regress import (ENDED, FIXED, NO_BETTER, NO_EFFECT, NOT_A_VERDICT, PARTLY_FIXED, REGRESSION,
                                         Gates, Series, SeriesKey, judge)

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
            assert j.change < G.magnitude, j.line()
        if j.kind in (FIXED, PARTLY_FIXED, NO_BETTER, ENDED):  # said only while a regression lasted
            assert before is not None and before.state == "regressed" and j.blamed == before.blamed
        if j.alert:
            assert j.state == "regressed" and MESSAGES[j.kind].alerts
        if before is not None and before.state == j.state == "regressed":  # its baseline is the one before it
            assert j.baseline == before.baseline
        assert (j.verdict is None) == (j.kind is None or j.kind in NOT_A_VERDICT)
        assert j.kind is None or j.kind in MESSAGES


def test_every_message_kind_is_declared_once_and_the_report_orders_every_verdict():
    from scalebench.report.figures import SEVERITY
    from scalebench.report.render import FIX_LABELS

    verdicts = [k for k in MESSAGES if k not in NOT_A_VERDICT]
    assert sorted(SEVERITY) == sorted(verdicts)
    assert {k for k, m in MESSAGES.items() if m.ends} == {FIXED, ENDED} and MESSAGES[REGRESSION].alerts
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
