"""The engine's real-time chunking input from what the ChunkPlayer executes (node and replay).

With chunk_blend rtc, each inference is given the steps executed from its observation's stamp
on (ChunkPlayer.leftover: played values, then the current chunk's remaining plan), converted
back to model units, and the delay d counted at the last hand-over (ChunkPlayer.last_delay): the
chunk steps (counted control ticks, converted) the previous inference let pass, the best count
of what this one will let pass. Both are on the chunk's own time axis.
"""
from __future__ import annotations

from typing import Any

from .chunk_player import ChunkPlayer
from .values import StateMapping, actions_to_model


def rtc_prior(player: ChunkPlayer, mapping: StateMapping, stamp: float, horizon: int,
              state: Any = None) -> Any:
    """An engine ActionPrior for an observation stamped `stamp` (`state`: its state in robot
    units, which relative actions and delta commands are re-expressed against), or None
    (another blend, no chunk yet, holding, nothing left)."""
    if player.blend != "rtc":
        return None
    left = player.leftover(stamp)
    if left is None:
        return None
    from oxygen_ros.engine import ActionPrior

    return ActionPrior(actions_to_model(mapping, left[:horizon], state), min(player.last_delay, horizon))
