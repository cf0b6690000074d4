"""OxygenNode in-process (no spinning, no subprocess): checkpoint loading through
model.checkpoint, normalisation with the checkpoint's statistics, one inference frame, and
configure-time parameters refused while configured."""
import time

import numpy as np
import pytest

pytestmark = pytest.mark.ros
rclpy = pytest.importorskip("rclpy")
pytest.importorskip("oxygen_ros.msg")

from builtin_interfaces.msg import Time  # noqa: E402
from rclpy.lifecycle import TransitionCallbackReturn  # noqa: E402
from rclpy.parameter import Parameter  # noqa: E402

from oxygen_ros.node.oxygen_node import OxygenNode  # noqa: E402
from oxygen_ros.robot.pairing import Pair  # noqa: E402
from oxygen_ros.node.questions import Question  # noqa: E402


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    from oxygen_ros.engine.config import load_model_config
    from oxygen_ros.engine.model import NormStats
    from oxygen_ros.engine.families.loader import init_model
    from oxygen_ros.engine.families.pi05.writer import save_lerobot_checkpoint
    from oxygen_ros.engine.model.tokenizer import build_tiny_tokenizer

    mc = load_model_config("tiny")
    model = init_model(mc, seed=3)
    stats = NormStats.quantiles(np.full(6, -2.0, np.float32), np.full(6, 2.0, np.float32),
                                np.full(6, -3.0, np.float32), np.full(6, 3.0, np.float32))
    return save_lerobot_checkpoint(model, mc, tmp_path_factory.mktemp("ckpt") / "tiny", norm_stats=stats,
                                   tokenizer=build_tiny_tokenizer(mc.vocab_size), n_action_steps=4)


def test_checkpoint_configure_infer_cleanup(ctx, checkpoint):
    node = OxygenNode(context=ctx, parameter_overrides=[
        Parameter("model.checkpoint", value=str(checkpoint)),
        Parameter("model.num_threads", value=1)])
    try:
        assert node.trigger_configure() == TransitionCallbackReturn.SUCCESS
        rt = node.rt
        assert rt.mapping.norm is not None and rt.built.model_config.name == "tiny"
        # configure-time parameter refused while configured, live one accepted
        res = node.set_parameters([Parameter("model.preset", value="small")])[0]
        assert not res.successful and "configure" in res.reason
        assert node.set_parameters([Parameter("denoise_steps", value=3)])[0].successful
        # one frame straight through the worker's code path (publishers inactive: dropped)
        size = rt.built.model_config.vision.image_size
        img = np.random.default_rng(0).integers(0, 255, (size, size, 3), dtype=np.uint8)
        state = np.linspace(-1.5, 1.5, 6).astype(np.float32)
        stamp = Time(sec=100, nanosec=5)
        out = rt.worker.frame(Pair(stamp=100.0, images=(img,), state=state, header_stamp=stamp,
                                   image_stamps=(100.0,), state_stamp=100.0))
        assert rt.built.engine.config.denoise_steps == 3  # applied before the frame
        assert out.s == 3 and rt.worker.source_stamp(out.frame) == stamp
        sample = rt.player.value_at(100.0)
        assert sample is not None and sample.values.shape == (6,)
        assert rt.player.horizon == 4 < out.actions.shape[0]  # the checkpoint's n_action_steps
        # actions unnormalised with the checkpoint's q01/q99: a = (x + 1) * 3 - 3 for 6 joints
        expect = (out.actions[0, :6].astype(np.float64) + 1.0) * 6.0 / 2.0 - 3.0
        assert np.allclose(sample.values, expect, atol=1e-5)
        assert node.trigger_cleanup() == TransitionCallbackReturn.SUCCESS
        assert node.rt is None
        assert node.set_parameters([Parameter("model.preset", value="small")])[0].successful
    finally:
        node.stop()
        node.destroy_node()


def test_too_many_joints_fails_configure(ctx):
    node = OxygenNode(context=ctx, parameter_overrides=[
        Parameter("joint_names", value=[f"j{i}" for i in range(9)])])  # tiny: action_dim 8
    try:
        assert node.trigger_configure() == TransitionCallbackReturn.FAILURE
        assert node.rt is None and node.state_label == "unconfigured"
    finally:
        node.stop()
        node.destroy_node()


