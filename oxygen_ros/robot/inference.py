"""One inference from a paired observation, the same for the node's inference worker and
oxygen-replay: the pair's decoded camera images placed in model order (values.place_cameras,
cameras without a topic masked), the joint state normalised for the model, with chunk_blend rtc
what the chunk player executes from the observation on (rtc_prior), Engine.step, and the
output's actions (EngineConfig.action_head's chunk) in robot units, cut to the steps the
checkpoint executes per chunk (LeRobot n_action_steps): the chunk the ChunkPlayer takes. With
`on_chunk` the robot chunk (and every head's) is handed over the moment the engine has it, before
the frame's language work, as the node acts on it. A model
with several action heads (StarVLA) also gives every head's chunk alike (head_chunks): the node
publishes them on their own topics, oxygen-replay writes them.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np

from .chunk_player import ChunkPlayer
from .engine_port import EnginePort
from .pairing import Pair
from .rtc_prior import rtc_prior
from .values import StateMapping, place_cameras


def executed_steps(requested: int, checkpoint: int, horizon: int) -> int:
    """The chunk steps the robot executes of each chunk: `requested` (the node's n_action_steps;
    0 = the checkpoint's n_action_steps, where 0 means the whole chunk); ValueError when more
    than the model's chunk of `horizon` steps."""
    if not 0 <= requested <= horizon:
        raise ValueError(f"n_action_steps {requested} must be 0 (the checkpoint's) .. the model's "
                         f"chunk of {horizon} steps")
    return int(requested or checkpoint)


@dataclass(frozen=True)
class PairInference:
    camera_slots: tuple[int, ...] = ()  # model camera of each camera topic; () = in topic order
    n_action_steps: int = 0  # chunk steps the checkpoint executes (0 = all)
    # rtc: the pair's state is the robot the player commands (the node, not oxygen-replay): no
    # prior when it is further than max_tracking_error from the executed plan (rtc_prior)
    tracking: bool = False

    def observation(self, pair: Pair, images: Sequence[np.ndarray], mapping: StateMapping,
                    instruction: str, prior: Any = None) -> Any:
        """The engine's Observation of `pair` (`images`: its camera frames, decoded)."""
        from oxygen_ros.engine import Observation

        placed, valid = place_cameras(list(images), self.camera_slots or tuple(range(len(images))))
        return Observation(images=placed, state=mapping.to_model(pair.state), camera_valid=valid,
                           instruction=instruction, stamp=pair.stamp, prior=prior)

    def chunk(self, actions: np.ndarray, mapping: StateMapping, state: Any = None) -> np.ndarray:
        """The engine's actions [horizon, action_dim] -> the robot chunk [steps, commands]
        (`state`: the observation's, robot units: relative actions (LeRobot use_relative_actions)
        and delta commands are made absolute against it)."""
        return mapping.to_robot(actions[: self.n_action_steps or None], state)

    def head_chunks(self, chunks: dict[str, np.ndarray], mapping: StateMapping, state: Any = None
                    ) -> dict[str, np.ndarray]:
        """Every head's robot chunk by head name (from FrameOutput.chunks) for a model with
        several heads; {} for a model with one (its chunk is `chunk(out.actions)`)."""
        if len(chunks) < 2:
            return {}
        return {name: self.chunk(c, mapping, state) for name, c in chunks.items()}

    def step(self, engine: EnginePort, pair: Pair, images: Sequence[np.ndarray], mapping: StateMapping,
             player: ChunkPlayer, instruction: str,
             on_chunk: Callable[[np.ndarray, dict[str, np.ndarray]], None] | None = None
             ) -> tuple[Any, np.ndarray]:
        """Engine.step on `pair` -> (FrameOutput, robot chunk). `on_chunk(chunk, heads)`: the
        robot chunk and head_chunks, called inside the step as soon as the chunk exists."""
        prior = rtc_prior(player, mapping, pair.stamp, engine.model_config.action_horizon,
                          pair.state, self.tracking)
        ready = None
        if on_chunk is not None:
            def ready(actions: np.ndarray, chunks: dict[str, np.ndarray]) -> None:
                on_chunk(self.chunk(actions, mapping, pair.state),
                         self.head_chunks(chunks, mapping, pair.state))
        out = engine.step(self.observation(pair, images, mapping, instruction, prior), ready)
        return out, self.chunk(out.actions, mapping, pair.state)
