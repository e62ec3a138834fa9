"""Bisect between images on planted step tables: one culprit in the middle, two culprits (both
halves kept), a bad image that is not worse (unresolved), the steps it takes."""
import random

import pytest

from scalebench.analysis.bisect import Bisection

TAGS = [f"scalebench/torch:t{i}" for i in range(1, 10)]


def run(bisection, level, cv=0.01, pairs=5, seed=0):
    rng = random.Random(seed)
    while not bisection.done:
        images = bisection.next_images()
        bisection.record({im: [level(im) * (1 + rng.gauss(0, cv)) for _ in range(pairs)] for im in images})
    return bisection


@pytest.mark.parametrize("n,culprit", [(5, 2), (9, 1), (9, 7), (2, 1)])
def test_one_culprit_is_named_in_log2_steps(n, culprit):
    b = run(Bisection("b", 1, TAGS[:n]), lambda im: 800.0 if TAGS.index(im) >= culprit else 1000.0)
    assert [i for i, _ in b.culprits] == [culprit] and not b.unresolved
    assert len(b.steps) <= max(1, (n - 1).bit_length())
    assert b.result()[0].startswith(f"culprit: {TAGS[culprit]} (the image before it: {TAGS[culprit - 1]});")


def test_five_tags_slow_from_the_third_take_two_steps():
    b = run(Bisection("b", 1, TAGS[:5]), lambda im: 800.0 if TAGS.index(im) >= 2 else 1000.0)
    assert [s.images for s in b.steps] == [[TAGS[0], TAGS[2], TAGS[4]], [TAGS[0], TAGS[1], TAGS[2]]]


def test_two_culprits_keep_both_halves():
    level = {0: 1000.0, 1: 1000.0, 2: 900.0, 3: 900.0, 4: 900.0, 5: 900.0, 6: 780.0, 7: 780.0, 8: 780.0}
    b = run(Bisection("b", 1, TAGS), lambda im: level[TAGS.index(im)])
    assert sorted(i for i, _ in b.culprits) == [2, 6] and not b.unresolved


def test_a_bad_image_that_is_not_worse_is_unresolved_not_guessed():
    b = run(Bisection("b", 1, TAGS[:5]), lambda im: 1000.0)
    assert b.culprits == [] and len(b.unresolved) == 1 and "no step between" in b.result()[0]


def test_a_bisection_needs_distinct_images():
    with pytest.raises(ValueError, match="distinct"):
        Bisection("b", 1, [TAGS[0], TAGS[0]])