def test_checkpoint_without_tokenizer_stays_unconfigured_then_named_cameras(ctx, tmp_path, monkeypatch):
    from oxygen_ros.engine.config import load_model_config
    from oxygen_ros.engine.families.loader import init_model
    from oxygen_ros.engine.families.pi05.writer import save_openpi_checkpoint
    from oxygen_ros.engine.model.tokenizer import build_tiny_tokenizer

    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.setenv("OPENPI_DATA_HOME", str(tmp_path / "openpi"))
    mc = load_model_config("tiny")
    stats = {"state": {"q01": np.full(6, -1.0), "q99": np.ones(6)},
             "actions": {"q01": np.full(6, -2.0), "q99": np.full(6, 2.0)}}
    folder = save_openpi_checkpoint(init_model(mc, seed=4), mc, tmp_path / "op", stats)
    node = OxygenNode(context=ctx, parameter_overrides=[
        Parameter("model.checkpoint", value=str(folder)), Parameter("model.num_threads", value=1)])
    try:
        assert node.trigger_configure() == TransitionCallbackReturn.FAILURE  # no tokenizer anywhere
        assert node.rt is None and node.state_label == "unconfigured"
        build_tiny_tokenizer(mc.vocab_size).save(tmp_path / "tok")
        assert node.set_parameters([Parameter("model.tokenizer", value=str(tmp_path / "tok")),
                                    Parameter("camera_keys", value=["left_wrist_0_rgb"])])[0].successful
        assert node.trigger_configure() == TransitionCallbackReturn.SUCCESS
        rt = node.rt
        assert rt.built.camera_slots == (1,)  # the only topic feeds the wrist camera; base is masked
        size = mc.vision.image_size
        img = np.random.default_rng(1).integers(0, 255, (size, size, 3), dtype=np.uint8)
        out = rt.worker.frame(Pair(stamp=5.0, images=(img,), state=np.zeros(6, np.float32),
                                   header_stamp=Time(sec=5), image_stamps=(5.0,), state_stamp=5.0))
        assert np.isfinite(out.actions).all()
        sample = rt.player.value_at(5.0)
        expect = (out.actions[0, :6].astype(np.float64) + 1.0) / 2.0 * (4.0 + 1e-6) - 2.0  # openpi
        assert np.allclose(sample.values, expect, atol=1e-5)
    finally:
        node.stop()
        node.destroy_node()


