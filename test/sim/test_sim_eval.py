"""oxygen-sim eval's parts: settings, Wilson intervals, progress curves, memory checks, the table;
and one run of the expert setting end to end (in-process, through the sim's topics)."""
from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

# torch (through the checkpoint reader) before any MuJoCo/OSMesa sim runs in this process:
# importing torch after test_expert_setting_end_to_end's sim segfaults in triton's import here
from oxygen_ros.engine.model import formats  # noqa: F401,E402
from oxygen_ros.sim import CONTROL_PERIOD_S, get_task, metaworld_available, unavailable_reason
from oxygen_ros.sim.episodes import Status, schedule
from oxygen_ros.sim.evaluate import NodeOptions, Setting, node_parameters
from oxygen_ros.sim.metrics import Timeline, check_memory, progress_curve, wilson
from oxygen_ros.sim.report import table


def test_settings_parse_and_name():
    assert Setting.parse("oxygen-k5", "rtc") == Setting("oxygen", 5, "rtc", True)
    assert Setting.parse("oxygen-k5", "rtc").name == "oxygen-k5/rtc"
    assert Setting.parse("isolated").name == "isolated/crossfade"
    assert Setting.parse("oxygen-k1-nomem").memory is False
    assert Setting.parse("expert").name == "expert"
    assert Setting.parse("oxygen-k1+bgr", "rtc") == Setting("oxygen", 1, "rtc", True, "bgr")
    assert Setting.parse("isolated+state-swapped").name == "isolated/crossfade+state-swapped"
    with pytest.raises(ValueError, match="fault"):
        Setting.parse("isolated+upside-down")
    with pytest.raises(ValueError, match="expert"):
        Setting.parse("expert+bgr")
    with pytest.raises(ValueError, match="mode"):
        Setting.parse("fast")
    with pytest.raises(ValueError, match="expected"):
        Setting.parse("oxygen-x-y")


def test_stale_is_a_node_fault_the_sim_does_not_see():
    """+stale sets the node's chunk_skip_latency false (over --param); the sim stays right (its
    wiring faults are only bgr and state-swapped); without a fault the node skips the latency."""
    from pathlib import Path

    from oxygen_ros.sim.evaluate import SIM_FAULTS
    from oxygen_ros.sim.node import SimConfig

    s = Setting.parse("oxygen-k1+stale", "rtc")
    assert s == Setting("oxygen", 1, "rtc", True, "stale") and s.name == "oxygen-k1/rtc+stale"
    opts = NodeOptions("/ckpt", extra={"chunk_skip_latency": True})
    p = node_parameters(s, opts, SimConfig(), bag=Path("/b"), instruction="lock the door")
    assert p["chunk_skip_latency"] is False and "stale" not in SIM_FAULTS
    for text in ("oxygen-k1", "oxygen-k1+bgr"):
        q = node_parameters(Setting.parse(text), NodeOptions("/ckpt"), SimConfig(), bag=Path("/b"),
                            instruction="lock the door")
        assert q.get("chunk_skip_latency", True) is True
    with pytest.raises(ValueError, match="expert"):
        Setting.parse("expert+stale")


def test_wilson_interval_known_values():
    lo, hi = wilson(0, 10)
    assert lo == 0.0 and hi == pytest.approx(0.2775, abs=1e-4)
    lo, hi = wilson(29, 30)
    assert lo == pytest.approx(0.8333, abs=1e-3) and hi == pytest.approx(0.9941, abs=1e-3)
    lo, hi = wilson(15, 30)
    assert lo < 0.5 < hi and hi - 0.5 == pytest.approx(0.5 - lo)


def test_schedule_is_reproducible_and_task_major():
    eps = schedule(["door-unlock", "window-open"], 2, base_seed=10)
    assert [(e.task, e.seed) for e in eps] == [("door-unlock", 2010), ("door-unlock", 2011),
                                               ("window-open", 1010), ("window-open", 1011)]
    # a task's seeds do not depend on which other tasks run
    assert schedule(["window-open"], 2, base_seed=10)[0].seed == 1010


def _st(ep, t, progress, success=False, done=False):
    return Status(ep, "door-unlock", 0, "", int(t / 0.0125), t, progress, 0, "", success, done,
                  done and not success, 0)


def test_progress_curve_holds_success_and_timeout():
    sts = [_st(0, 0.0, 0.0), _st(0, 0.5, 0.5), _st(0, 1.0, 1.0, success=True, done=True),
           _st(1, 0.0, 0.0), _st(1, 0.5, 0.2), _st(1, 2.5, 0.3, done=True)]
    curve = progress_curve(sts, np.array([0.0, 0.6, 1.5, 3.0]))
    np.testing.assert_allclose(curve, [0.0, (0.5 + 0.2) / 2, (1.0 + 0.2) / 2, (1.0 + 0.3) / 2])


