"""The same-night A/B's verdict: "worse" / "better" from the rank test and the magnitude gate,
"same" only from an equivalence test (the 90 % interval of the change inside ±magnitude), and
"unknown" otherwise, which clears nothing. Rates simulated through ABTest with the DAG's top-up
(5 pairs, then up to 8 while unknown)."""
import itertools
import math
import random
import statistics

import pytest
from scipy.stats import mannwhitneyu

from scalebench.analysis.regress import ABTest, Gates
from scalebench.analysis.stats import rank_test_p, shift_interval

A = (977.2, 1021.4, 940.2, 957.1, 953.6)
B = (864.4, 939.6, 924.2, 951.6, 935.9)


def test_a_slower_image_inside_the_magnitude_gate_is_not_called_same():
    """The audit's example: B is slower at the test's own alpha, by less than the 5 % gate. The
    point estimate said "same (-2.2 %)"; the interval reaches -9.4 %, so nothing is decided."""
    ab = ABTest("a", "b", "gpu-node-1", A, B)
    assert ab.p(True) == pytest.approx(2 / 252)  # the exact rank test: one split of 252 is as extreme
    assert ab.verdict == "unknown" and ab.wants_pairs() == 3
    lo, hi = ab.interval()
    assert hi > 0.05 and lo > 0  # slower throughout, possibly by more than the gate
    assert ab.level == 0.975  # 5 % over the four looks an A/B may take (5, 6, 7, 8 pairs)
    assert ab.line() == ("image b vs image a: unknown (-3.4 %, 97.5 % interval -11.5..-0.1 %, not inside ±5 %; 16 "
                         "pairs would show \"same\" with 80 % power if the images do not differ, at tonight's spread) "
                         "tonight on gpu-node-1 (p = 0.00794, 5 + 5 cells)")


def test_the_pairs_it_names_show_same_with_80_percent_power_when_the_images_do_not_differ():
    ab = ABTest("a", "b", "h", A, B)
    k = ab.pairs_to_decide()
    la, lb = [math.log(v) for v in A], [math.log(v) for v in B]
    sd = math.sqrt((statistics.variance(la) + statistics.variance(lb)) / 2)
    rng = random.Random(11)
    verdicts = [ABTest("a", "b", "h", tuple(1000 * math.exp(rng.gauss(0, sd)) for _ in range(k)),
                       tuple(1000 * math.exp(rng.gauss(0, sd)) for _ in range(k))).verdict for _ in range(2000)]
    assert k == 16 and verdicts.count("same") / 2000 >= 0.8, (k, verdicts.count("same"))


def test_the_interval_is_moses_distribution_free_interval_with_its_exact_coverage():
    x, y = [1.0, 2.0, 3.0, 4.0, 5.0], [1.5, 2.5, 3.5, 4.5, 5.5, 6.5]
    hl, lo, hi = shift_interval(x, y, 0.90)
    diffs = sorted(b - a for a in x for b in y)
    assert hl == statistics.median(diffs)
    # the exact null distribution of U at 5 + 6: the k-th smallest difference with P(U <= k - 1) <= 5 %
    us = [sum(c) - 10 for c in itertools.combinations(range(11), 5)]
    k = max(j for j in range(1, 31) if sum(u <= j - 1 for u in us) / len(us) <= 0.05)
    assert (lo, hi) == (diffs[k - 1], diffs[30 - k])
    assert shift_interval([1.0, 2.0], [3.0, 4.0], 0.90) is None  # 2 + 2 cannot give 90 %