def test_starvla_heads_each_on_a_topic_and_the_configured_one_commanded(ctx):
    """A StarVLA model with two heads: model.action_head picks the commanded chunk (player and
    ~/action_chunk), every head's chunk goes out on ~/action_chunk/<head> (received by a
    subscriber once the node is active) and is recorded by default; a head the model does not
    have fails configure with the model's head names."""
    from types import SimpleNamespace as NS

    from oxygen_ros.node.recording import default_topics

    def make(head):
        return OxygenNode(context=ctx, parameter_overrides=[
            Parameter("model.preset", value="starvla-tiny-e3"), Parameter("model.action_head", value=head),
            Parameter("model.num_threads", value=1), Parameter("memory.enabled", value=False),
            Parameter("denoise_steps", value=2), Parameter("joint_names", value=[f"j{i}" for i in range(7)])])

    node = make("oft")
    errors: list[str] = []
    logger = node.get_logger()
    node.get_logger = lambda: NS(error=errors.append, info=logger.info, warning=logger.warning,
                                 debug=lambda *a: None)
    try:
        assert node.trigger_configure() == TransitionCallbackReturn.FAILURE
        assert any("'oft' is not a head" in e and "pi_v3, gr00t" in e for e in errors), errors
    finally:
        node.stop()
        node.destroy_node()
    node = make("gr00t")
    try:
        assert node.trigger_configure() == TransitionCallbackReturn.SUCCESS
        rt = node.rt
        assert set(rt.pubs.head_chunks) == {"pi_v3", "gr00t"}
        engine = next(s for s in node._diagnostics() if s[0] == "engine")
        assert engine[3]["action_head"] == "gr00t" and engine[3]["heads"] == "pi_v3, gr00t"
        assert {node.resolve_topic_name(f"~/action_chunk/{h}") for h in ("pi_v3", "gr00t")} <= set(
            default_topics(node, ["/cam"], "/js", heads=("pi_v3", "gr00t")))
        # activated: the chunks cross DDS to a subscriber in this process
        from rclpy.executors import SingleThreadedExecutor
        from trajectory_msgs.msg import JointTrajectory

        assert node.trigger_activate() == TransitionCallbackReturn.SUCCESS
        probe = rclpy.create_node("head_probe", context=ctx)
        sent: dict[str, list] = {}
        topics = {"commanded": "~/action_chunk", "pi_v3": "~/action_chunk/pi_v3",
                  "gr00t": "~/action_chunk/gr00t"}
        for key, topic in topics.items():
            sent[key] = []
            probe.create_subscription(JointTrajectory, node.resolve_topic_name(topic),
                                      sent[key].append, 10)
        ex = SingleThreadedExecutor(context=ctx)
        ex.add_node(probe)
        pubs = [rt.pubs.action_chunk, *rt.pubs.head_chunks.values()]
        deadline = time.monotonic() + 10.0
        while time.monotonic() < deadline and min(p.get_subscription_count() for p in pubs) < 1:
            ex.spin_once(timeout_sec=0.05)
        size = rt.built.model_config.vision.image_size
        img = np.random.default_rng(5).integers(0, 255, (size, size, 3), dtype=np.uint8)
        out = rt.worker.frame(Pair(stamp=7.0, images=(img,), state=np.zeros(7, np.float32),
                                   header_stamp=Time(sec=7), image_stamps=(7.0,), state_stamp=7.0))
        np.testing.assert_array_equal(out.actions, out.chunks["gr00t"])
        assert rt.player.horizon == 8  # GR00T's chunk of 8 steps is what plays
        deadline = time.monotonic() + 10.0
        while time.monotonic() < deadline and min(len(v) for v in sent.values()) < 1:
            ex.spin_once(timeout_sec=0.05)
        ex.remove_node(probe)
        probe.destroy_node()

        def points(msgs):
            [msg] = msgs
            return np.array([p.positions for p in msg.points])
        assert points(sent["pi_v3"]).shape == (16, 7) and points(sent["gr00t"]).shape == (8, 7)
        np.testing.assert_array_equal(points(sent["commanded"]), points(sent["gr00t"]))
        assert not np.allclose(points(sent["pi_v3"])[:8], points(sent["gr00t"]))
    finally:
        node.stop()
        node.destroy_node()


def test_joint_limits_live_for_normalisation_and_clipping(ctx):
    """Without checkpoint statistics the joint limits map robot units to [-1, 1]: a live change
    applies to the next frame's (un)normalisation as well as to the clipping."""
    node = OxygenNode(context=ctx, parameter_overrides=[
        Parameter("model.num_threads", value=1), Parameter("memory.enabled", value=False),
        Parameter("joint_limits_lower", value=[-1.0] * 6),
        Parameter("joint_limits_upper", value=[1.0] * 6)])
    try:
        assert node.trigger_configure() == TransitionCallbackReturn.SUCCESS
        assert node.set_parameters([Parameter("joint_limits_lower", value=[0.0] * 6),
                                    Parameter("joint_limits_upper", value=[4.0] * 6)])[0].successful
        rt = node.rt
        size = rt.built.model_config.vision.image_size
        img = np.random.default_rng(1).integers(0, 255, (size, size, 3), dtype=np.uint8)
        state = np.full(6, 3.0, np.float32)  # 3.0 in [0, 4] -> 0.5 in model space
        assert np.allclose(rt.mapping.to_model(state), 0.5)
        out = rt.worker.frame(Pair(stamp=100.0, images=(img,), state=state,
                                   header_stamp=Time(sec=100), image_stamps=(100.0,), state_stamp=100.0))
        expect = np.clip((out.actions[0, :6].astype(np.float64) + 1.0) * 2.0, 0.0, 4.0)
        assert np.allclose(rt.player.value_at(100.0).values, expect, atol=1e-5)
    finally:
        node.stop()
        node.destroy_node()


