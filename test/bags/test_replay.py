"""oxygen-replay: recorded inputs through the engine offline; two modes, same actions and texts."""
from __future__ import annotations

import json

import numpy as np
import pytest

from oxygen_ros.bags.metrics import evaluate
from oxygen_ros.bags.reader import read_bag
from oxygen_ros.cli.replay import main
from oxygen_ros.bags.score import score

from bagsynth import CAMERA_HZ, JOINTS, write_run

ENGINE = ["--preset", "tiny", "--k", "2", "--N", "5", "--S", "2", "--memory-every", "2",
          "--threads", "1", "--no-warmup", "--quiet", "--json"]


def _replay(capsys, bag, out, *extra):
    rc = main([str(bag), "--out", str(out), *ENGINE, *extra])
    return rc, json.loads(capsys.readouterr().out.strip().splitlines()[-1])


def _outputs(path):
    b = read_bag(path)
    chunks = np.stack([np.array([p.positions for p in m.points]) for _, m in b.get("/oxygen/action_chunk")])
    finals = {m.request_id: m.text for _, m in b.get("/oxygen/memory") if m.is_final}
    return b, chunks, finals


def test_two_modes_give_the_same_actions_and_texts(tmp_path, capsys):
    write_run(tmp_path / "in", "sqlite3", seconds=1.0)
    rc, oxy = _replay(capsys, tmp_path / "in", tmp_path / "oxy", "--mode", "oxygen",
                      "--reference-topic", "/teleop/joint_command")
    assert rc == 0
    rc, iso = _replay(capsys, tmp_path / "in", tmp_path / "iso", "--mode", "isolated", "--storage", "sqlite3")
    assert rc == 0
    assert oxy["pairs"] == iso["pairs"] == oxy["frames"] == CAMERA_HZ  # every camera frame paired
    _, a, ta = _outputs(tmp_path / "oxy")
    b, c, tb = _outputs(tmp_path / "iso")
    assert a.shape == (CAMERA_HZ, a.shape[1], len(JOINTS))
    np.testing.assert_allclose(a, c, atol=1e-5)
    assert ta and ta == tb
    assert len(ta) == CAMERA_HZ // 2  # --memory-every 2, every request drained to its final text
    # the output bag is a run oxygen-eval understands
    s = evaluate(b).summary
    assert s["action_chunks"] == CAMERA_HZ and s["commands"] > 0 and s["frames"] == CAMERA_HZ
    assert s["command_period_p50_ms"] == pytest.approx(20.0)
    assert oxy["score"]["chunks_scored"] == CAMERA_HZ and len(oxy["score"]["mse_per_step"]) == a.shape[1]
    assert (tmp_path / "oxy-score" / "score.png").read_bytes()[:4] == b"\x89PNG"


def test_recorded_timing_drops_like_the_node(tmp_path, capsys):
    write_run(tmp_path / "in", "mcap", seconds=1.0)
    rc, r = _replay(capsys, tmp_path / "in", tmp_path / "out", "--rate", "20")
    assert rc == 0
    assert r["pairs"] == CAMERA_HZ and r["frames"] + r["dropped"] == r["pairs"] and r["frames"] >= 1


def test_compressed_camera_topics_replay_like_raw(tmp_path, capsys):
    """A bag with CompressedImage cameras (png: lossless) gives the actions of the same images
    recorded raw, at a camera size that is not the model's (prepared by the engine)."""
    write_run(tmp_path / "raw", "mcap", seconds=0.5, camera_hw=(48, 64), with_outputs=False)
    write_run(tmp_path / "png", "mcap", seconds=0.5, camera_hw=(48, 64), with_outputs=False, camera="png")
    rc, a = _replay(capsys, tmp_path / "raw", tmp_path / "a")
    assert rc == 0
    rc, b = _replay(capsys, tmp_path / "png", tmp_path / "b")
    assert rc == 0 and a["frames"] == b["frames"] == CAMERA_HZ // 2 and b["bad_inputs"] == 0
    np.testing.assert_allclose(_outputs(tmp_path / "a")[1], _outputs(tmp_path / "b")[1], atol=1e-5)
    write_run(tmp_path / "jpg", "mcap", seconds=0.5, camera_hw=(48, 64), with_outputs=False, camera="jpeg")
    rc, c = _replay(capsys, tmp_path / "jpg", tmp_path / "c")
    assert rc == 0 and c["frames"] == CAMERA_HZ // 2