def test_memory_text_is_checked_against_the_scene_it_came_from():
    tl = Timeline()
    tl.add(100, "door-unlock", "reaching the lock")
    tl.add(200, "door-unlock", "turning the lock")
    assert tl.at(50) is None and tl.at(150) == ("door-unlock", "reaching the lock")
    ok = check_memory("Turning the lock.", tl.at(250))
    assert ok.names_stage and ok.names_task
    late = check_memory("reaching the lock", tl.at(250))
    assert not late.names_stage and late.names_task
    wrong = check_memory("slide the window open", tl.at(250))
    assert not wrong.names_stage and not wrong.names_task


def test_node_parameters_use_the_sim_topics_and_the_setting():
    from oxygen_ros.sim.node import SimConfig
    from oxygen_ros.sim.env import JOINT_NAMES

    p = node_parameters(Setting("oxygen", 5, "rtc"), NodeOptions("/ckpt"), SimConfig(), bag=__import__("pathlib").Path("/b"),
                        instruction="unlock the door")
    assert p["camera_topics"] == ["/sim/camera/image_raw"] and p["joint_names"] == list(JOINT_NAMES)
    assert (p["mode"], p["decode_steps_per_frame"], p["chunk_blend"]) == ("oxygen", 5, "rtc")
    assert p["max_decode_steps"] == 30 and p["memory.every_n_frames"] == 1 and p["record.enabled"]
    assert p["control_rate_hz"] == 80.0 and "/sim/episode" in p["record.topics"]


def test_table_row():
    summary = {"setting": "isolated/crossfade",
               "tasks": {"door-unlock": {"n": 30, "success": 29, "rate": 29 / 30, "ci95": list(wilson(29, 30)),
                                          "time_to_success_s": 0.6}},
               "all": {"n": 30, "success": 29, "rate": 29 / 30, "ci95": list(wilson(29, 30)),
                       "time_to_success_s": 0.6},
               "action_rate_hz": 12.34, "tokens_per_s": 99.0, "memory": {"count": 0}}
    md = table([summary], ["door-unlock"])
    assert "| isolated/crossfade | 96.7 [83.3, 99.4] (29/30) |" in md and "| 0.60 | 12.3 | 99 | - | - |" in md


@pytest.mark.ros
@pytest.mark.skipif(not metaworld_available(),
                    reason=str(unavailable_reason()))
@pytest.mark.skipif(os.environ.get("OXYGEN_WALLCLOCK_TESTS") != "1",
                    reason="wall-clock episodes: the in-process expert misses episodes on a loaded "
                    "2-core VM (set OXYGEN_WALLCLOCK_TESTS=1 to run; the ROS plumbing is tested by "
                    "test_sim_ros.py and the node's closed loop by test_closed_loop_node.py)")
def test_expert_setting_end_to_end(tmp_path):
    pytest.importorskip("rclpy")
    from oxygen_ros.cli import sim_eval as eval_cli

    # button-press-topdown: the door tasks need the expert's every step on time, and an
    # in-process expert on this 2-core VM was late on 55-87% of steps in quiet runs (door-unlock
    # then timed out in 1 of 2 episodes: a timing flake, not a plumbing fault)
    rc = eval_cli.main(["--out", str(tmp_path), "--settings", "expert",
                        "--tasks", "button-press-topdown", "--episodes", "2", "--reset-hold", "0.2"])
    assert rc == 0
    res = json.loads((tmp_path / "results.json").read_text())
    (s,) = res["settings"]
    assert s["setting"] == "expert" and s["all"]["success"] == 2 and s["all"]["n"] == 2
    # wall-clock values: on this 2-core VM the in-process expert is late on many steps (one CI run
    # took 2.06 s to succeed, another answered 9.7 states/s), so they are checked for sense only
    horizon_s = get_task("button-press-topdown").horizon * CONTROL_PERIOD_S
    assert 0.2 < s["all"]["time_to_success_s"] < horizon_s
    assert s["commands_per_s"] > 1  # the expert answered through the topics
    assert "| expert | 100.0" in (tmp_path / "table.md").read_text()
    assert (tmp_path / "progress.png").stat().st_size > 1000