def test_command_shaping_parameters_live_gate_and_float64_array(ctx):
    """command_type float64_array publishes Float64MultiArray; bad shaper limits are refused at
    the parameter with the reason; good ones apply live; a chunk far from the measured pose is
    refused by the start gate (not played, named) until the gate is switched off."""
    from std_msgs.msg import Float64MultiArray

    node = OxygenNode(context=ctx, parameter_overrides=[
        Parameter("model.num_threads", value=1), Parameter("memory.enabled", value=False),
        Parameter("command_type", value="float64_array"),
        Parameter("joint_velocity_limits", value=[1.0]),
        Parameter("max_start_deviation", value=[0.5])])
    try:
        assert node.trigger_configure() == TransitionCallbackReturn.SUCCESS
        rt = node.rt
        assert rt.pubs.joint_command.msg_type is Float64MultiArray
        for value, words in (([1.0] * 4, "4 entries"), ([-1.0], "> 0"), ([0.0], "> 0")):
            res = node.set_parameters([Parameter("joint_velocity_limits", value=value)])[0]
            assert not res.successful and words in res.reason, res.reason
        res = node.set_parameters([Parameter("max_start_deviation", value=[-0.5])])[0]
        assert not res.successful and ">= 0" in res.reason
        assert np.allclose(rt.control.shaper.velocity, 1.0)  # refused changes changed nothing
        assert node.set_parameters([Parameter("joint_velocity_limits", value=[2.0] * 6)])[0].successful
        assert np.allclose(rt.control.shaper.velocity, 2.0)
        size = rt.built.model_config.vision.image_size
        img = np.random.default_rng(2).integers(0, 255, (size, size, 3), dtype=np.uint8)
        state = np.full(6, 10.0, np.float32)  # far from any chunk of the random model (~[-1, 1])

        def frame():
            now = node.get_clock().now()
            t = now.nanoseconds * 1e-9
            rt.inputs.measured.update(t, state)
            rt.worker.frame(Pair(stamp=t, images=(img,), state=state, header_stamp=now.to_msg(),
                                 image_stamps=(t,), state_stamp=t))

        frame()
        assert not rt.player.has_chunk and rt.control.shaper.gated == 1
        assert "would start" in rt.control.gate_message and "joint_" in rt.control.gate_message
        assert node.set_parameters([Parameter("max_start_deviation", value=[0.0])])[0].successful
        frame()
        assert rt.player.has_chunk and rt.control.shaper.gated == 1
    finally:
        node.stop()
        node.destroy_node()


# A failing frame loses no question: questions handed to the engine before a frame that fails
# get their answer from the next good frame (the node queues and hands over; the engine keeps a
# failing frame's pending requests). The worker's frame code path with the model's denoise
# failing once. (In-process nodes live in this file: it runs after the process tests, whose
# /oxygen services must not meet a destroyed in-process /oxygen in the graph.)
def test_questions_survive_a_failing_frame():
    ctx = rclpy.Context()
    rclpy.init(context=ctx)
    node = OxygenNode(context=ctx, parameter_overrides=[Parameter("model.num_threads", value=1),
                                                        Parameter("memory.enabled", value=False)])
    try:
        assert node.trigger_configure() == TransitionCallbackReturn.SUCCESS
        rt = node.rt
        size = rt.built.model_config.vision.image_size
        rng = np.random.default_rng(0)

        def pair(i):
            img = rng.integers(0, 255, (size, size, 3), dtype=np.uint8)
            t = 100.0 + 0.04 * i
            return Pair(stamp=t, images=(img,), state=np.zeros(6, np.float32),
                        header_stamp=Time(sec=100, nanosec=i), image_stamps=(t,), state_stamp=t)

        finals = {}
        prompts = [f"question {i}: what is on the table?" for i in range(5)]
        # frames are driven by hand below, without activating (no threads): questions are taken
        # as on an active node (an inactive one refuses them)
        rt.text._active = lambda: True
        for p in prompts:
            assert rt.text.submit(Question(p, sink=lambda m, p=p: finals.setdefault(p, []).append(m)
                                           if m.is_final else None))
        runner = rt.built.engine.runner
        real = runner.denoise
        calls = {"n": 0}

        def fail_once(*args, **kwargs):
            calls["n"] += 1
            if calls["n"] == 1:
                raise RuntimeError("injected denoise failure")
            return real(*args, **kwargs)
        runner.denoise = fail_once
        with pytest.raises(RuntimeError, match="injected"):
            rt.worker.frame(pair(0))  # the questions were handed to the engine, the frame fails
        for i in range(1, 40):
            rt.worker.frame(pair(i))
            if len(finals) == len(prompts):
                break
        assert sorted(finals) == sorted(prompts)
        assert all(len(v) == 1 and v[0].finish_reason in ("length", "eos") for v in finals.values())
    finally:
        node.stop()
        node.destroy_node()
        rclpy.try_shutdown(context=ctx)


