"""model.num_threads: a default that leaves a core to everything beside the model, and a warning
that names the cost of a count that takes every core."""
import os

import pytest

from oxygen_ros.robot.threads import default_threads, resolve_threads, usable_cores


def test_the_default_leaves_one_core():
    assert [default_threads(c) for c in (1, 2, 4, 14)] == [1, 1, 3, 13]
    assert resolve_threads(0, cores=2) == (1, None)
    assert resolve_threads(0, cores=14) == (13, None)


def test_a_count_that_takes_every_core_is_warned_about():
    assert resolve_threads(1, cores=2) == (1, None)
    assert resolve_threads(4, cores=14) == (4, None)
    n, warning = resolve_threads(2, cores=2)
    assert n == 2 and "every one of the 2 cores" in warning
    assert "frames get slower" in warning and "model.num_threads 0 uses 1" in warning
    n, warning = resolve_threads(8, cores=2)
    assert n == 8 and "more threads than the 2 cores" in warning
    assert resolve_threads(1, cores=1) == (1, None)  # one core: nothing to leave free
    with pytest.raises(ValueError, match="model.num_threads"):
        resolve_threads(-1)


def test_usable_cores_follow_the_affinity():
    if not hasattr(os, "sched_getaffinity"):
        pytest.skip("no CPU affinity on this platform")
    assert usable_cores() == len(os.sched_getaffinity(0))