def test_status_json_round_trip_and_sim_config_refusals():
    s = _st(3, 0.5, 0.25)
    assert Status.from_json(s.to_json()) == s
    pytest.importorskip("rclpy")
    from oxygen_ros.sim.node import SimConfig

    with pytest.raises(ValueError, match="unknown tasks"):
        SimConfig(tasks=("reach",))
    with pytest.raises(ValueError, match="episodes_per_task"):
        SimConfig(episodes_per_task=0)
    with pytest.raises(ValueError, match="camera_rate_hz"):
        SimConfig(camera_rate_hz=100.0)  # more than one image per 12.5 ms step
    with pytest.raises(ValueError, match="camera"):
        SimConfig(camera="nope")
    with pytest.raises(ValueError, match="real_time_factor"):
        SimConfig(real_time_factor=0.0)


def test_a_runs_bag_is_its_own_not_another_settings(tmp_path):
    import os

    from oxygen_ros.sim.evaluate import newest_bag

    bags = tmp_path / "bags"
    for i, name in enumerate(["isolated_crossfade", "isolated_crossfade_20261202-101010",
                              "isolated_crossfade_bgr"]):
        (bags / name).mkdir(parents=True)
        os.utime(bags / name, (1000 + i, 1000 + i))  # the fault setting's bag is the newest
    assert newest_bag(bags / "isolated_crossfade") == str(bags / "isolated_crossfade_20261202-101010")
    assert newest_bag(bags / "isolated_crossfade_bgr") == str(bags / "isolated_crossfade_bgr")
    assert newest_bag(bags / "oxygen-k1_rtc") == ""


def test_eval_control_rate_is_the_checkpoints_unless_asked(tmp_path):
    """A policy trained at 20 Hz (training.json control_rate_hz) is played at 20 Hz, not the sim's
    80 Hz; a checkpoint naming no rate gets the sim's; an explicit --control-rate wins."""
    from pathlib import Path

    from oxygen_ros.cli.sim_eval import control_rate, parse_args

    trained = str(Path(__file__).resolve().parents[2] / "checkpoints" / "sim-policy")
    assert parse_args(["--out", str(tmp_path)]).control_rate == 0.0
    assert control_rate(0.0, trained) == 20.0
    assert control_rate(50.0, trained) == 50.0
    (tmp_path / "ck").mkdir()
    assert control_rate(0.0, str(tmp_path / "ck")) == 80.0  # names none: the sim's control rate
    assert control_rate(0.0, "") == 80.0  # expert only
    (tmp_path / "ck" / "training.json").write_text('{"control_rate_hz": -3}')
    with pytest.raises(ValueError, match="control_rate_hz"):
        control_rate(0.0, str(tmp_path / "ck"))
    with pytest.raises(ValueError, match="control-rate"):
        control_rate(-1.0, trained)


def test_the_aloha_robot_shows_the_top_camera_the_checkpoint_was_trained_on(tmp_path):
    """ALOHA's top camera field of view is part of what the policy depends on: the evaluation's
    robot takes the checkpoint's (training.json data meta top_fovy; an ALOHA recording older than
    the field was made with the scene's 78 degrees), unless --top-fovy names one."""
    from oxygen_ros.cli.sim_eval import make_sim_config, parse_args
    from oxygen_ros.sim.aloha.env import DEFAULT_TOP_FOVY, SCENE_TOP_FOVY
    from oxygen_ros.sim.checkpoint import checkpoint_top_fovy

    ck = tmp_path / "ck"
    ck.mkdir()
    assert checkpoint_top_fovy(ck) is None
    args = ["--robot", "aloha", "--out", str(tmp_path), "--checkpoint", str(ck)]
    assert make_sim_config(parse_args(args)).top_fovy == DEFAULT_TOP_FOVY
    (ck / "training.json").write_text(json.dumps({"data_meta": {"simulator": "aloha"}}))
    assert make_sim_config(parse_args(args)).top_fovy == SCENE_TOP_FOVY
    (ck / "training.json").write_text(json.dumps({"data_meta": {"simulator": "aloha", "top_fovy": 50}}))
    assert make_sim_config(parse_args(args)).top_fovy == 50.0
    assert make_sim_config(parse_args(args + ["--top-fovy", "60"])).top_fovy == 60.0
    (ck / "training.json").write_text(json.dumps({"data_meta": {"simulator": "metaworld"}}))
    assert checkpoint_top_fovy(ck) is None
    (ck / "training.json").write_text(json.dumps({"data_meta": {"simulator": "aloha", "top_fovy": 200}}))
    with pytest.raises(ValueError, match="fovy"):
        make_sim_config(parse_args(args))


