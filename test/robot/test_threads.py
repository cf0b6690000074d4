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


# -- CPU affinity (inference_cpus, control_cpus) ------------------------------------------------
from oxygen_ros.robot.threads import allowed_cpus, check_cpus, keep_off, pin_thread, restore  # noqa: E402


def test_cpus_are_checked_against_the_process_affinity():
    allowed = frozenset({0, 1})
    assert check_cpus("inference_cpus", [], allowed) is None  # empty: the thread stays where it is
    assert check_cpus("inference_cpus", [1], allowed) is None
    reason = check_cpus("control_cpus", [1, 3], allowed)
    assert reason == ("control_cpus: CPU 3 is not one this process may run on (its affinity: [0, 1])")
    assert check_cpus("control_cpus", [0, 0], allowed) == "control_cpus has duplicates: [0, 0]"
    assert check_cpus("control_cpus", [-1], allowed).startswith("control_cpus: CPU -1 is not one")


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="Linux thread affinity")
def test_pin_thread_moves_only_the_calling_thread():
    import threading

    before = os.sched_getaffinity(0)
    cpu = min(allowed_cpus())
    got: dict = {}

    def run():
        got["text"] = pin_thread([cpu])
        got["affinity"] = os.sched_getaffinity(0)  # pid 0: this thread
        got["failed"] = pin_thread([10_000])  # no such CPU: refused by the kernel, said so

    t = threading.Thread(target=run)
    t.start()
    t.join()
    assert got["text"] == f"CPUs {cpu}" and got["affinity"] == {cpu}
    assert got["failed"].startswith("any CPU (pinning to [10000] failed")
    assert os.sched_getaffinity(0) == before  # the caller's thread is not moved
    assert pin_thread([]) == "any CPU" and os.sched_getaffinity(0) == before


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity") or len(allowed_cpus()) < 2,
                    reason="Linux thread affinity on 2+ CPUs")
def test_keep_off_moves_every_thread_and_restore_gives_the_cpus_back():
    import threading

    before = os.sched_getaffinity(0)
    model = min(before)
    release, seen = threading.Event(), {}

    def other():  # a thread that exists before the move (as the middleware's do)
        release.wait(5.0)
        seen["during"] = os.sched_getaffinity(0)

    t = threading.Thread(target=other)
    t.start()
    moved = keep_off([model])
    try:
        assert moved is not None and threading.get_native_id() in moved
        assert moved[t.native_id] == frozenset(before)
        assert os.sched_getaffinity(0) == before - {model}
        release.set()
        t.join()
        assert seen["during"] == before - {model}
        # a thread started now inherits its creator's CPUs: off the model's too
        late = {}
        t2 = threading.Thread(target=lambda: late.update(cpus=os.sched_getaffinity(0)))
        t2.start()
        t2.join()
        assert late["cpus"] == before - {model}
    finally:
        restore(moved)
    assert os.sched_getaffinity(0) == before
    assert keep_off([]) is None and keep_off(sorted(before)) is None  # nothing left: nothing moved
    assert os.sched_getaffinity(0) == before


def test_a_pinned_model_gets_one_thread_per_cpu_of_its_own():
    assert resolve_threads(0, cores=14, model_cpus=2) == (2, None)  # not 13 threads on 2 CPUs
    assert resolve_threads(1, cores=14, model_cpus=2) == (1, None)
    n, warning = resolve_threads(4, cores=14, model_cpus=2)
    assert n == 4 and "more threads than the 2 CPUs of inference_cpus" in warning
    assert resolve_threads(0, cores=14, model_cpus=0) == (13, None)  # not pinned: as before
