"""The engine's real-time chunking input from what the ChunkPlayer executes (node and replay).

With chunk_blend rtc, each inference is given the steps executed from its observation's stamp
on (ChunkPlayer.leftover: played values, then the current chunk's remaining plan), converted
back to model units, and the delay d counted at the last hand-over (ChunkPlayer.last_delay): the
chunk steps (counted control ticks, converted) the previous inference let pass, the best count
of what this one will let pass. Both are on the chunk's own time axis.

The leftover is what the player commands, not where the robot is: in the node (`tracking`),
when the observation's measured pose is further than max_tracking_error from the value played
at its stamp (the robot was reset or moved by hand, or it did not follow a hold), there is no
executed plan for the new chunk to continue, and the inference gets no prior (an unguided
chunk, as the first one). oxygen-replay's recorded states never follow the replayed commands:
it does not check.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from .chunk_player import ChunkPlayer
from .values import StateMapping, actions_to_model


def follows_plan(player: ChunkPlayer, mapping: StateMapping, played: np.ndarray, state: Any) -> bool:
    """Whether every measured command of the robot-unit `state` is within the player's
    max_tracking_error of `played` (the value executed at the observation's stamp); True without
    a state or without a tolerance."""
    tolerance = player.config.max_tracking_error
    if state is None or not tolerance:
        return True
    s = np.asarray(state, dtype=np.float64)
    measured = s[: mapping.num_joints] if mapping.interface is None \
        else mapping.interface.measured_commands(s)
    if measured is None:  # the interface measures no command of this state
        return True
    tol = np.broadcast_to(np.asarray(tolerance, dtype=np.float64), measured.shape)
    gap = np.abs(np.asarray(played, dtype=np.float64) - measured)
    return bool(np.all(~np.isfinite(measured) | (gap <= tol)))


def rtc_prior(player: ChunkPlayer, mapping: StateMapping, stamp: float, horizon: int,
              state: Any = None, tracking: bool = False) -> Any:
    """An engine ActionPrior for an observation stamped `stamp` (`state`: its state in robot
    units, which relative actions and delta commands are re-expressed against), or None
    (another blend, no chunk yet, holding, nothing left; `tracking`, the state being the robot
    the player commands (the node): the robot not where the executed plan is)."""
    if player.blend != "rtc":
        return None
    left = player.leftover(stamp)
    if left is None or (tracking and not follows_plan(player, mapping, left[0], state)):
        return None
    from oxygen_ros.engine import ActionPrior

    return ActionPrior(actions_to_model(mapping, left[:horizon], state), min(player.last_delay, horizon))
