"""pair -> Observation -> Engine.step -> robot chunk (robot/inference.py), once for the node's
inference worker and oxygen-replay."""
from __future__ import annotations

from types import SimpleNamespace as NS

import numpy as np
import pytest

from oxygen_ros.robot.chunk_player import ChunkPlayer
from oxygen_ros.robot.inference import PairInference
from oxygen_ros.robot.pairing import Pair
from oxygen_ros.robot.values import StateMapping

HORIZON, ACTION_DIM, JOINTS = 6, 8, ["a", "b"]
LOWER, UPPER = np.array([-1.0, 0.0], np.float32), np.array([1.0, 2.0], np.float32)


class FakeEngine:
    """Records each observation; its actions are a fixed ramp in model space."""

    def __init__(self, heads: tuple[str, ...] = ("action",), commanded: int = 0) -> None:
        self.model_config = NS(action_horizon=HORIZON, vision=NS(image_size=8))
        self.config = NS(instruction="default task")
        self.seen: list = []
        self.heads, self.commanded = heads, commanded

    def step(self, obs, on_actions=None):
        self.seen.append(obs)
        ramp = np.linspace(-0.9, 0.9, HORIZON * ACTION_DIM, dtype=np.float32).reshape(HORIZON, ACTION_DIM)
        # head i: the ramp scaled and cut to 6 - i steps (StarVLA's heads differ in horizon)
        chunks = {h: ramp[:HORIZON - i] * (1.0 - 0.3 * i) for i, h in enumerate(self.heads)}
        if on_actions is not None:  # the engine hands the chunk over before it returns
            on_actions(chunks[self.heads[self.commanded]], chunks)
        return NS(frame=len(self.seen) - 1, actions=chunks[self.heads[self.commanded]],
                  chunks=chunks, updates=[], tokens_this_frame=0,
                  frame_ms=1.0, mode="oxygen", k=1, n=1, s=1, batch_size=0,
                  kv=NS(blocks_used=0, blocks_total=1))


def _pair(stamp: float = 5.0) -> Pair:
    img = np.full((48, 64, 3), 77, np.uint8)
    return Pair(stamp=stamp, images=(img,), state=np.array([0.5, 1.5], np.float32),
                header_stamp=int(stamp * 1e9), image_stamps=(stamp,), state_stamp=stamp)


def _mapping() -> StateMapping:
    return StateMapping(2, LOWER, UPPER)


def test_cameras_in_model_order_state_normalised_chunk_cut_in_robot_units():
    engine, pair = FakeEngine(), _pair()
    player = ChunkPlayer(2, dt=0.02, lower=LOWER, upper=UPPER)
    out, chunk = PairInference(camera_slots=(1,), n_action_steps=4).step(
        engine, pair, pair.images, _mapping(), player, "pick it up")
    [obs] = engine.seen
    assert obs.camera_valid == (False, True) and obs.images[1] is pair.images[0]
    assert obs.images[0].shape == (1, 1, 3)  # the camera without a topic: masked
    np.testing.assert_allclose(obs.state, [0.5, 0.5])  # -1..1 over the joint limits
    assert obs.instruction == "pick it up" and obs.stamp == 5.0 and obs.prior is None
    assert chunk.shape == (4, 2)  # the checkpoint's 4 executed steps of 6, the 2 joints
    np.testing.assert_allclose(chunk, _mapping().to_robot(out.actions[:4]))
    # topics in model order pass unmasked, every step kept
    _, whole = PairInference().step(engine, pair, pair.images, _mapping(), player, "x")
    assert engine.seen[1].camera_valid is None and whole.shape == (HORIZON, 2)


def test_rtc_blend_gives_the_step_what_the_player_executes_from_the_observation_on():
    engine, mapping = FakeEngine(), _mapping()
    player = ChunkPlayer(2, dt=0.02, lower=LOWER, upper=UPPER, blend="rtc")
    inference = PairInference()
    first = _pair(5.0)
    _, chunk = inference.step(engine, first, first.images, mapping, player, "x")
    assert engine.seen[0].prior is None  # no chunk playing yet
    assert player.set_chunk(chunk, first.stamp, first.stamp + 0.04)
    for i in range(3):
        player.tick(5.04 + i * 0.02)
    second = _pair(5.06)
    inference.step(engine, second, second.images, mapping, player, "x")
    prior = engine.seen[1].prior
    assert prior is not None and 0 < prior.actions.shape[0] < HORIZON