def test_corrupt_compressed_frame_is_a_bad_input_not_a_failed_frame():
    from types import SimpleNamespace as NS

    from oxygen_ros.bags import messages as M
    from oxygen_ros.bags.replay import ReplayConfig, Replayer
    from oxygen_ros.bags.typestore import typestore
    from oxygen_ros.robot.values import StateMapping

    s = typestore()
    engine = NS(model_config=NS(vision=NS(image_size=8)), config=NS(instruction="x"))
    cfg = ReplayConfig(camera_topics=["/cam"], joint_state_topic="/js", joint_names=["a"],
                       camera_transports=("compressed",))
    r = Replayer(engine, StateMapping(1), cfg)
    t = 10**18
    good = M.compressed_image(s, np.full((48, 64, 3), 90, np.uint8), t)
    # noise: the scan data is most of the file, so half of it keeps the whole header (a jpeg
    # whose header is cut is refused by the cheap checks already: robot/images.py reads it)
    noise = np.random.default_rng(0).integers(0, 255, (48, 64, 3), dtype=np.uint8)
    truncated = M.compressed_image(s, noise, t + 10**8)
    truncated.data = truncated.data[: len(truncated.data) // 2]
    r._feed(t, "/js", M.joint_state(s, ["a"], [0.0], t))
    pair = r._feed(t, "/cam", good)
    assert pair is not None and r._decoded(pair).images[0].shape == (48, 64, 3)
    r._feed(t + 10**8, "/js", M.joint_state(s, ["a"], [0.0], t + 10**8))
    pair = r._feed(t + 10**8, "/cam", truncated)  # passes the cheap checks: jpeg magic bytes
    assert pair is not None and r._decoded(pair) is None
    assert r.result.bad_inputs == 1 and "corrupt jpeg image" in r.result.errors[0]


def test_missing_input_topic_is_a_clear_error(tmp_path, capsys):
    write_run(tmp_path / "in", "mcap", seconds=0.5)
    assert main([str(tmp_path / "in"), "--out", str(tmp_path / "o"), "--camera-topics", "/nope",
                 *ENGINE]) == 2
    assert "/nope" in capsys.readouterr().err


def test_score_known_errors():
    joints = ["a", "b"]
    t = np.arange(0, 100) * 10_000_000  # 100 Hz reference over 1 s
    v = np.stack([np.linspace(0, 1, 100), np.linspace(1, 0, 100)], axis=1)
    dt = 0.02
    chunks = []
    for i in range(0, 50, 5):
        t0 = int(t[i])
        times = (t0 + np.arange(4) * dt * 1e9 - t[0]) * 1e-9
        exact = np.stack([np.interp(times, t * 1e-9, v[:, j]) for j in range(2)], axis=1)
        chunks.append((t0, exact + np.array([0.1, -0.2])))
    s = score(chunks, t, v, dt, joints)
    assert s.mse_per_joint == pytest.approx([0.01, 0.04])
    assert s.mae_per_joint == pytest.approx([0.1, 0.2])
    assert s.mse == pytest.approx(0.025) and s.mse_per_step == pytest.approx([0.025] * 4)
    assert s.steps_scored == 40 and s.chunks_scored == 10
    with pytest.raises(ValueError, match="fewer than 2"):
        score(chunks, t[:1], v[:1], dt, joints)


def test_bag_tools_import_no_ros():
    import subprocess
    import sys

    code = ("import sys, oxygen_ros.cli.replay, oxygen_ros.cli.eval, oxygen_ros.bags.replay; "
            "bad = [m for m in sys.modules if m.split('.')[0] in ('rclpy', 'sensor_msgs', 'std_msgs')]; "
            "print(bad); sys.exit(1 if bad else 0)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr


def test_truncated_input_bag_replays_what_is_readable(tmp_path, capsys):
    write_run(tmp_path / "in", "mcap", seconds=6.0, image_size=160, with_outputs=False)
    f = next((tmp_path / "in").glob("*.mcap"))
    f.write_bytes(f.read_bytes()[: f.stat().st_size // 2])
    rc = main([str(tmp_path / "in"), "--out", str(tmp_path / "out"), *ENGINE, "--memory-every", "0"])
    cap = capsys.readouterr()
    assert rc == 1 and "cut off" in cap.err
    r = json.loads(cap.out.strip().splitlines()[-1])
    assert 0 < r["frames"] < 6 * CAMERA_HZ


def test_checkpoint_replay_like_the_node(tmp_path, capsys):
    """A checkpoint's n_action_steps cut each chunk and --camera-keys places the camera (the
    other model camera masked: the same single image, so the same actions), as the node does."""
    from oxygen_ros.engine.config import load_model_config
    from oxygen_ros.engine.model import NormStats
    from oxygen_ros.engine.families.loader import init_model
    from oxygen_ros.engine.families.pi05.writer import save_lerobot_checkpoint
    from oxygen_ros.engine.model.tokenizer import build_tiny_tokenizer

    mc = load_model_config("tiny")
    stats = NormStats.quantiles(np.full(3, -2.0, np.float32), np.full(3, 2.0, np.float32),
                                np.full(3, -3.0, np.float32), np.full(3, 3.0, np.float32))
    ck = save_lerobot_checkpoint(init_model(mc, seed=3), mc, tmp_path / "ck", norm_stats=stats,
                                 tokenizer=build_tiny_tokenizer(mc.vocab_size), n_action_steps=3)
    write_run(tmp_path / "in", "mcap", seconds=0.5)
    outs = []
    for name, keys in (("a", ["camera1"]), ("b", ["camera0"])):
        rc, r = _replay(capsys, tmp_path / "in", tmp_path / name, "--checkpoint", str(ck),
                        "--camera-keys", *keys, "--memory-every", "0")
        assert rc == 0 and r["frames"] == CAMERA_HZ // 2
        outs.append(_outputs(tmp_path / name)[1])
    assert outs[0].shape == (CAMERA_HZ // 2, 3, len(JOINTS))  # n_action_steps of 10
    np.testing.assert_allclose(outs[0], outs[1], atol=1e-5)
    assert main([str(tmp_path / "in"), "--out", str(tmp_path / "c"), *ENGINE, "--checkpoint", str(ck),
                 "--camera-keys", "wrist"]) == 2
    assert "not cameras of the model" in capsys.readouterr().err


def test_inputs_checked_like_the_node():
    """Stamps too far from their log time are refused, an unstamped message takes its log time,
    a recording clock jumping back restarts pairing (node/inputs.py does the same)."""
    from types import SimpleNamespace as NS

    from oxygen_ros.bags import messages as M
    from oxygen_ros.bags.replay import ReplayConfig, Replayer
    from oxygen_ros.bags.typestore import typestore
    from oxygen_ros.robot.values import StateMapping

    s = typestore()
    engine = NS(model_config=NS(vision=NS(image_size=8)), config=NS(instruction="x"))
    cfg = ReplayConfig(camera_topics=["/cam"], joint_state_topic="/js", joint_names=["a"])
    r = Replayer(engine, StateMapping(1), cfg)
    img = np.zeros((8, 8, 3), np.uint8)
    t = 10**18
    assert r._feed(t, "/cam", M.image(s, img, t)) is None
    assert r._feed(t, "/js", M.joint_state(s, ["a"], [0.0], t + 3 * 10**9)) is None  # 3 s ahead
    assert r.result.bad_inputs == 1 and "ahead of the log time" in r.result.errors[0]
    pair = r._feed(t + 1000, "/js", M.joint_state(s, ["a"], [0.0], 0))  # unstamped: its log time
    assert pair is not None and pair.state_stamp == pytest.approx((t + 1000) * 1e-9)
    back = t - 5 * 10**9  # the recording clock jumps back 5 s (a simulation reset)
    assert r._feed(back, "/js", M.joint_state(s, ["a"], [0.0], back)) is None
    # pairing restarted: a frame older than the last used one pairs again (without the reset
    # the pairer would skip it as already used)
    assert r._feed(back + 1000, "/cam", M.image(s, img, back + 1000)) is not None


def test_a_new_instruction_retires_frames_like_the_node():
    """A recorded ~/instruction change: a camera frame received before it never pairs under it
    (node/oxygen_node.py's applier retires them too); the same text again retires nothing."""
    from types import SimpleNamespace as NS

    from oxygen_ros.bags import messages as M
    from oxygen_ros.bags.replay import ReplayConfig, Replayer
    from oxygen_ros.bags.typestore import typestore
    from oxygen_ros.robot.values import StateMapping

    s = typestore()
    engine = NS(model_config=NS(vision=NS(image_size=8)), config=NS(instruction="x"))
    cfg = ReplayConfig(camera_topics=["/cam"], joint_state_topic="/js", joint_names=["a"],
                       instruction_topic="/instruction")
    r = Replayer(engine, StateMapping(1), cfg)
    img = np.zeros((8, 8, 3), np.uint8)
    t = 10**18
    assert r._feed(t, "/cam", M.image(s, img, t)) is None  # its joint state comes later
    assert r._feed(t + 1, "/instruction", M.make(s, "std_msgs/msg/String", data="x")) is None
    assert r._feed(t + 2, "/instruction", M.make(s, "std_msgs/msg/String", data="lock the door")) is None
    assert r._feed(t + 3, "/js", M.joint_state(s, ["a"], [0.0], t)) is None  # retired
    later = t + 100_000_000  # beyond the stamp tolerance of the joint state at t
    assert r._feed(later, "/cam", M.image(s, img, later)) is None
    pair = r._feed(later + 1, "/js", M.joint_state(s, ["a"], [0.0], later))
    assert pair is not None and pair.stamp == pytest.approx(later * 1e-9)
    assert r._instruction == "lock the door"


def test_replayed_commands_are_shaped_like_the_node(tmp_path, capsys):
    """With --joint-velocity-limits the replayed ~/joint_command starts at the recorded joint
    state and never moves faster than the limit: what the node would have sent."""
    from bagsynth import T0, state_at

    write_run(tmp_path / "in", "mcap", seconds=1.0)
    rc, r = _replay(capsys, tmp_path / "in", tmp_path / "out", "--joint-velocity-limits", "0.5",
                    "--joint-limits-lower", "-3", "-3", "-3", "--joint-limits-upper", "3", "3", "3")
    assert rc == 0 and r["limited_ticks"] > 0
    cmds = read_bag(tmp_path / "out").get("/oxygen/joint_command")
    values = np.array([m.position for _, m in cmds])
    first_ns = cmds[0][1].header.stamp.sec * 10**9 + cmds[0][1].header.stamp.nanosec
    # the newest joint state at the first command (joint states every 20 ms from T0)
    newest = state_at(((first_ns - T0) // (10**9 // 50)) * 0.02)
    np.testing.assert_allclose(values[0], newest, atol=1e-6)
    assert np.abs(np.diff(values, axis=0)).max() <= 0.5 * 0.02 + 1e-9


def test_velocity_commands_replay_as_the_node_sends_them(tmp_path, capsys):
    """Issue 38, item 2: --command-kinds velocity goes through the same command path as the
    node's command_kinds: ~/joint_command carries JointState.velocity, starting at rest, bounded
    by the velocity limit and changing by at most the acceleration limit per second; the
    replayed ~/action_chunk carries the values as velocities."""
    write_run(tmp_path / "in", "mcap", seconds=1.0)
    rc, r = _replay(capsys, tmp_path / "in", tmp_path / "out", "--command-kinds", "velocity",
                    "--joint-velocity-limits", "0.3", "--joint-acceleration-limits", "5.0")
    assert rc == 0 and r["commands"] > 0
    b = read_bag(tmp_path / "out")
    cmds = [m for _, m in b.get("/oxygen/joint_command")]
    assert all(len(m.position) == 0 for m in cmds)
    values = np.array([m.velocity for m in cmds])
    assert values.shape[1] == len(JOINTS) and np.all(values[0] == 0.0)
    assert np.abs(values).max() <= 0.3 + 1e-9 and np.abs(values).max() > 0.0
    assert np.abs(np.diff(values, axis=0)).max() <= 5.0 * 0.02 + 1e-9
    chunk = b.get("/oxygen/action_chunk")[0][1]
    assert len(chunk.points[0].velocities) == len(JOINTS) and len(chunk.points[0].positions) == 0


@pytest.mark.parametrize("rates", [(), ("--control-rate-hz", "200", "--chunk-rate-hz", "50")],
                         ids=["50Hz", "200Hz-from-50Hz-chunk"])
def test_rtc_blend_continues_the_executed_chunk(tmp_path, capsys, rates):
    """Two blends on one bag: with --chunk-blend rtc every inference is given what the replayed
    player executes from its observation on, and the seams between consecutive chunks (at the
    replayed control ticks) shrink to a fraction of the cross-fade run's; also with the control
    loop at 200 Hz and the chunk's steps at 50 Hz (d and the leftover in chunk steps)."""
    write_run(tmp_path / "in", "mcap", seconds=0.5)
    seams = {}
    for blend in ("crossfade", "rtc"):
        rc, _ = _replay(capsys, tmp_path / "in", tmp_path / blend, "--chunk-blend", blend,
                        "--memory-every", "0", "--S", "4", *rates)
        assert rc == 0
        seams[blend] = evaluate(read_bag(tmp_path / blend)).summary["seam_error"]
    assert seams["rtc"] < 0.5 * seams["crossfade"], seams


def test_every_head_of_a_starvla_model_gets_its_topic(tmp_path, capsys):
    """A model with several action heads: the replayed bag holds each head's chunk on
    action_chunk/<head>, the way the node publishes them, and action_chunk is the
    --action-head's; an unknown head is refused before any frame, naming the heads."""
    write_run(tmp_path / "in", "mcap", seconds=0.2)
    rc, r = _replay(capsys, tmp_path / "in", tmp_path / "out", "--preset", "starvla-tiny-e3",
                    "--action-head", "gr00t", "--memory-every", "0")
    assert rc == 0 and r["frames"] >= 1
    b, commanded, _ = _outputs(tmp_path / "out")
    heads = {h: np.stack([np.array([p.positions for p in m.points])
                          for _, m in b.get(f"/oxygen/action_chunk/{h}")]) for h in ("pi_v3", "gr00t")}
    assert heads["pi_v3"].shape == (r["frames"], 16, len(JOINTS))  # PI_v3: 16 steps
    assert heads["gr00t"].shape == commanded.shape == (r["frames"], 8, len(JOINTS))  # GR00T: 8
    np.testing.assert_array_equal(commanded, heads["gr00t"])
    assert main([str(tmp_path / "in"), "--out", str(tmp_path / "bad"), *ENGINE, "--preset",
                 "starvla-tiny-e3", "--action-head", "oft"]) == 2
    assert "its heads are pi_v3, gr00t" in capsys.readouterr().err


def test_replayed_action_chunk_is_clipped_and_control_runs_faster_than_the_chunk(tmp_path, capsys):
    """As the node (issue 26, items 6 and 8): action_chunk carries the chunk clipped like
    joint_command; --control-rate-hz 200 with --chunk-rate-hz 50 commands every 5 ms while the
    chunk's points stay 20 ms apart."""
    write_run(tmp_path / "in", "mcap", seconds=0.5)
    lim = ["--joint-limits-lower", *["-0.05"] * 3, "--joint-limits-upper", *["0.05"] * 3]
    rc, r = _replay(capsys, tmp_path / "in", tmp_path / "out", *lim, "--memory-every", "0",
                    "--control-rate-hz", "200", "--chunk-rate-hz", "50")
    assert rc == 0 and r["frames"] >= 1
    b, chunks, _ = _outputs(tmp_path / "out")
    # (replay's limits are its StateMapping's float32 values: 0.05 -> 0.0500000007)
    assert np.abs(chunks).max() <= 0.05 + 1e-8
    assert np.isclose(np.abs(chunks).max(), 0.05)  # the model went beyond: clipped, not scaled
    [(_, first), *_] = b.get("/oxygen/action_chunk")
    assert first.points[1].time_from_start.nanosec == 20_000_000
    cmds = b.get("/oxygen/joint_command")
    ns = np.array([m.header.stamp.sec * 10**9 + m.header.stamp.nanosec for _, m in cmds])
    assert np.median(np.diff(ns)) == 5_000_000
    values = np.array([m.position for _, m in cmds])
    # after the first command (the shaper's start: the recorded joint state) within the limits
    assert np.abs(values[1:]).max() <= 0.05 + 1e-8


def test_no_skip_latency_reaches_the_replayed_player(tmp_path):
    """--no-skip-latency is the node's chunk_skip_latency false (the stale-chunk fault): the
    replayed ChunkPlayer's config says so; by default it skips the latency, as the node."""
    from types import SimpleNamespace

    from oxygen_ros.bags.reader import BagData, bag_topics
    from oxygen_ros.cli.replay import config_from, parse_args

    write_run(tmp_path / "in", "mcap", seconds=0.2)
    bag = BagData(str(tmp_path / "in"))  # its topics, as the command reads them
    bag.topics.update(bag_topics(tmp_path / "in"))
    no_limits = SimpleNamespace(lower=None, upper=None)
    for extra, skip in (([], True), (["--no-skip-latency"], False)):
        args = parse_args([str(tmp_path / "in"), "--out", str(tmp_path / "o"), *extra])
        cfg = config_from(args, bag, 1, len(JOINTS))
        assert cfg.chunk_skip_latency is skip and cfg.command_config(no_limits).skip_latency is skip


def test_the_replayed_chunk_reaches_the_player_when_the_engine_hands_it_over():
    """The node acts on a chunk when Engine.step hands it over (before the frame's language
    work): oxygen-replay gives it to the player at the pair's time + FrameOutput.actions_ms, not
    + frame_ms (an isolated frame decoding whole texts would otherwise play every chunk 80 ms
    late here)."""
    from types import SimpleNamespace as NS

    from oxygen_ros.bags import messages as M
    from oxygen_ros.bags.replay import ReplayConfig, Replayer
    from oxygen_ros.bags.typestore import typestore
    from oxygen_ros.robot.values import StateMapping

    class Engine:
        model_config = NS(vision=NS(image_size=8), action_horizon=4)
        config = NS(instruction="x")

        def step(self, obs, on_actions=None):
            actions = np.zeros((4, 1), np.float32)
            if on_actions is not None:
                on_actions(actions, {"action": actions})
            return NS(frame=0, actions=actions, chunks={"action": actions}, updates=(),
                      frame_ms=80.0, actions_ms=10.0)

        def has_unfinished(self):
            return False

    s = typestore()
    cfg = ReplayConfig(camera_topics=["/cam"], joint_state_topic="/js", joint_names=["a"],
                       control_rate_hz=100.0)
    r = Replayer(Engine(), StateMapping(1), cfg)
    handed: list[float] = []
    set_chunk = r.player.set_chunk
    r.player.set_chunk = lambda chunk, stamp, now: handed.append(now) or set_chunk(chunk, stamp, now)
    t = 10**18
    img = np.zeros((8, 8, 3), np.uint8)
    events = [(t, "/cam", M.image(s, img, t)), (t, "/js", M.joint_state(s, ["a"], [0.0], t)),
              (t + 200 * 10**6, "/js", M.joint_state(s, ["a"], [0.0], t + 200 * 10**6))]
    res = r.run(events)
    [fr] = res.frames
    assert fr.done_ns == t + 80 * 10**6 and fr.ready_ns == t + 10 * 10**6
    assert handed and handed[0] == pytest.approx((t + 10 * 10**6) * 1e-9, abs=1e-3)


class _ChunkEngine:
    """A fake engine for the execution tests: frame n's chunk is `horizon` steps of value n,
    handed over 5 ms into its 30 ms frame."""

    def __init__(self, horizon: int) -> None:
        from types import SimpleNamespace as NS

        self.model_config = NS(vision=NS(image_size=8), action_horizon=horizon)
        self.config = NS(instruction="x")
        self.horizon, self.frame = horizon, 0

    def step(self, obs, on_actions=None):
        from types import SimpleNamespace as NS

        self.frame += 1
        actions = np.full((self.horizon, 1), float(self.frame), np.float32)
        if on_actions is not None:
            on_actions(actions, {"action": actions})
        return NS(frame=self.frame, actions=actions, chunks={"action": actions}, updates=(),
                  frame_ms=30.0, actions_ms=5.0)

    def has_unfinished(self):
        return False


def _one_joint_run(n: int) -> list:
    """A camera image and a joint state every 10 ms, `n` of each."""
    from oxygen_ros.bags import messages as M
    from oxygen_ros.bags.typestore import typestore

    s = typestore()
    t0, ms = 10**18, 10**6
    img = np.zeros((8, 8, 3), np.uint8)
    events = []
    for i in range(n):
        t = t0 + i * 10 * ms
        events += [(t, "/cam", M.image(s, img, t)), (t, "/js", M.joint_state(s, ["a"], [0.0], t))]
    return events


def test_sync_execution_replays_like_the_node():
    """chunk_execution sync in oxygen-replay: a chunk is played only when its observation was
    taken at rest, after the previous chunk's last step (the node's ChunkPlayer.takes); with
    stream every chunk is. Frames every 30 ms, chunks of 4 steps at 100 Hz (40 ms of motion)."""
    from oxygen_ros.bags.replay import ReplayConfig, Replayer
    from oxygen_ros.robot.values import StateMapping

    events = _one_joint_run(40)
    taken = {}
    for execution in ("stream", "sync"):
        cfg = ReplayConfig(camera_topics=["/cam"], joint_state_topic="/js", joint_names=["a"],
                           control_rate_hz=100.0, chunk_execution=execution)
        r = Replayer(_ChunkEngine(4), StateMapping(1), cfg)
        got: list[tuple[float, float]] = []
        set_chunk = r.player.set_chunk
        r.player.set_chunk = lambda chunk, stamp, now, got=got, f=set_chunk: (
            got.append((stamp, now)) or f(chunk, stamp, now))
        res = r.run(events)
        assert len(res.frames) >= 10
        taken[execution] = got
    assert len(taken["stream"]) >= 10  # every frame's chunk
    sync = taken["sync"]
    assert 2 <= len(sync) < len(taken["stream"])
    for (_, arrival), (stamp, _) in zip(sync, sync[1:]):
        assert stamp >= arrival + 4 * 0.01 - 1e-6  # observed after the previous chunk's motion
    # refused where the settings enter, with the command path's reason
    with pytest.raises(ValueError, match="chunk_execution sync"):
        ReplayConfig(camera_topics=["/cam"], joint_state_topic="/js", joint_names=["a"],
                     chunk_execution="sync", chunk_blend="rtc")


def test_replan_steps_replays_like_the_node():
    """chunk_replan_steps in oxygen-replay: a newer chunk takes over only after the playing one
    has played that many steps since its hand-over (the node's ChunkPlayer.takes with the
    hand-over time); with 0 every chunk does. Frames every 30 ms, chunks of 12 steps at 100 Hz."""
    from oxygen_ros.bags.replay import ReplayConfig, Replayer
    from oxygen_ros.robot.values import StateMapping

    events = _one_joint_run(60)
    taken = {}
    for steps in (0, 8):
        cfg = ReplayConfig(camera_topics=["/cam"], joint_state_topic="/js", joint_names=["a"],
                           control_rate_hz=100.0, chunk_replan_steps=steps)
        r = Replayer(_ChunkEngine(12), StateMapping(1), cfg)
        got: list[float] = []
        set_chunk = r.player.set_chunk
        r.player.set_chunk = lambda chunk, stamp, now, got=got, f=set_chunk: (
            f(chunk, stamp, now) and got.append(now)) or True
        res = r.run(events)
        assert len(res.frames) >= 10
        taken[steps] = got
    assert len(taken[0]) >= 10
    gaps = np.diff(taken[8])
    assert 2 <= len(taken[8]) < len(taken[0])
    assert np.all(gaps >= 8 * 0.01 - 1e-6)  # every plan followed for 8 steps at least
    assert np.any(np.diff(taken[0]) < 8 * 0.01 - 1e-6)  # 0: sooner
    with pytest.raises(ValueError, match="replan_steps"):
        ReplayConfig(camera_topics=["/cam"], joint_state_topic="/js", joint_names=["a"],
                     chunk_replan_steps=-1)