def test_action_rate_target_live_and_infeasible_diagnostic(ctx):
    """target_action_hz and k_min are live engine parameters (k_min above k refused with the
    engine's reason); a target no frame can meet is reported: FrameOutput/FrameStats fields and
    the engine diagnostic WARN naming it."""
    node = OxygenNode(context=ctx, parameter_overrides=[Parameter("model.num_threads", value=1)])
    try:
        assert node.trigger_configure() == TransitionCallbackReturn.SUCCESS
        assert node.set_parameters([Parameter("target_action_hz", value=1000.0)])[0].successful
        assert node.set_parameters([Parameter("target_strict", value=True)])[0].successful
        assert not node.set_parameters([Parameter("target_strict", value=1)])[0].successful
        res = node.set_parameters([Parameter("k_min", value=8)])[0]
        assert not res.successful and "k_min" in res.reason  # k is 4 by default
        assert node.trigger_activate() == TransitionCallbackReturn.SUCCESS
        rt = node.rt
        size = rt.built.model_config.vision.image_size
        img = np.zeros((size, size, 3), dtype=np.uint8)
        state = np.zeros(6, np.float32)
        outs = [rt.worker.frame(Pair(stamp=100.0 + i, images=(img,), state=state,
                                     header_stamp=Time(sec=100 + i), image_stamps=(100.0 + i,),
                                     state_stamp=100.0 + i)) for i in range(3)]
        assert rt.built.engine.config.target_action_hz == 1000.0
        assert rt.built.engine.config.target_strict is True
        assert all(o.target_action_hz == 1000.0 and not o.target_feasible for o in outs)
        assert outs[-1].k_chosen == 1
        engine = next(s for s in node._diagnostics() if s[0] == "engine")
        assert engine[1] == "WARN" and "infeasible" in engine[2]
        assert engine[3]["target_feasible"] is False and engine[3]["k_chosen"] == 1
        assert engine[3]["target_strict"] is True
        assert node.trigger_deactivate() == TransitionCallbackReturn.SUCCESS
        assert node.trigger_cleanup() == TransitionCallbackReturn.SUCCESS
    finally:
        node.stop()
        node.destroy_node()


