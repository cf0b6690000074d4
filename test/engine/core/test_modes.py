"""Modes switch live: `update_config(mode=...)` takes effect on the next frame with requests in
flight; none is lost or restarted, and every request's tokens (and every action chunk) are still
those of isolated execution. Every ordered pair of modes."""
from __future__ import annotations

import inspect
import itertools
import threading
from types import SimpleNamespace

import pytest

from oxygen_ros.bench.compare import collect_requests
from oxygen_ros.bench.compare import compare_runs
from oxygen_ros.engine.config import MODES, PRESETS, EngineConfig
from oxygen_ros.engine.core.engine import Engine
from oxygen_ros.engine.families.loader import init_model
from oxygen_ros.engine.core.frame_ops import FramePrimitives
from oxygen_ros.engine.core.modes import MODES as STRATEGIES
from oxygen_ros.engine.core.modes import FrameOps
from oxygen_ros.engine.core.synthetic import SyntheticStream
from oxygen_ros.engine.model.tokenizer import build_tiny_tokenizer

MC = PRESETS["tiny"]
QUESTIONS = ["What is on the table?\n", "Describe the gripper.\n",
             "Is the red cube inside the bowl now, or is it still on the table next to it?\n"]
SWITCH = 2  # first frame in the second mode
FRAMES = 4


@pytest.fixture(scope="module")
def parts():
    model = init_model(MC, seed=3)
    return model, build_tiny_tokenizer(512), SyntheticStream(MC, seed=3)


def run(parts, first: str, second: str) -> tuple[dict, int]:
    model, tok, stream = parts
    engine = Engine(MC, EngineConfig(mode=first, decode_steps_per_frame=2, max_decode_steps=6,
                                     denoise_steps=1, max_active_requests=2,
                                     memory_every_n_frames=1, seed=3), model=model, tokenizer=tok)
    outputs, in_flight = [], 0
    for f in range(FRAMES):
        if f == SWITCH:
            in_flight = engine.scheduler.num_unfinished
            engine.update_config(mode=second)
        for j in range(2 if f == SWITCH - 1 else 1):  # a burst just before the switch
            engine.ask(QUESTIONS[(f + j) % 3], priority=j)
        outputs.append(engine.step(stream.frame(f)))
        assert outputs[-1].mode == (first if f < SWITCH else second)
    outputs += engine.drain(stream.frame, max_frames=40 - FRAMES)
    assert not engine.has_unfinished(), "requests never finished"
    assert all(o.mode == second for o in outputs[FRAMES:])
    assert engine.kv.usage().blocks_used == 0
    reqs = collect_requests(outputs)
    return {"requests": reqs, "frames": [{"frame": o.frame, "actions": o.actions.tolist()}
                                         for o in outputs]}, in_flight


def test_strategies_cover_every_mode():
    assert set(STRATEGIES) == set(MODES)
    assert all(STRATEGIES[m].name == m for m in MODES)


@pytest.fixture(scope="module")
def isolated(parts):
    return run(parts, "isolated", "isolated")[0]


@pytest.mark.parametrize("first,second", list(itertools.permutations(MODES, 2)))
def test_switch_with_requests_in_flight_matches_isolated(parts, isolated, first, second):
    got, in_flight = run(parts, first, second)
    if first in ("oxygen", "shared"):  # the cap of 2 leaves requests waiting or running
        assert in_flight > 0, "nothing in flight at the switch: the test proves nothing"
    assert [r["id"] for r in got["requests"]] == [r["id"] for r in isolated["requests"]]
    assert all(r["finish_reason"] in ("length", "eos") for r in got["requests"])
    result = compare_runs(isolated, got, tie=1e-4, atol=1e-5)
    assert result.ok, f"{first}->{second}: {result.summary()}\n" + "\n".join(result.mismatches)


class RecordingOps:
    """Exactly the FrameOps interface, recording the calls: a mode that reaches for anything
    else (the scheduler, the engine) fails with AttributeError."""

    def __init__(self, running: tuple = ()) -> None:
        self.calls: list[tuple] = []
        self._running = running
        self._lock = threading.Lock()

    def _log(self, *call) -> None:
        with self._lock:  # parallel mode calls from two threads
            self.calls.append(call)

    def prefill(self, frame, action):
        self._log("prefill")

    def denoise(self, frame, action):
        self._log("denoise")
        return "chunk"

    def release(self, action):
        self._log("release")

    def take_births(self, frame, prefix_seq):
        self._log("take_births", prefix_seq)

    def admit(self, frame, limit=None, reserve=None):
        self._log("admit", limit, reserve)
        return []

    def running(self):
        self._log("running")
        return self._running

    def decode(self, frame, batch, k):
        self._log("decode", tuple(batch), k)

    def run_one_by_one(self, frame, reserve=None):
        self._log("run_one_by_one", reserve)

    def choose_k(self, frame, batch):
        self._log("choose_k", batch)
        return 3


def test_the_recording_ops_are_the_frame_ops_interface():
    protocol = {n for n in vars(FrameOps) if not n.startswith("_")}
    assert protocol == {n for n in vars(RecordingOps) if not n.startswith("_")}
    for name in protocol:  # the engine's primitives implement every member, same parameters
        want = inspect.signature(getattr(FrameOps, name)).parameters
        assert list(inspect.signature(getattr(FramePrimitives, name)).parameters) == list(want)


def test_modes_reach_the_frame_only_through_frame_ops():
    action = SimpleNamespace(prefix_seq=7)
    batch = (SimpleNamespace(remaining=2), SimpleNamespace(remaining=5))
    want = {
        "oxygen": [("prefill",), ("denoise",), ("take_births", 7), ("release",),
                   ("admit", None, None), ("running",), ("choose_k", 2), ("decode", batch, 3)],
        "shared": [("prefill",), ("denoise",), ("take_births", 7), ("release",),
                   ("admit", None, None), ("running",), ("decode", batch, 5)],
        "isolated": [("prefill",), ("denoise",), ("release",), ("take_births", None),
                     ("run_one_by_one", None)],
    }
    for name, calls in want.items():
        ops = RecordingOps(batch)
        assert STRATEGIES[name].run(ops, SimpleNamespace(), action) == "chunk"
        assert ops.calls == calls, name
    ops = RecordingOps(batch)  # parallel: births first, then the two paths in two threads
    assert STRATEGIES["parallel"].run(ops, SimpleNamespace(), action) == "chunk"
    assert ops.calls[0] == ("take_births", None)
    assert sorted(ops.calls[1:]) == [("denoise",), ("prefill",), ("run_one_by_one", 0)]
