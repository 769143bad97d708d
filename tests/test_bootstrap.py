"""Bootstrap CIs: seeded, sensible coverage, and paired differences."""

import numpy as np

from evalcore.stats.bootstrap import estimate, paired_difference

MEAN = lambda m: m[..., 0]  # noqa: E731


def test_seeded_and_contains_the_point():
    x = np.random.default_rng(1).normal(size=(200, 1))
    a = estimate(x, MEAN, resamples=500, confidence=0.95, seed=3)
    b = estimate(x, MEAN, resamples=500, confidence=0.95, seed=3)
    assert a == b and a.ci_low < a.value < a.ci_high and a.n == 200
    # the CI half-width is close to 1.96 standard errors
    se = x.std(ddof=1) / np.sqrt(200)
    assert abs((a.ci_high - a.ci_low) / 2 - 1.96 * se) < 0.3 * 1.96 * se


def test_coverage_of_a_known_mean():
    gen = np.random.default_rng(0)
    hits = sum(
        (e := estimate(gen.normal(0.5, 1.0, size=(80, 1)), MEAN, resamples=400, confidence=0.9, seed=s)).ci_low
        <= 0.5 <= e.ci_high
        for s in range(100)
    )
    assert 80 <= hits <= 98


def test_paired_difference_uses_pairing():
    gen = np.random.default_rng(2)
    base = gen.normal(size=(100, 1)) * 5  # large between-item spread
    a, b = base + 0.3, base
    d = paired_difference(a, b, MEAN, resamples=500, confidence=0.95, seed=0)
    assert abs(d.value - 0.3) < 1e-12
    assert d.ci_low > 0.29 and d.ci_high < 0.31  # pairing cancels the item spread


def test_identical_sides_give_zero():
    x = np.random.default_rng(3).random((50, 3))
    d = paired_difference(x, x, lambda m: m[..., 0] / (m[..., 1] + 1), resamples=200, confidence=0.95, seed=0)
    assert d.value == 0 and d.ci_low == 0 and d.ci_high == 0


def test_empty_is_nan_not_crash():
    e = estimate(np.zeros((0, 1)), MEAN, resamples=200, confidence=0.95, seed=0)
    assert e.n == 0 and np.isnan(e.value)