def test_delta_commands_are_made_absolute_against_each_chunks_own_observation():
    """Issue 38, item 2: command_kinds delta: the chunk the player gets (and on_chunk hands
    over) is the pair's state + the model's deltas; with rtc the executed steps go back to the
    model relative to the NEW observation's state."""
    from oxygen_ros.robot.interface import RobotInterface

    robot = RobotInterface(("a", "b"), ("a", "b"), ("delta", "position"))
    mapping = StateMapping(2, None, None, None, robot)
    engine, pair = FakeEngine(), _pair()
    handed = []
    player = ChunkPlayer(2, dt=0.02, blend="rtc")
    out, chunk = PairInference().step(engine, pair, pair.images, mapping, player, "x",
                                      on_chunk=lambda c, heads: handed.append(c))
    np.testing.assert_allclose(chunk[:, 0], out.actions[:, 0] + 0.5, atol=1e-6)  # state a = 0.5
    np.testing.assert_allclose(chunk[:, 1], out.actions[:, 1], atol=1e-6)  # absolute already
    np.testing.assert_allclose(handed[0], chunk)
    assert player.set_chunk(chunk, pair.stamp, pair.stamp)
    player.tick(pair.stamp)
    moved = Pair(stamp=5.02, images=pair.images, state=np.array([0.7, 1.5], np.float32),
                 header_stamp=int(5.02e9), image_stamps=(5.02,), state_stamp=5.02)
    PairInference().step(engine, moved, moved.images, mapping, player, "x")
    prior = engine.seen[1].prior.actions
    left = player.leftover(moved.stamp)  # what the player executes from it on: absolute
    assert left is not None and prior.shape[0] == left.shape[0] > 1
    np.testing.assert_allclose(prior[:, 0], left[:, 0] - 0.7, atol=1e-6)  # relative to 0.7
    np.testing.assert_allclose(prior[:, 1], left[:, 1], atol=1e-6)


def test_node_worker_and_replay_send_the_same_observation_and_chunk():
    """The node's InferenceWorker.frame and oxygen-replay's Replayer, on the same pair and
    settings, give the engine the same observation and the robot the same chunk."""
    from oxygen_ros.bags.replay import ReplayConfig, Replayer
    from oxygen_ros.node.inference_worker import InferenceWorker

    pair = _pair()
    node_engine, replay_engine = FakeEngine(), FakeEngine()
    player = ChunkPlayer(2, dt=0.02, lower=LOWER, upper=UPPER)
    chunks: list[np.ndarray] = []
    pubs = NS(chunk=lambda chunk, *a, **k: chunks.append(chunk), stats=lambda *a: None,
              markers_text=lambda *a: None)
    text = NS(hand_over=lambda engine: None, route=lambda up, stamp: None)
    node = NS(get_clock=lambda: NS(now=lambda: NS(nanoseconds=int(5.05e9))))
    mapping = _mapping()
    worker = InferenceWorker(node_engine, lambda: mapping, player, None, pubs, text, JOINTS,
                             "stack the cups", "base", lambda *a: None, node, camera_slots=(1,),
                             n_action_steps=3)
    worker.frame(pair)
    cfg = ReplayConfig(camera_topics=["/cam"], joint_state_topic="/js", joint_names=JOINTS,
                       instruction="stack the cups", camera_slots=(1,), n_action_steps=3)
    replay_chunk, _ = Replayer(replay_engine, mapping, cfg)._infer(pair)
    [a], [b] = node_engine.seen, replay_engine.seen
    assert a.camera_valid == b.camera_valid == (False, True)
    assert all(x.shape == y.shape and np.array_equal(x, y) for x, y in zip(a.images, b.images))
    np.testing.assert_array_equal(a.state, b.state)
    assert (a.instruction, a.stamp, a.prior) == (b.instruction, b.stamp, b.prior)
    [node_chunk] = chunks
    assert node_chunk.shape == (3, 2)
    np.testing.assert_array_equal(node_chunk, replay_chunk)


