"""oxygen-bench humanoid-io's comparison with the run without the input load: each loaded run is
divided by the base of its own repetition (a fresh node process each), never another's."""
import pytest

pytest.importorskip("rclpy")

from oxygen_ros.bench.suite.humanoid_io import base_of, ratios, row_name  # noqa: E402


def _r(run: str, rep: int, hz: float, repeats: int = 2) -> dict:
    return {"run": run, "repeat": rep, "repeats": repeats, "action_hz": hz}


def test_each_repetition_is_compared_with_its_own_base():
    results = [_r("3cam-raw-base-fifo", 0, 4.6), _r("3cam-raw-js500-cmd200-fifo", 0, 4.2),
               _r("3cam-raw-base-fifo", 1, 4.4), _r("3cam-raw-js500-cmd200-fifo", 1, 4.1)]
    assert base_of(results[3], results) is results[2]
    assert ratios(results) == {"3cam-raw-js500-cmd200-fifo": [4.2 / 4.6, 4.1 / 4.4]}
    assert [row_name(r) for r in results[:2]] == ["3cam-raw-base-fifo #1", "3cam-raw-js500-cmd200-fifo #1"]


def test_one_repetition_keeps_the_plain_names_and_a_missing_base_gives_no_ratio():
    results = [_r("1cam-raw-js500-cmd200", 0, 5.0, repeats=1)]
    assert row_name(results[0]) == "1cam-raw-js500-cmd200"
    assert base_of(results[0], results) is None and ratios(results) == {}
    # results written before repetitions existed carry neither key
    old = [{"run": "1cam-raw-base", "action_hz": 5.0}, {"run": "1cam-raw-js500-cmd200", "action_hz": 4.5}]
    assert ratios(old) == {"1cam-raw-js500-cmd200": [0.9]}
