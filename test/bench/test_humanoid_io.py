"""oxygen-bench humanoid-io's comparison with the run without the input load: each loaded run is
divided by the base of its own repetition (a fresh node process each), never another's; phases of
one alternating process are compared with that process's base phases only."""
import pytest

pytest.importorskip("rclpy")

from oxygen_ros.bench.suite.humanoid_io import RUNS, abba, alternation, base_of, comparable, ratios, row_name  # noqa: E402


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


BASE, LOADED = "3cam-raw-base-fifo", "3cam-raw-js500-cmd200-fifo"


def test_abba_order_puts_as_many_of_each_early_as_late():
    order = [r.name for r in abba(RUNS[BASE], RUNS[LOADED], 4)]
    assert order == [BASE, LOADED, LOADED, BASE] * 2
    # an odd count still alternates from the base and gives each the same number of phases
    assert [r.name for r in abba(RUNS[BASE], RUNS[LOADED], 3)] == [BASE, LOADED, LOADED, BASE, BASE, LOADED]


def _phase(run: str, i: int, hz: float, rep: int = 0, n: int = 8) -> dict:
    return {"run": run, "repeat": rep, "repeats": 2, "phase": i, "phases": n, "action_hz": hz,
            "tokens_per_s": 10 * hz}


def test_alternation_divides_a_process_loaded_phases_by_its_own_base_phases():
    hz = [2.0, 1.8, 1.9, 2.2, 2.4, 2.1, 2.3, 2.6]  # base, loaded, loaded, base, ...
    names = [r.name for r in abba(RUNS[BASE], RUNS[LOADED], 4)]
    rs = [_phase(n, i, h) for i, (n, h) in enumerate(zip(names, hz))]
    # a second process, much faster: it must not enter the first one's ratio
    rs += [_phase(n, i, 10 * h, rep=1) for i, (n, h) in enumerate(zip(names, hz))]
    assert base_of(rs[1], rs) is None and ratios(rs) == {}  # phases are not paired by name
    assert row_name(rs[1]) == f"{LOADED} #1, phase 2 of 8"
    rows = [ln for ln in alternation(rs) if ln.startswith("| 1 ") or ln.startswith("| 2 ")]
    ratio = (1.8 + 1.9 + 2.1 + 2.3) / 4 / ((2.0 + 2.2 + 2.4 + 2.6) / 4)
    blocks = [(1.8 + 1.9) / (2.0 + 2.2), (2.1 + 2.3) / (2.4 + 2.6)]
    cells = rows[0].split(" | ")
    assert cells[1] == f"{BASE} / {LOADED}"
    assert cells[2] == "2.00, 2.20, 2.40, 2.60" and cells[3] == "1.80, 1.90, 2.10, 2.30"
    assert cells[4] == f"{ratio:.3f}" and cells[5] == ", ".join(f"{b:.3f}" for b in blocks)
    assert cells[6] == f"{sum(blocks) / 2:.3f} ({min(blocks):.3f} - {max(blocks):.3f})"
    assert rows[1].split(" | ")[4] == f"{ratio:.3f}"  # the same ratio in the faster process
    assert alternation([_r(BASE, 0, 4.0)]) == []  # no alternating process: no section



def test_only_phases_of_the_same_model_and_placement_alternate():
    assert comparable(RUNS[BASE], RUNS[LOADED]) is None
    assert comparable(RUNS["3cam-raw-js50-cmd200-fifo"], RUNS[LOADED]) is None  # the joints alone
    assert "differ" in comparable(RUNS["1cam-raw-base"], RUNS[LOADED])
    assert "differ" in comparable(RUNS[BASE], RUNS["3cam-raw-js500-cmd200-fifo-pinned"])
    assert "slowed" in comparable(RUNS[BASE], RUNS["3cam-raw-js500-cmd200-slow-joints"])