@pytest.mark.parametrize("x, y", [
    ([1.0, 2.0, 2.0, 3.0, 4.0], [2.0, 3.0, 3.0, 5.0, 6.0]),
    ([5.0, 5.0, 5.0, 6.0, 7.0], [4.0, 5.0, 5.0, 5.0, 6.0, 8.0]),
    ([1.0, 1.0, 2.0], [1.0, 3.0, 3.0, 3.0]),
])
def test_the_rank_tests_p_is_the_exact_permutation_p_with_ties(x, y):
    """Counted by brute force over every assignment of the pooled values to the two sides (ties
    keep midranks); scipy's exact method assumes no ties and falls back to the normal approximation."""
    pooled = [*x, *y]
    ranks = {v: statistics.mean(i + 1 for i, w in enumerate(sorted(pooled)) if w == v) for v in pooled}
    observed = sum(ranks[v] for v in x)
    splits = list(itertools.combinations(range(len(pooled)), len(x)))
    exact = sum(sum(ranks[pooled[i]] for i in c) <= observed + 1e-9 for c in splits) / len(splits)
    assert rank_test_p(x, y, "less") == pytest.approx(exact)
    asymptotic = float(mannwhitneyu(x, y, alternative="less", method="asymptotic").pvalue)
    assert rank_test_p(x, y, "less") != pytest.approx(asymptotic, abs=1e-3)


def run_ab(rng: random.Random, slowdown: float, cv: float, gates: Gates = Gates()) -> ABTest:
    """An A/B as the DAG runs it: 5 + 5 cells, then pairs added while it is unknown, to the cap."""
    a, b = [], []
    while True:
        need = gates.ab_min_pairs if not a else 1
        a += [1000 * (1 + rng.gauss(0, cv)) for _ in range(need)]
        b += [1000 * (1 - slowdown) * (1 + rng.gauss(0, cv)) for _ in range(need)]
        ab = ABTest("a", "b", "h", tuple(a), tuple(b), +1, gates)
        if not ab.wants_pairs():
            return ab


def rates(slowdown: float, cv: float, runs: int = 400, seed: int = 7) -> dict[str, float]:
    rng = random.Random(seed)
    verdicts = [run_ab(rng, slowdown, cv).verdict for _ in range(runs)]
    return {v: verdicts.count(v) / runs for v in ("worse", "better", "same", "unknown")}


def test_a_real_slowdown_is_rarely_called_same_and_no_change_at_low_noise_usually_is():
    """The issue's bar: at per-cell CV 10 %, a real 10 % slowdown is "same" in at most 5 % of
    A/Bs (the point-estimate rule: 24 %); with no change at CV 2 %, "same" in at least 80 %."""
    slow = rates(0.10, 0.10)
    assert slow["same"] <= 0.05, slow
    steady = rates(0.0, 0.02)
    assert steady["same"] >= 0.80 and steady["worse"] + steady["better"] <= 0.02, steady
    five = rates(0.05, 0.05)  # a 5 % step at CV 5 %: the old rule said "same" 51 % of the time
    assert five["same"] <= 0.05, five
    print(f"\nA/B verdicts over 400 runs: 10 % slower at CV 10 % {slow}; no change at CV 2 % {steady}; "
          f"5 % slower at CV 5 % {five}")


def test_an_undecided_ab_keeps_the_image_under_judgement():
    """An "unknown" A/B neither confirms nor clears the flag: the verdict is inconclusive and the
    suspect stays named for the next night's judgement against the old baseline."""
    import datetime as dt

    from scalebench.analysis.regress import Series, SeriesKey, judge
    from scalebench.core.verdicts import INCONCLUSIVE

    key = SeriesKey("b", 2, "images_per_s")
    start = dt.date(2026, 11, 1)
    rng = random.Random(1)
    nights = [start + dt.timedelta(days=i) for i in range(23)]
    s = Series(key)
    for i, night in enumerate(nights):
        value = 1000 * (1 + rng.gauss(0, 0.01)) * (0.97 if i >= 21 else 1)
        s.points.append((night, value))
        s.fingerprints[night] = {"image": "t:a" if i < 21 else "t:b", "image_digest": "sha256:a" if i < 21 else "sha256:b"}
    s.previous[nights[21]], s.reruns[nights[21]] = list(A), list(B)  # an undecided A/B on the new image's first night
    s.host = "h"
    first, second = judge(s)[-2:]
    assert first.ab is not None and first.ab.verdict == "unknown"
    assert first.verdict == INCONCLUSIVE and first.suspect is not None and not first.alert
    assert second.suspect is not None and second.suspect.text == first.suspect.text and second.news
    assert math.isclose(second.baseline, first.baseline, rel_tol=0.02)  # still the old image's level
