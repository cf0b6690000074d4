"""The memory metrics on constructed episodes: stage accuracy against the scene a text came from,
and the precision of completion claims (a claim observed more than 0.5 s before the simulator
reported success, or in an episode that never succeeds, is false)."""
from __future__ import annotations

import json

from oxygen_ros.sim.episodes import Status
from oxygen_ros.sim.metrics import (CLAIM_SLACK_S, Timeline, check_memory, claim_is_true,
                                    completion_claim, summarize_memory)
from oxygen_ros.sim.report import memory_table, table

S = 1_000_000_000  # ns per s


def _door_unlock_run() -> tuple[Timeline, dict[int, int | None]]:
    """Episode 0 (door-unlock) reaches its lock at 1.0 s and succeeds at 2.0 s; episode 1
    (door-unlock) never succeeds; episode 2 (door-lock) succeeds at 5.0 s."""
    tl = Timeline()
    tl.add(0 * S, "door-unlock", "reaching the lock", 0)
    tl.add(1 * S, "door-unlock", "turning the lock", 0)
    tl.add(2 * S, "door-unlock", "the door is unlocked", 0, success=True)
    tl.add(3 * S, "door-unlock", "reaching the lock", 1)
    tl.add(4 * S, "door-lock", "moving above the lock", 2)
    tl.add(5 * S, "door-lock", "the door is locked", 2, success=True)
    return tl, {0: tl.success_ns.get(0), 1: None, 2: tl.success_ns.get(2)}


def _check(tl: Timeline, text: str, t_s: float):
    stamp = int(t_s * S)
    return check_memory(text, tl.scene_at(stamp), stamp)


def test_completion_claims_are_recognised_by_the_success_caption():
    assert completion_claim("The door is unlocked.") == "door-unlock"
    assert completion_claim("the door is locked") == "door-lock"  # not a prefix of "unlocked"
    assert completion_claim("the window is open") == "window-open"
    assert completion_claim("turning the lock") is None
    assert completion_claim("unlock the door") is None  # the instruction claims nothing


def test_claim_precision_on_constructed_episodes():
    tl, success = _door_unlock_run()
    assert success == {0: 2 * S, 1: None, 2: 5 * S}
    checks = [
        _check(tl, "the door is unlocked", 1.6),    # 0.4 s before success: true
        _check(tl, "the door is unlocked", 1.4),    # 0.6 s before: false (said too early)
        _check(tl, "the door is unlocked", 2.0),    # at success: true
        _check(tl, "the door is unlocked", 3.5),    # an episode that never succeeds: false
        _check(tl, "the door is locked", 1.9),      # another task's success: false
        _check(tl, "turning the lock", 1.5),        # the stage: no claim
        _check(tl, "the door is locked", 4.6),      # door-lock, 0.4 s before its success: true
    ]
    assert [c.episode for c in checks] == [0, 0, 0, 1, 0, 0, 2]
    claims = [c for c in checks if c.claims_done]
    assert len(claims) == 6
    assert [claim_is_true(c, success) for c in claims] == [True, False, True, False, False, True]
    # the slack is the rule's 0.5 s, inclusive at the boundary
    assert CLAIM_SLACK_S == 0.5
    assert claim_is_true(_check(tl, "the door is unlocked", 1.5), success)
    # an episode whose end was never seen counts as never succeeding
    assert not claim_is_true(claims[0], {})

    m = summarize_memory(checks, success_ns=success)
    assert (m["claims"], m["false_claims"]) == (6, 3) and m["claim_precision"] == 0.5
    du = m["per_task"]["door-unlock"]
    assert (du["count"], du["claims"], du["false_claims"]) == (6, 5, 3)
    assert du["names_stage"] == 2 / 6  # "the door is unlocked" at 2.0 s and "turning" at 1.5 s
    dl = m["per_task"]["door-lock"]
    assert (dl["claims"], dl["false_claims"], dl["claim_precision"]) == (1, 0, 1.0)
    # without success times the summary makes no claim verdicts (as before)
    assert "claims" not in summarize_memory(checks)


