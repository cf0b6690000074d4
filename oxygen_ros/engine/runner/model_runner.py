"""ModelRunner: the only owner of torch state (model weights and the unified KV pool).

Every sequence's keys/values live in one pool allocated once with static shapes; the runner
writes new K/V into slots given by the KV manager and reads them back with paged attention
(engine/runner/paging.py: the addressing and the contexts it shares with the captured graphs). A
family whose cache spec has a recurrent state keeps it in state slots beside the blocks
(engine/runner/state_pool.py), also allocated once.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
import torch

from .attention import select_backend
from .action_stage import ActionInputs
from ..config import family_registry
from .graphs import DecodeGraphs, DenoiseGraphs
from .images import prepare
from ..config.model_config import DTYPES, ModelConfig
from .paging import LRU, PagedContext, PrefillContext, padded_tables, slots
from ..model.rtc import Guide
from .state_pool import StatePool


@dataclass(frozen=True)
class SeqView:
    """What the runner needs to know about one sequence: its block table and token count."""

    block_table: Sequence[int]
    length: int  # tokens already in the pool (the next token goes to position `length`)
    # rotary position minus sequence index after the prefix's images (ModelConfig.rope_offset;
    # 0 for pi0.5): the K/V slot follows the index, the rotary position index + offset
    rope_offset: int = 0
    # its recurrent-state slot (a cache spec with a RecurrentState; None: attention K/V only)
    state_slot: int | None = None


class ModelRunner:
    def __init__(self, model: torch.nn.Module, config: ModelConfig, num_blocks: int, block_size: int,
                 device: str = "cpu", dtype: str = "float32", backend: str = "auto",
                 compile_denoise: bool = False, cuda_graphs: bool = False,
                 state_slots: int = 0) -> None:
        self.model = model
        self.config = config
        self.device = torch.device(device)
        if dtype not in DTYPES:
            raise ValueError(f"dtype must be one of {DTYPES}, got {dtype!r}")
        self.dtype = getattr(torch, dtype)
        self.block_size = block_size
        self.num_blocks = num_blocks
        self.backend = select_backend(backend, self.device)
        self.scale = config.head_dim ** -0.5
        # the family answers what differs between models: layout, action stage, capabilities
        self.family = family_registry.family_of(config)
        if cuda_graphs and not self.family.capabilities.cuda_graphs:
            raise ValueError(f"cuda_graphs is not a capability of the {self.family.name} family")
        # The action expert runs S times per frame on a fixed-shape input: the one place where
        # torch.compile pays on a CPU (fewer, fused small ops); compiled once per prefix shape.
        self.compile_denoise = compile_denoise
        # One extra block past the KV manager's range is a write sink: a token recomputed only
        # for its logits, whose K/V already sits in a shared (prefix-cached) block, writes
        # there instead of touching the shared block.
        self.sink_slot = num_blocks * block_size
        # what a sequence keeps, as the family declares it (Family.cache_spec): the attention
        # layers' K/V in blocks (pool index = the layer's place in spec.attention.layers, the
        # index the model's context calls use), a recurrent state in slots
        spec = self.family.cache_spec(config)
        if spec.attention is None:
            raise ValueError(f"the {self.family.name} family's cache spec has no attention K/V: "
                             f"the pool needs it")
        if cuda_graphs and spec.recurrent is not None:
            raise ValueError("cuda_graphs do not carry recurrent state slots")
        self.states = None if spec.recurrent is None else \
            StatePool(spec.recurrent, state_slots, self.device)
        kv = self.cache = spec.attention
        shape = (len(kv.layers), 2, num_blocks + 1, block_size, kv.kv_heads, kv.head_dim)
        # Allocated once: every task and every frame shares this pool (gpt-fast setup_caches).
        # One tensor, so a copy-on-write moves one block of every layer in a single op.
        self.pool = torch.zeros(shape, dtype=self.dtype, device=self.device)
        self.k_cache = [self.pool[i, 0] for i in range(len(kv.layers))]  # contiguous views
        self.v_cache = [self.pool[i, 1] for i in range(len(kv.layers))]
        # Single-token decode steps through captured graphs (a CPU stand-in off CUDA).
        self.decode_graphs = DecodeGraphs(self) if cuda_graphs else None
        self.denoise_graphs = DenoiseGraphs(self) if cuda_graphs else None
        # a family's per-schedule values (pi0.5: adaRMS modulations per (expert, S) for the
        # fixed Euler schedule; weights are fixed while the runner serves, and a runner is
        # built after the weights are loaded); a few kept, S may change live
        self.schedules: LRU[tuple[int, int], dict] = LRU(4)
        # The hidden states the family's action stage reads (Family.kept_layers: layer ->
        # [max prefix, W_vlm]), written by the action path's prefill only: allocated once, a
        # frame overwrites its first P rows.
        rows, width = config.max_prefix_tokens, config.vlm.width
        self.hidden = {layer: torch.zeros(rows, width, dtype=self.dtype, device=self.device)
                       for layer in self.family.kept_layers(config)}
        self.head_names = self.family.head_names(config)

    @property
    def _adarms(self) -> LRU:
        """The pi0.5 family's adaRMS schedules (runner.schedules; the tests' name)."""
        return self.schedules

    @property
    def hidden_bytes(self) -> int:
        """Memory of the kept hidden states (what the StarVLA heads cost the prefill)."""
        return sum(t.numel() * t.element_size() for t in self.hidden.values())

    @property
    def bytes_per_slot(self) -> int:
        """Memory of one recurrent-state slot (0: the cache spec has none)."""
        return 0 if self.states is None else self.states.bytes_per_slot

    @property
    def bytes_per_block(self) -> int:
        elem = torch.finfo(self.dtype).bits // 8
        return self.block_size * self.cache.bytes_per_token(elem)

    # -- helpers (a family's action stage addresses the pool through them) ----------------------
    def slots_of(self, table: Sequence[int], start: int, count: int) -> list[int]:
        return slots(table, start, count, self.block_size)

    def tables(self, tables: Sequence[Sequence[int]]) -> torch.Tensor:
        return padded_tables(tables).to(self.device)

    def long(self, values: Sequence[int]) -> torch.Tensor:
        return torch.as_tensor(values, dtype=torch.long, device=self.device)

    def int32(self, values: Sequence[int]) -> torch.Tensor:
        return torch.as_tensor(values, dtype=torch.int32, device=self.device)

    _slots, _tables, _long, _int = slots_of, tables, long, int32

    def seq_start(self, counts: Sequence[int]) -> torch.Tensor | None:
        """Query offsets of consecutive same-row segments, for the Triton backend's query-tiled
        kernel when some segment has more than one query (one query each: the decode kernel)."""
        if self.backend != "triton" or max(counts, default=0) <= 1:
            return None
        return self._int(np.concatenate([[0], np.cumsum(counts)]).tolist())

    _seq_start = seq_start

    def copy_blocks(self, copies: Sequence[tuple[int, int, int]]) -> None:
        """Copy-on-write of a shared, partially filled block (once per forked sequence)."""
        for src, dst, n in copies:
            self.pool[:, :, dst, :n] = self.pool[:, :, src, :n]

    def copy_state(self, copy: tuple[int, int] | None) -> None:
        """Copy-on-write of a shared state slot (a request's own copy of its frame's prefix
        snapshot, KVCacheBlocks.state_copy)."""
        if copy is not None:
            self.states.copy(*copy)

    def _state_rows(self, seqs: Sequence[SeqView], lengths: Sequence[int]):
        """The StateRows of a forward over `seqs` (None without recurrent state)."""
        if self.states is None:
            return None
        if any(s.state_slot is None for s in seqs):
            raise ValueError("a sequence without a state slot in a recurrent-state pool")
        return self.states.rows(lengths, [s.state_slot for s in seqs])

    # -- stages ---------------------------------------------------------------------------------
    @torch.inference_mode()
    def prepare_images(self, images: Sequence[np.ndarray], resize: str = "pad") -> torch.Tensor:
        """Camera images (uint8 [H, W, 3], each at its camera's size) -> the vision tower's input
        [N, 3, S, S] in [-1, 1], on the model's device in the model's dtype: uploaded as uint8
        (the smallest transfer), then resized there (engine/runner/images.py; `resize`: pad | stretch).
        Always a new tensor: a caller reusing its image buffers cannot change what a waiting
        request saw."""
        s = self.config.vision.image_size
        out = torch.empty((len(images), 3, s, s), dtype=torch.float32, device=self.device)
        for i, img in enumerate(images):
            x = torch.from_numpy(np.ascontiguousarray(img)).to(self.device)
            out[i] = prepare(x, s, resize, self.config.image_pad_value)
        # a float32 vision tower in a bf16 model (LeRobot's convention) takes float32 pixels
        dtype = self.family.pixel_dtype(self.model, self.dtype)
        return out if dtype == torch.float32 else out.to(dtype)

    @torch.inference_mode()
    def prefill_observation(self, images: torch.Tensor | Sequence[np.ndarray],
                            prompt_ids: Sequence[int], seq: SeqView, keep_hidden: bool = False) -> int:
        """Vision + prompt of one observation into the pool at positions 0..P-1. Returns P.
        `images`: prepare_images' output, or uint8 images (prepared here, resize pad).
        `keep_hidden`: the action path's prefill, whose hidden states the StarVLA heads read
        (into `self.hidden`); a request's own re-prefill leaves them alone."""
        m = self.model
        pix = images if isinstance(images, torch.Tensor) else self.prepare_images(images)
        n = self.config.prefix_tokens(pix.shape[0], len(prompt_ids))
        if n != seq.length:
            raise ValueError(f"prefix has {n} tokens but {seq.length} slots were allocated")
        ctx = PrefillContext(self, self._long(self._slots(seq.block_table, 0, n)),
                             causal=self.family.capabilities.causal_prefix)
        ctx.states = self._state_rows([seq], [n])
        if ctx.states is not None:
            self.states.zero(seq.state_slot)  # a prefix starts from the zero state
        if keep_hidden and self.hidden:
            m.prefill_prefix(pix, prompt_ids, ctx, keep=self.hidden)
        else:
            m.prefill_prefix(pix, prompt_ids, ctx)
        return n

    def action_chunks(self, seq: SeqView, prefix_len: int, noise: torch.Tensor, num_steps: int,
                      guide: Guide | None = None, state: torch.Tensor | None = None,
                      num_images: int = 0, prompt_ids: Sequence[int] = ()
                      ) -> dict[str, torch.Tensor]:
        """The frame's action stage after its prefill: one chunk per head (`head_names`, in
        order), by the family (Family.action_chunks). `noise` [noise_rows, action_dim], `state`
        the normalised joint state [action_dim], the prefix's images and prompt for a family
        whose heads read them."""
        return self.family.action_chunks(self, ActionInputs(
            seq, prefix_len, noise, num_steps, guide, state, num_images, tuple(prompt_ids)))

    def denoise(self, seq: SeqView, prefix_len: int, noise: torch.Tensor, num_steps: int,
                expert: int = 1, guide: Guide | None = None,
                state: torch.Tensor | None = None) -> torch.Tensor:
        """Flow-matching Euler from t=1 (noise) to t=0 of a denoising expert (Family.denoise).
        The action tokens' K/V go to the sequence's own scratch slots after the prefix; the
        shared prefix blocks are only read. `guide`: real-time chunking toward the previous
        chunk (engine/model/rtc.py); it runs eagerly, never through the captured denoise graph.
        `state`: the normalised joint state [action_dim] (a DiT expert's state tokens)."""
        return self.family.denoise(self, seq, prefix_len, noise, num_steps, expert, guide, state)

    @torch.inference_mode()
    def generate(self, seqs: Sequence[SeqView], inputs: Sequence[Sequence[int]],
                 steps: Sequence[int], read_only: Sequence[bool] | None = None
                 ) -> tuple[list[list[int]], list[list[float]]]:
        """Greedy generation for a batch of requests, `steps[i]` new tokens each.

        Step 0 runs every request's input segment in ONE packed forward: a running request's
        last generated token, or a newly admitted request's prompt suffix (causal; a
        prefix-cache hit is simply left out of the segment). Mixing the suffix prefill into the
        decode step reads the weights once for both (vLLM v1 batches prefill and decode the same
        way). Steps 1.. feed each request its previous token. Tokens stay on the device between
        steps; one host sync at the end. Returns per-request tokens and top-1 minus top-2 margins.
        `read_only[i]`: request i's step-0 segment is already in the pool (a full prefix-cache
        hit recomputed for its logits): its K/V go to the sink, the shared block stays as is.
        """
        b = len(seqs)
        if b == 0:
            return [], []
        graphs = self.decode_graphs
        if graphs is not None and all(len(seg) == 1 for seg in inputs) and min(steps) >= 1 \
                and not any(read_only or ()):  # pure decode: every step through the graphs
            return graphs.run([s.block_table for s in seqs], [seg[0] for seg in inputs],
                              [s.length for s in seqs], steps)
        m = self.model
        tables = self._tables([s.block_table for s in seqs])
        ids, pos, slots, rows, lens, last = [], [], [], [], [], []
        for i, (s, seg) in enumerate(zip(seqs, inputs)):
            if not seg or steps[i] < 1:
                raise ValueError(f"request row {i}: empty input segment or no step to run")
            for j, token in enumerate(seg):
                ids.append(token)
                pos.append(s.length + j + s.rope_offset)
                rows.append(i)
                lens.append(s.length + j + 1)
            if read_only is not None and read_only[i]:
                slots.extend([self.sink_slot] * len(seg))
            else:
                slots.extend(self._slots(s.block_table, s.length, len(seg)))
            last.append(len(ids) - 1)
        ctx = PagedContext(self, self._long(slots), tables, self._int(rows), self._int(lens),
                           self._seq_start([len(seg) for seg in inputs]))
        ctx.states = self._state_rows(seqs, [len(seg) for seg in inputs])
        if ctx.states is not None and any(read_only or ()):
            raise ValueError("a read-only (prefix-cache hit) segment skips tokens the recurrent "
                             "state must see: the prefix cache is off with state slots")
        hidden = m.forward_tokens(0, m.embed_tokens(self._long(ids)), self._long(pos), ctx, None)
        tokens, margin = self._greedy(m.lm_logits(hidden[self._long(last)]))
        out_tok, out_mar, active_idx = [tokens], [margin], [list(range(b))]
        nxt_pos = [s.length + len(seg) for s, seg in zip(seqs, inputs)]  # sequence indices
        if graphs is not None and max(steps) > 1:  # step 0 carried new suffixes: ran eagerly
            rest_t, rest_m = graphs.run([s.block_table for s in seqs], tokens, nxt_pos,
                                        [n - 1 for n in steps])
            first_t, first_m = tokens.tolist(), margin.tolist()
            return ([[first_t[i]] + rest_t[i] for i in range(b)],
                    [[first_m[i]] + rest_m[i] for i in range(b)])
        for step in range(1, max(steps)):
            idx = [i for i in range(b) if steps[i] > step]
            p = [nxt_pos[i] + step - 1 for i in idx]
            ctx = PagedContext(self, self._long([self._slots(seqs[i].block_table, q, 1)[0]
                                                 for i, q in zip(idx, p)]),
                               tables, self._int(idx), self._int([q + 1 for q in p]))
            ctx.states = self._state_rows([seqs[i] for i in idx], [1] * len(idx))
            prev = tokens if len(idx) == b else tokens[self._long(idx)]
            rope = [q + seqs[i].rope_offset for i, q in zip(idx, p)]
            hidden = m.forward_tokens(0, m.embed_tokens(prev), self._long(rope), ctx, None)
            nxt, margin = self._greedy(m.lm_logits(hidden))
            if len(idx) == b:
                tokens = nxt
            else:
                tokens = tokens.clone()
                tokens[self._long(idx)] = nxt
            out_tok.append(nxt)
            out_mar.append(margin)
            active_idx.append(idx)
        result_t: list[list[int]] = [[] for _ in range(b)]
        result_m: list[list[float]] = [[] for _ in range(b)]
        for idx, toks, mars in zip(active_idx, out_tok, out_mar):
            for i, t, mm in zip(idx, toks.tolist(), mars.tolist()):
                result_t[i].append(t)
                result_m[i].append(mm)
        return result_t, result_m

    @staticmethod
    def _greedy(logits: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        top = torch.topk(logits.float(), 2, dim=-1)
        return top.indices[:, 0], top.values[:, 0] - top.values[:, 1]