def test_the_aloha_node_resumes_after_a_hold_with_a_gripper_holding_the_cube(tmp_path):
    """A gripper closed on the cube stays at the cube's width (about 0.3 of its opening) while
    it is commanded shut (0): with the node's 0.2 on every joint, any hold (a late frame) turned
    into a measured-pose jump on the gripper and the robot never resumed (seen in a run: "measured
    pose jumped: vx300s_right/gripper is 0.287 rad from the last command"). The bimanual robot's
    evaluation gives the grippers their whole range and the arms the node's 0.2; --param wins."""
    from oxygen_ros.robot.shaper import CommandShaper
    from oxygen_ros.sim.aloha.env import JOINT_NAMES
    from oxygen_ros.sim.aloha.node import AlohaSimConfig

    p = node_parameters(Setting("isolated"), NodeOptions("/ckpt"), AlohaSimConfig(),
                        bag=Path("/b"), instruction="x")
    tol = np.asarray(p["max_tracking_error"])
    grip = np.array(["gripper" in n for n in JOINT_NAMES])
    assert len(tol) == 14 and np.all(tol[grip] == 1.0) and np.all(tol[~grip] == 0.2)
    # the restart check with these tolerances accepts the grasp and still catches an arm glitch
    shaper = CommandShaper(14, 0.04, max_tracking_error=tol)
    last = np.zeros(14)
    holding = last.copy()
    holding[grip] = 0.3
    assert shaper.step(last, last, "") is not None
    assert shaper.step(None, holding, "stale").holding
    assert not shaper.step(last, holding, "").holding  # resumes with the cube in the gripper
    glitch = holding.copy()
    glitch[0] = 0.5
    shaper.step(None, glitch, "stale")
    assert shaper.step(last, glitch, "").holding  # an arm 0.5 rad off: still a jump
    q = node_parameters(Setting("isolated"), NodeOptions("/ckpt", extra={"max_tracking_error": [0.1]}),
                        AlohaSimConfig(), bag=Path("/b"), instruction="x")
    assert q["max_tracking_error"] == [0.1]


def test_the_aloha_evaluation_follows_each_plan_for_the_measured_steps():
    """The bimanual evaluation's node follows each chunk for 8 targets (the setting its results
    were measured with) without being told; --param still wins, and Meta-World's node keeps the
    node's default (every newer chunk at once)."""
    from oxygen_ros.sim.aloha.node import AlohaSimConfig
    from oxygen_ros.sim.node import SimConfig

    p = node_parameters(Setting("isolated"), NodeOptions("/ckpt"), AlohaSimConfig(),
                        bag=Path("/b"), instruction="x")
    assert p["chunk_replan_steps"] == 8
    q = node_parameters(Setting("isolated"), NodeOptions("/ckpt", extra={"chunk_replan_steps": 0}),
                        AlohaSimConfig(), bag=Path("/b"), instruction="x")
    assert q["chunk_replan_steps"] == 0
    m = node_parameters(Setting("isolated"), NodeOptions("/ckpt"), SimConfig(), bag=Path("/b"),
                        instruction="x")
    assert "chunk_replan_steps" not in m


def test_time_to_success_is_the_first_success_when_the_episode_goes_on(tmp_path):
    """An ALOHA episode kept going past its success (--after-success) ends later than it
    succeeded: the summary's time to success is the success's, not the episode's end; the flag
    is refused for Meta-World, whose episodes end at success."""
    from dataclasses import replace

    from oxygen_ros.cli.sim_eval import make_sim_config, parse_args
    from oxygen_ros.sim.evaluate import RunResult

    on = replace(_st(0, 7.5, 1.0, success=True, done=True), success_t=4.5)
    ended = _st(1, 5.0, 1.0, success=True, done=True)
    assert Status.from_json(on.to_json()) == on and on.time_to_success == 4.5 and ended.time_to_success == 5.0
    r = RunResult(Setting.parse("isolated"), [on, ended], [on, ended], [], [], [], [], None, 0, 0, 0.0, 0.0, "")
    s = r.summary()
    assert s["all"]["time_to_success_s"] == pytest.approx(4.75)
    assert s["tasks"]["door-unlock"]["time_to_success_s"] == pytest.approx(4.75)
    with pytest.raises(ValueError, match="after-success"):
        make_sim_config(parse_args(["--out", str(tmp_path), "--after-success", "2"]))
    aloha = make_sim_config(parse_args(["--robot", "aloha", "--out", str(tmp_path), "--after-success", "2"]))
    assert aloha.after_success_s == 2.0