def test_rtc_blend_gives_the_engine_the_executed_steps_and_the_counted_delay(ctx, checkpoint):
    """chunk_blend rtc (live): each inference gets the steps executed from its observation on,
    normalised back to model units with the checkpoint's statistics, and the delay counted in
    control ticks at the previous hand-over (not the frame's latency: the test's wall clock is
    ~1.7e9 s after the stamps, a latency estimate would be enormous)."""
    node = OxygenNode(context=ctx, parameter_overrides=[
        Parameter("model.checkpoint", value=str(checkpoint)),
        Parameter("model.num_threads", value=1), Parameter("memory.enabled", value=False)])
    try:
        assert node.trigger_configure() == TransitionCallbackReturn.SUCCESS
        rt = node.rt
        assert rt.player.blend == "crossfade"
        assert node.set_parameters([Parameter("chunk_blend", value="rtc")])[0].successful
        assert rt.player.blend == "rtc"
        seen = []
        step = rt.built.engine.step
        rt.built.engine.step = lambda obs, on_actions=None: seen.append(obs.prior) or step(obs, on_actions)
        size = rt.built.model_config.vision.image_size
        img = np.random.default_rng(0).integers(0, 255, (size, size, 3), dtype=np.uint8)
        state = np.zeros(6, np.float32)
        dt = rt.player.dt

        def frame(t, measured=None):
            # the robot follows the plan: its state is the value played at the stamp
            left = rt.player.leftover(t)
            s = measured if measured is not None else state if left is None \
                else left[0].astype(np.float32)
            return rt.worker.frame(Pair(stamp=t, images=(img,), state=s,
                                        header_stamp=Time(sec=int(t)), image_stamps=(t,),
                                        state_stamp=t))

        first = frame(100.0)
        assert seen[-1] is None  # nothing executed yet
        for i in range(3):
            rt.player.tick(100.0 + i * dt)  # steps 0, 1, 2 of the first chunk
        frame(100.0 + dt)
        prior = seen[-1]
        # from the stamp on: the played steps 1 and 2, then the rest of the 4-step chunk
        np.testing.assert_allclose(prior.actions, first.actions[1:4, :6], atol=1e-5)
        assert prior.delay == 0  # the first chunk was handed over before any tick
        assert rt.player.last_delay == 2  # ticks at 100 + dt and 100 + 2 dt since the stamp
        rt.player.tick(100.0 + 3 * dt)
        frame(100.0 + 3 * dt)
        assert seen[-1].delay == 2
        # a robot further than max_tracking_error (0.2) from the played value (reset, moved by
        # hand): no executed plan to continue, an unguided chunk
        rt.player.tick(100.0 + 4 * dt)
        far = rt.player.leftover(100.0 + 4 * dt)[0].astype(np.float32) + 0.5
        frame(100.0 + 4 * dt, measured=far)
        assert seen[-1] is None
    finally:
        node.stop()
        node.destroy_node()


def test_rtc_blend_refused_where_the_family_has_no_guided_loop(ctx):
    """chunk_blend rtc on a qwen3vl preset: refused at configure and at the parameter, with the
    reason, instead of every frame failing later when its action prior reaches the engine."""
    node = OxygenNode(context=ctx, parameter_overrides=[
        Parameter("model.preset", value="xr0-tiny"), Parameter("chunk_blend", value="rtc"),
        Parameter("max_active_requests", value=2)])
    try:
        assert node.trigger_configure() == TransitionCallbackReturn.FAILURE
        assert node.rt is None
        node.set_parameters([Parameter("chunk_blend", value="crossfade")])
        assert node.trigger_configure() == TransitionCallbackReturn.SUCCESS
        res = node.set_parameters([Parameter("chunk_blend", value="rtc")])[0]
        assert not res.successful and "not a capability of the qwen3vl family" in res.reason \
            and "families that have it: pi05)" in res.reason, res.reason
        assert node.get_parameter("chunk_blend").value == "crossfade"
    finally:
        node.stop()
        node.destroy_node()


def _changed(spec):
    """A valid value other than the default, inside the node's range."""
    if spec.type == "bool":
        return not spec.default
    if spec.choices:
        return next(c for c in spec.choices if c != spec.default)
    if spec.type == "string":
        return spec.default.rstrip() + " now\n" if spec.default.endswith("\n") else "stack the cubes"
    lo, hi = spec.range
    return type(spec.default)(spec.default + 1 if spec.default + 1 <= hi else lo)


