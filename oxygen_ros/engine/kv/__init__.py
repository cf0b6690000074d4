"""Paged KV bookkeeping (no torch): block pool, per-sequence tables, prefix cache."""
from oxygen_ros.engine.kv.block_pool import BlockPool
from oxygen_ros.engine.kv.kv_manager import KVCacheBlocks, KVManager, KVUsage, UnknownSequenceError

__all__ = ["BlockPool", "KVCacheBlocks", "KVManager", "KVUsage", "UnknownSequenceError"]
