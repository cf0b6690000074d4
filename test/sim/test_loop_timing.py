"""loop_timing: from a run's bag, the chunks' latency, period and coverage, and which episodes
began with the node still holding the previous episode's last command (synthetic bags with known
timing; no simulator needed)."""
from __future__ import annotations

import json

import numpy as np

from oxygen_ros.bags import messages as M
from oxygen_ros.bags.typestore import IMAGE, JOINT_STATE, STRING, TRAJECTORY
from oxygen_ros.bags.writer import BagWriter
from oxygen_ros.sim.loop_timing import chunk_timing, episode_starts, main, summary

MS = 10**6
T0 = 1_800_000_000 * 10**9
NAMES = ["ee_x", "ee_y", "ee_z", "gripper"]


def _write(path):
    """Three episodes of 1 s (hold 0.5 s, then steps): episode 1 starts with the node still
    sending episode 0's last command until 0.15 s after its hold ends (and a 0.45 s gap in the images before it);
    episode 2 starts commanded (the commands change during its hold)."""
    msgs = []
    img = np.zeros((4, 4, 3), np.uint8)
    with BagWriter(path, "mcap") as w:
        st = w.store

        def status(ns, ep, step, done=False, success=False):
            msgs.append((ns, "/sim/episode", STRING, M.make(st, STRING, data=json.dumps(
                {"episode": ep, "task": "door-lock", "step": step, "done": done, "success": success}))))

        for ep in range(3):
            begin = T0 + ep * 1500 * MS
            for k in range(0, 500, 50):
                status(begin + k * MS, ep, 0)
            for k in range(500, 1500, 50):
                status(begin + k * MS, ep, (k - 500) // 12 + 1, done=k == 1450, success=ep != 1)
            for k in range(0, 1500, 50):  # images every 50 ms, none in episode 1's first 0.4 s
                if not (ep == 1 and k < 400):
                    msgs.append((begin + k * MS, "/sim/camera/image_raw", IMAGE, M.image(st, img, begin + k * MS)))
            for k in range(0, 1500, 50):  # commands: a ramp, held at episode 0's last in episode 1 until 0.7 s
                ns = begin + k * MS
                held = ep == 1 and k < 700
                value = [0.0, 0.5, 0.2, 0.3] if held else [0.001 * (ep * 1500 + k), 0.5, 0.2, 1.0]
                if ep == 0 and k == 1450:
                    value = [0.0, 0.5, 0.2, 0.3]  # episode 0's last command
                msgs.append((ns, "/oxygen/joint_command", JOINT_STATE, M.joint_state(st, NAMES, value, ns)))
        for log, topic, typ, msg in sorted(msgs, key=lambda m: m[0]):
            w.write(topic, typ, msg, log)


def test_held_and_commanded_starts_are_told_apart(tmp_path, capsys):
    _write(tmp_path / "run")
    starts = episode_starts(tmp_path / "run")
    assert [s.episode for s in starts] == [1, 2]  # episode 0 has no previous command
    one, two = starts
    assert one.held and abs(one.held_s - 0.15) < 1e-6 and not one.success
    assert abs(one.image_gap_s - 0.45) < 1e-6  # the last image of episode 0 to 0.4 s into episode 1
    assert not two.held and two.held_s == 0.0 and two.success and abs(two.image_gap_s - 0.05) < 1e-6
    s = summary(starts)
    assert s["held_starts"] == 1 and s["success_after_held_start"] == {"n": 1, "success": 0}
    assert s["success_after_commanded_start"] == {"n": 1, "success": 1}
    assert main([str(tmp_path / "run")]) == 0
    assert json.loads(capsys.readouterr().out)[str(tmp_path / "run")]["held_starts"] == 1


def test_chunk_timing_counts_ticks_past_the_chunk_and_stale(tmp_path):
    """Chunks of 8 steps at 50 ms (0.35 s to the last step), observed every 400 ms and logged
    100 ms after their observation; the fifth never comes. Commands every 50 ms: per chunk the
    ticks are 100..450 ms old (2 of 8 past its last step); after the fourth they grow to 750 ms
    (8 of 14 past its end, 5 of them beyond the 0.5 s observation timeout)."""
    with BagWriter(tmp_path / "run", "mcap") as w:
        msgs = []
        for k in range(4):
            stamp = T0 + k * 400 * MS
            msgs.append((stamp + 100 * MS, "/oxygen/action_chunk", TRAJECTORY,
                         M.trajectory(w.store, np.zeros((8, 4)), NAMES, stamp, 0.05)))
        for j in range(38):
            ns = T0 + 100 * MS + j * 50 * MS
            msgs.append((ns, "/oxygen/joint_command", JOINT_STATE, M.joint_state(w.store, NAMES, [0.0] * 4, ns)))
        for log, topic, typ, msg in sorted(msgs, key=lambda m: m[0]):
            w.write(topic, typ, msg, log)
    t = chunk_timing(tmp_path / "run")
    assert t["chunks"] == 4 and t["ticks"] == 38 and t["chunk_span_s"] == 0.35
    assert t["latency_ms_p50_p90_p99"] == [100.0, 100.0, 100.0]
    assert t["period_ms_p50_p90_p99"] == [400.0, 400.0, 400.0]
    assert t["past_end"] == round(14 / 38, 4) and t["stale"] == round(5 / 38, 4)
