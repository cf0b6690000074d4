"""The engine as the robot layer, the node and oxygen-replay see it: exactly the calls they make
on engine.Engine, as a typing.Protocol (ROS-free, and no torch import at type-check time).

Code outside oxygen_ros/engine holds an `EnginePort`, never `Any`: a change to what the engine
offers shows here first, and test/robot/test_engine_port.py checks that the real Engine
satisfies it. Tools that reach into the engine's internals on purpose (bench/kv_recorder.py
patches its KV manager) name engine.Engine itself.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Iterator, Protocol, runtime_checkable

if TYPE_CHECKING:  # types only: importing the engine pulls torch in
    import numpy as np

    from oxygen_ros.engine import EngineConfig, FrameOutput, ModelConfig, Observation, RequestKind


@runtime_checkable
class EnginePort(Protocol):
    """One control frame per step(); language requests asked between frames."""

    model_config: ModelConfig  # the model's geometry: cameras, horizon, prompt budget, heads
    config: EngineConfig  # the live settings (read for diagnostics and the waiting bound)

    # -- frames -------------------------------------------------------------------------------
    def step(self, obs: Observation,
             on_actions: Callable[[np.ndarray, dict[str, np.ndarray]], None] | None = ...
             ) -> FrameOutput: ...

    def drain(self, observe: Callable[[int], Observation] | None = ...,
              max_frames: int = ...) -> Iterator[FrameOutput]: ...

    def warmup(self, frames: int = ..., instruction: str | None = ...,
               budget_s: float | None = ...) -> str: ...

    # -- language requests --------------------------------------------------------------------
    def check_question(self, text: str) -> list[int]: ...

    def ask(self, prompt: str, priority: int = ..., kind: RequestKind = ...,
            max_new_tokens: int | None = ..., prompt_ids: list[int] | None = ...) -> int: ...

    def abort(self, request_id: int) -> bool: ...

    def has_unfinished(self) -> bool: ...

    @property
    def num_live_requests(self) -> int: ...

    @property
    def num_waiting_requests(self) -> int: ...

    # -- live settings --------------------------------------------------------------------------
    def validate_changes(self, **changes: Any) -> EngineConfig: ...

    def apply_config(self, new: EngineConfig) -> None: ...

    def update_config(self, **changes: Any) -> None: ...
