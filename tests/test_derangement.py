"""Random-audio pairing: seeded, reproducible derangements without fixed points."""

import numpy as np
import pytest

from evalcore.protocols.derangement import derange, derangement


@pytest.mark.parametrize("n", [2, 3, 5, 10, 101, 1000])
def test_no_fixed_points_and_a_permutation(n):
    for seed in range(20):
        p = derangement(n, seed)
        assert sorted(p.tolist()) == list(range(n))
        assert not np.any(p == np.arange(n))


def test_seeded_and_reproducible():
    assert derangement(50, 7).tolist() == derangement(50, 7).tolist()
    assert derangement(50, 7).tolist() != derangement(50, 8).tolist()


def test_two_elements_swap():
    assert derangement(2, 0).tolist() == [1, 0]


@pytest.mark.parametrize("n", [0, 1])
def test_impossible_sizes_raise_clearly(n):
    with pytest.raises(ValueError, match="at least 2"):
        derangement(n, 0)


def test_roughly_uniform_over_derangements_of_three():
    # the two derangements of 3 elements should each appear about half the time
    seen = [tuple(derangement(3, s)) for s in range(2000)]
    counts = {p: seen.count(p) for p in set(seen)}
    assert set(counts) == {(1, 2, 0), (2, 0, 1)}
    assert all(700 < c < 1300 for c in counts.values())


def test_derange_keys_depends_only_on_the_set():
    keys = [f"clip{i}" for i in range(30)]
    a = derange(keys, 3)
    b = derange(list(reversed(keys)) + keys[:5], 3)  # order and repeats do not matter
    assert a == b
    assert all(k != v for k, v in a.items())
    assert sorted(a.values()) == sorted(keys)