def test_every_live_engine_parameter_reaches_the_engine_and_ranges_are_refused(ctx):
    """Each live engine parameter set through the parameter callback is in the engine's config
    at the next frame, under its knob's field; a value outside the node's range is refused with
    a reason naming the range, and the engine keeps its value."""
    from oxygen_ros.node import params as P

    node = OxygenNode(context=ctx, parameter_overrides=[Parameter("model.num_threads", value=1)])
    try:
        assert node.trigger_configure() == TransitionCallbackReturn.SUCCESS
        specs = [s for s in P.PARAMETERS if s.field and s.kind == P.LIVE]
        values = {s.name: _changed(s) for s in specs}
        for name, value in values.items():
            res = node.set_parameters([Parameter(name, value=value)])[0]
            assert res.successful, (name, value, res.reason)
        res = node.set_parameters([Parameter("decode_steps_per_frame", value=65)])[0]
        assert not res.successful and "Min: 1, Max: 64" in res.reason  # the descriptor's range
        res = node.set_parameters([Parameter("mode", value="fast")])[0]
        assert not res.successful and "isolated, parallel, shared, oxygen" in res.reason
        rt = node.rt
        size = rt.built.model_config.vision.image_size
        rt.worker.frame(Pair(stamp=100.0, images=(np.zeros((size, size, 3), np.uint8),),
                             state=np.zeros(6, np.float32), header_stamp=Time(sec=100),
                             image_stamps=(100.0,), state_stamp=100.0))
        cfg = rt.built.engine.config
        for s in specs:
            assert getattr(cfg, s.field) == values[s.name], s.name
        assert node.set_parameters([Parameter("memory.enabled", value=False)])[0].successful
        rt.worker.frame(Pair(stamp=101.0, images=(np.zeros((size, size, 3), np.uint8),),
                             state=np.zeros(6, np.float32), header_stamp=Time(sec=101),
                             image_stamps=(101.0,), state_stamp=101.0))
        assert rt.built.engine.config.memory_every_n_frames == 0
        assert rt.built.engine.config.decode_steps_per_frame == values["decode_steps_per_frame"]
        assert node.trigger_cleanup() == TransitionCallbackReturn.SUCCESS
    finally:
        node.stop()
        node.destroy_node()


def test_questions_never_wait_for_a_later_activation(ctx):
    """Every question ends while the activation it was asked in lasts: the open ones at
    deactivate (aborted), and those the ~/ask topic delivers after it (still queued in the
    subscription when the node deactivated) or while inactive are refused at once, saying why;
    none is answered after the next activate from a later observation."""
    from std_msgs.msg import String

    from oxygen_ros.node.questions import ABORTED_DEACTIVATE, INACTIVE

    node = OxygenNode(context=ctx, parameter_overrides=[Parameter("model.num_threads", value=1)])
    finals = []
    try:
        assert node.trigger_configure() == TransitionCallbackReturn.SUCCESS
        rt = node.rt
        rt.pubs.refusal = lambda prompt, reason, stamp, rid: finals.append((prompt, reason)) or \
            type("M", (), {"is_final": True, "finish_reason": reason})()
        assert node.trigger_activate() == TransitionCallbackReturn.SUCCESS
        rt.text._ask_cb(String(data="open at deactivate"))
        assert node.trigger_deactivate() == TransitionCallbackReturn.SUCCESS
        assert finals == [("open at deactivate", ABORTED_DEACTIVATE)]
        rt.text._ask_cb(String(data="delivered after the deactivate"))
        assert finals[-1] == ("delivered after the deactivate", INACTIVE)
        assert rt.text.questions.outstanding == 0  # nothing waits for the next activate
        assert node.trigger_activate() == TransitionCallbackReturn.SUCCESS
        assert rt.text.questions.outstanding == 0 and len(finals) == 2
        assert node.trigger_deactivate() == TransitionCallbackReturn.SUCCESS
    finally:
        node.stop()
        node.destroy_node()