def test_the_worker_publishes_every_head_in_robot_units():
    """A model with several heads: the worker hands the publishers every head's robot chunk
    (cut like the commanded one) and the commanded head's as the chunk (oxygen-replay's frames
    take them from the same PairInference.head_chunks: test_replay); a model with one head
    gives no per-head chunks."""
    from oxygen_ros.node.inference_worker import InferenceWorker

    heads = ("pi_v3", "gr00t", "oft")
    published: list = []
    pubs = NS(chunk=lambda chunk, *a, **k: published.append((chunk, k["heads"])),
              stats=lambda *a: None, markers_text=lambda *a: None)
    text = NS(hand_over=lambda engine: None, route=lambda up, stamp: None)
    node = NS(get_clock=lambda: NS(now=lambda: NS(nanoseconds=int(5.05e9))))
    mapping = _mapping()
    worker = InferenceWorker(FakeEngine(heads, commanded=1), lambda: mapping,
                             ChunkPlayer(2, dt=0.02, lower=LOWER, upper=UPPER), None, pubs, text,
                             JOINTS, "stack the cups", "base", lambda *a: None, node,
                             n_action_steps=5)
    out = worker.frame(_pair())
    [(chunk, by_head)] = published
    assert list(by_head) == list(heads)
    assert [c.shape for c in by_head.values()] == [(5, 2), (5, 2), (4, 2)]  # cut to 5, oft has 4
    np.testing.assert_array_equal(chunk, by_head["gr00t"])  # the commanded head
    np.testing.assert_array_equal(by_head["oft"], _mapping().to_robot(out.chunks["oft"]))
    assert not np.allclose(by_head["pi_v3"], by_head["gr00t"])
    assert PairInference().head_chunks(FakeEngine().step(None).chunks, mapping) == {}


def test_the_worker_plays_and_publishes_the_chunk_before_the_frame_ends():
    """The engine hands the chunk over before its language work: by then the worker has given
    it to the ChunkPlayer and published it (the robot acts on it while language decodes); stats
    come after the step. On the old worker the chunk waited for the whole frame."""
    from oxygen_ros.node.inference_worker import InferenceWorker

    events: list[str] = []
    player = ChunkPlayer(2, dt=0.02, lower=LOWER, upper=UPPER)

    class Decoding(FakeEngine):
        def step(self, obs, on_actions=None):
            def ready(actions, chunks):
                on_actions(actions, chunks)
                events.append(f"handed, player has chunk: {player.has_chunk}")
            out = super().step(obs, ready if on_actions else None)
            events.append("language decoded, step returns")
            return out

    pubs = NS(chunk=lambda *a, **k: events.append("chunk published"),
              stats=lambda *a: events.append("stats published"), markers_text=lambda *a: None)
    text = NS(hand_over=lambda engine: None, route=lambda up, stamp: None)
    node = NS(get_clock=lambda: NS(now=lambda: NS(nanoseconds=int(5.05e9))))
    worker = InferenceWorker(Decoding(), _mapping, player, None, pubs, text, JOINTS, "stack",
                             "base", lambda *a: None, node)
    worker.frame(_pair())
    assert events == ["chunk published", "handed, player has chunk: True",
                      "language decoded, step returns", "stats published"]


def test_executed_steps_the_parameter_else_the_checkpoints_within_the_chunk():
    from oxygen_ros.robot.inference import executed_steps

    assert executed_steps(0, 8, 8) == 8 and executed_steps(0, 0, 8) == 0  # 0: the whole chunk
    assert executed_steps(4, 8, 8) == 4 and executed_steps(8, 0, 8) == 8
    for bad in (9, -1):
        with pytest.raises(ValueError, match="n_action_steps"):
            executed_steps(bad, 8, 8)
