"""What one sequence of a model keeps between steps, as pure data (a family's cache spec,
Family.cache_spec): attention K/V in the pool's blocks and/or a recurrent state in state slots.
The runner sizes its pool from it (engine/runner/model_runner.py, engine/runner/state_pool.py)
and the bandwidth floor prices it (bench/floor.py)."""
from __future__ import annotations

from dataclasses import dataclass

_ELEM_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2}


@dataclass(frozen=True)
class AttentionKV:
    """Paged attention K/V of the decoder layers ``layers`` (indices): each token ``kv_heads``
    x ``head_dim`` keys and as many values per layer, in the unified pool's blocks, in the
    engine's dtype (the pool's layer i is ``layers[i]``). pi0.5 and the Qwen3-VL families
    declare every layer; Qwen3.5 its full-attention layers."""

    layers: tuple[int, ...]
    kv_heads: int
    head_dim: int

    def bytes_per_token(self, elem: int) -> int:
        return len(self.layers) * 2 * self.kv_heads * self.head_dim * elem


@dataclass(frozen=True)
class StateTensor:
    """One tensor of a per-sequence recurrent state, per layer."""

    name: str
    shape: tuple[int, ...]
    dtype: str  # float32 | bfloat16 | float16

    @property
    def nbytes(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n * _ELEM_BYTES[self.dtype]


@dataclass(frozen=True)
class RecurrentState:
    """A fixed-size state per sequence in each of the layers ``layers``, updated in place (not
    per token). A Gated DeltaNet layer (Qwen3.5, engine/families/qwen35/model.py: Qwen35Model.state_shapes)
    declares two tensors: the short convolution's window ("conv", [conv_dim, K], the model's
    dtype) and the recurrent matrix ("recurrent", [Hv, dk, dv], float32); its full-attention
    layers are the AttentionKV's. The pool holds it in state slots, one per sequence, sized
    when the engine is built (engine/runner/state_pool.py, engine/core/kv/state_slots.py; a model's state
    layers read them as ``ctx.states``)."""

    layers: tuple[int, ...]
    tensors: tuple[StateTensor, ...]

    def bytes_per_sequence(self) -> int:
        return len(self.layers) * sum(t.nbytes for t in self.tensors)


@dataclass(frozen=True)
class CacheSpec:
    """What one sequence keeps between steps: attention K/V (paged) and/or recurrent state."""

    attention: AttentionKV | None
    recurrent: RecurrentState | None = None


__all__ = ["AttentionKV", "CacheSpec", "RecurrentState", "StateTensor"]
