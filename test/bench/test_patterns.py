"""Arrival pattern generators: deterministic, right rates; the fluctuating workload's shape."""
import numpy as np
import pytest

from oxygen_ros.bench import patterns as pat


@pytest.mark.parametrize("name", pat.PATTERNS)
def test_deterministic(name):
    assert pat.arrivals(name, 300, seed=3) == pat.arrivals(name, 300, seed=3)
    assert all(isinstance(x, int) and x >= 0 for x in pat.arrivals(name, 300, seed=3))


def test_rates():
    n = 4000
    assert pat.arrivals("per_frame", n) == [1] * n
    bursty = pat.arrivals("bursty", n, burst=4)
    assert np.mean(bursty) == pytest.approx(1.0)
    assert set(bursty) == {0, 4}
    assert np.mean(pat.arrivals("poisson", n, seed=1, rate=1.0)) == pytest.approx(1.0, abs=0.06)
    assert np.mean(pat.arrivals("poisson", n, seed=1, rate=0.5)) == pytest.approx(0.5, abs=0.05)
    assert np.mean(pat.arrivals("sparse", n, sparse_every=5)) == pytest.approx(0.2)


def test_poisson_seed_changes_sequence():
    assert pat.arrivals("poisson", 200, seed=0) != pat.arrivals("poisson", 200, seed=1)


def test_unknown_pattern():
    with pytest.raises(ValueError):
        pat.arrivals("nope", 10)


def test_fluctuating_shape():
    arr = pat.fluctuating()
    rate = pat.fluctuating_rate()
    assert len(arr) == len(rate) == pat.FLUCT_CYCLE == 119
    assert arr == pat.fluctuating()
    # idle at both ends (the tail is long enough for requests to drain)
    assert sum(arr[:9]) == 0 and sum(arr[-20:]) == 0
    # rises to the plateau, then falls: peak in the middle, half load after it
    peak = max(rate)
    assert peak == pytest.approx(2.0)
    top = [i for i, r in enumerate(rate) if r == peak]
    assert 30 <= top[0] and top[-1] <= 65
    assert np.mean(rate[62:75]) == pytest.approx(1.0)
    # the integer counts track the rate without drift
    assert abs(sum(arr) - sum(rate)) < 1
    assert np.all(np.abs(np.cumsum(arr) - np.cumsum(rate)) < 1 + 1e-9)
    assert max(pat.fluctuating(peak=4.0)) >= 4