def test_a_hybrid_model_shows_its_state_slots_in_the_engine_diagnostic(ctx):
    """qwen35 keeps a recurrent state per sequence in slots of the pool: the engine diagnostic
    says how many are in use of how many, as kv_blocks does for the blocks; a model without
    recurrent layers has no such value."""
    for preset, slots in (("qwen35-tiny", True), ("tiny", False)):
        node = OxygenNode(context=ctx, parameter_overrides=[
            Parameter("model.preset", value=preset), Parameter("model.num_threads", value=1),
            Parameter("max_active_requests", value=2)])
        try:
            assert node.trigger_configure() == TransitionCallbackReturn.SUCCESS
            assert node.trigger_activate() == TransitionCallbackReturn.SUCCESS
            rt = node.rt
            size = rt.built.model_config.vision.image_size
            img = np.zeros((size, size, 3), dtype=np.uint8)
            out = rt.worker.frame(Pair(stamp=100.0, images=(img,), state=np.zeros(6, np.float32),
                                       header_stamp=Time(sec=100), image_stamps=(100.0,),
                                       state_stamp=100.0))
            engine = next(s for s in node._diagnostics() if s[0] == "engine")[3]
            if slots:
                used, total = map(int, engine["state_slots"].split("/"))
                assert total == out.kv.state_slots_total > 0
                assert used == out.kv.state_slots_used > 0  # the memory request born this frame
            else:
                assert "state_slots" not in engine
            assert node.trigger_deactivate() == TransitionCallbackReturn.SUCCESS
            assert node.trigger_cleanup() == TransitionCallbackReturn.SUCCESS
        finally:
            node.stop()
            node.destroy_node()


@pytest.mark.skipif(not hasattr(__import__("os"), "sched_getaffinity"), reason="Linux thread affinity")
def test_inference_and_control_threads_run_on_their_cpus(ctx):
    """inference_cpus / control_cpus: each thread is on its CPUs once active (what the kernel
    says of the thread, not only what the node reports), every other thread off the model's
    CPU until deactivate; a CPU the process may not use is refused with the reason."""
    import os

    before = os.sched_getaffinity(0)
    cpu = min(before)
    node = OxygenNode(context=ctx, parameter_overrides=[Parameter("model.num_threads", value=1)])
    try:
        res = node.set_parameters([Parameter("inference_cpus", value=[100_000])])[0]
        assert not res.successful and "CPU 100000 is not one this process may run on" in res.reason
        assert node.set_parameters([Parameter("inference_cpus", value=[cpu]),
                                    Parameter("control_cpus", value=[cpu])])[0].successful
        assert node.trigger_configure() == TransitionCallbackReturn.SUCCESS
        assert node.trigger_activate() == TransitionCallbackReturn.SUCCESS
        rt = node.rt
        deadline = time.monotonic() + 5.0
        while ("CPUs" not in rt.control.scheduling or rt.worker.placement == "any CPU") \
                and time.monotonic() < deadline:
            time.sleep(0.01)
        assert os.sched_getaffinity(rt.control._thread.native_id) == {cpu}
        assert os.sched_getaffinity(rt.worker._thread.native_id) == {cpu}
        assert rt.control.scheduling == f"normal (control_priority 0), CPUs {cpu}"
        engine = next(s for s in node._diagnostics() if s[0] == "engine")
        assert engine[3]["inference_cpus"] == f"CPUs {cpu}"
        # the process's other threads (this one, the middleware's) are kept off the model's CPU
        # while active, and get their CPUs back at deactivate
        assert os.sched_getaffinity(0) == (before - {cpu} or before)
        assert node.trigger_deactivate() == TransitionCallbackReturn.SUCCESS
        assert os.sched_getaffinity(0) == before
        assert node.trigger_cleanup() == TransitionCallbackReturn.SUCCESS
    finally:
        node.stop()
        node.destroy_node()


def test_a_new_instruction_retires_the_frames_received_before_it(ctx):
    """The instruction's applier: frames the inputs hold when the text changes are never paired
    or run under it; setting the same text again retires nothing."""
    node = OxygenNode(context=ctx, parameter_overrides=[Parameter("model.num_threads", value=1)])
    try:
        assert node.trigger_configure() == TransitionCallbackReturn.SUCCESS
        pairer, worker = node.rt.inputs.pairer, node.rt.worker
        pairer.add_image(0, 50.0, np.zeros((8, 8, 3), np.uint8))
        assert node.set_parameters([Parameter("instruction", value=worker.instruction)])[0].successful
        assert not pairer.retired(50.0)  # the same text: no change
        assert node.set_parameters([Parameter("instruction", value="stack the cubes")])[0].successful
        assert worker.instruction == "stack the cubes" and pairer.retired(50.0)
        assert not pairer.retired(50.04)  # the next camera frame
        assert node.trigger_cleanup() == TransitionCallbackReturn.SUCCESS
    finally:
        node.destroy_node()
