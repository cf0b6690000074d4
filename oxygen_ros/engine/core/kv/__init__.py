"""Paged KV bookkeeping (no torch): block pool, per-sequence tables, prefix cache."""
from oxygen_ros.engine.core.kv.block_pool import BlockPool
from oxygen_ros.engine.core.kv.kv_manager import KVCacheBlocks, KVManager, KVUsage, UnknownSequenceError

__all__ = ["BlockPool", "KVCacheBlocks", "KVManager", "KVUsage", "UnknownSequenceError"]
