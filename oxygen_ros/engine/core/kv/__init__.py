"""Paged KV bookkeeping (no torch): block pool, per-sequence tables, prefix cache, state slots."""
from oxygen_ros.engine.core.kv.block_pool import BlockPool
from oxygen_ros.engine.core.kv.kv_manager import KVCacheBlocks, KVManager, KVUsage, UnknownSequenceError
from oxygen_ros.engine.core.kv.state_slots import SlotUsage, StateSlots

__all__ = ["BlockPool", "KVCacheBlocks", "KVManager", "KVUsage", "SlotUsage", "StateSlots",
           "UnknownSequenceError"]