def test_stage_accuracy_uses_the_scene_at_the_source_stamp():
    tl, _ = _door_unlock_run()
    # a text from the observation stamped exactly at the stage change names the new stage
    assert _check(tl, "turning the lock", 1.0).names_stage
    assert not _check(tl, "reaching the lock", 1.0).names_stage
    assert _check(tl, "reaching the lock", 0.999).names_stage


def test_status_carries_the_stamp_of_its_scene():
    st = Status(3, "door-unlock", 7, "unlock the door", 10, 0.125, 0.5, 1, "turning the lock",
                False, False, False, 0, stamp_ns=123 * S)
    assert Status.from_json(st.to_json()) == st
    old = json.loads(st.to_json())
    del old["stamp_ns"]  # a status from a sim without stamps still reads
    assert Status.from_json(json.dumps(old)).stamp_ns == 0


def test_report_shows_claims_per_task_and_setting():
    tl, success = _door_unlock_run()
    checks = [_check(tl, "the door is unlocked", 1.6), _check(tl, "the door is unlocked", 1.4),
              _check(tl, "moving above the lock", 4.5)]
    mem = summarize_memory(checks, success_ns=success)
    summary = {"setting": "oxygen-k1/rtc", "tasks": {}, "all": {"n": 0}, "memory": mem}
    md = memory_table([summary], ["door-unlock", "door-lock"])
    assert "| oxygen-k1/rtc | door-unlock | 2 | 0.0 | 2 | 50.0 (1/2) | 1 |" in md
    assert "| oxygen-k1/rtc | door-lock | 1 | 100.0 | 0 | - (0) | 0 |" in md
    row = {**summary, "all": {"n": 1, "success": 1, "rate": 1.0, "ci95": [0.2, 1.0],
                              "time_to_success_s": 1.0}}
    assert table([row], ["door-unlock"]).rstrip().endswith("| 33.3 | 100.0 | 50.0 (1/2) |")


def test_bimanual_completion_claims_are_judged_like_meta_worlds():
    """Issue 35, item 4, in the second simulator: "the cube is handed over" / "the peg is
    inserted" are claims, judged against the episode's success (0.5 s slack; never in an episode
    that fails; another task's success is false); a stage caption claims nothing."""
    from oxygen_ros.sim.aloha.metrics import check_memory as aloha_check

    tl = Timeline()
    tl.add(0 * S, "transfer-cube", "reaching for the cube", 0)
    tl.add(2 * S, "transfer-cube", "lifting the cube", 0)
    tl.add(4 * S, "transfer-cube", "the cube is handed over", 0, success=True)
    tl.add(5 * S, "transfer-cube", "lifting the cube", 1)  # an episode that never succeeds
    success = {0: tl.success_ns.get(0), 1: None}

    def check(text: str, t_s: float):
        stamp = int(t_s * S)
        return aloha_check(text, tl.scene_at(stamp), stamp)

    checks = [check("the cube is handed over", 3.6),   # 0.4 s before success: true
              check("the cube is handed over", 2.5),   # 1.5 s before: false
              check("the cube is handed over", 5.5),   # never succeeds: false
              check("the peg is inserted", 4.0),       # another task's success: false
              check("lifting the cube", 2.5)]          # the stage: no claim
    assert [c.claimed for c in checks] == ["transfer-cube"] * 3 + ["insertion", None]
    m = summarize_memory(checks, success_ns=success)
    assert (m["claims"], m["false_claims"], m["false_claims_in_failed_episodes"]) == (4, 3, 1)
    assert m["names_stage"] == 1 / 5  # only "lifting the cube" at 2.5 s names its stage
    # what was said instead of the stage shown, most often first
    assert m["stage_misses"][0] == {"stage": "lifting the cube", "said": "the cube is handed over",
                                    "count": 3}
    assert sum(x["count"] for x in m["stage_misses"]) == 4
