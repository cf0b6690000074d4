"""CUDA graphs (EngineConfig.cuda_graphs) for batched decode, the way nano-vllm and vLLM capture it,
and for the whole S-step denoise loop (one graph per (expert, S, horizon, table width): the
prefix length enters only through the positions, slots, q_len and block-table buffers).

A decode step is ~depth x 10 small kernels; at batch 30 on a GPU the launches, not the math, set
its time. A captured graph replays them all with one launch. Graph capture needs every tensor
the step touches at a fixed address and a fixed shape, so:
- batch sizes are padded up to {1, 2, 4, 8, 16, 24, 32, ...} (one graph each), padded rows write
  their K/V to the pool's sink slot;
- the block tables have a fixed width (the widest table seen, rounded up to a power of two);
- ids, positions, remaining step counts and block tables live in static buffers that are filled
  once per call (one host-to-device copy); the step itself computes slots, q_len and the next
  positions on the device, runs the LM head and the top-2 margin, and updates the buffers in
  place, so the k steps of a frame need no host synchronisation (one at the end);
- a row whose step count is reached keeps running with its K/V written to the sink and its
  tokens ignored (tokens equal to generate()'s, which drops such rows).

`StepGraph` is the capture/replay unit. Without CUDA (tests, CPU) it is a stand-in that "replays"
by calling the same function on the same static buffers: the padding, buffer and device-side
bookkeeping logic is exactly what a CUDA replay runs, so it is tested on the CPU.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Mapping, Sequence

import torch

from .paging import LRU, PagedContext, device_slots, graph_width, padded_tables
from ..model.sampler import euler_sample


def padded_batch(b: int) -> int:
    """Smallest captured size >= b: 1, 2, 4, 8, then multiples of 8 (16, 24, 32, ...)."""
    if b < 1:
        raise ValueError(f"batch must be >= 1, got {b}")
    for size in (1, 2, 4, 8):
        if b <= size:
            return size
    return -(-b // 8) * 8


class StepGraph:
    """fn() reads and writes only static tensors. On CUDA it is captured once (after warm-up
    runs on a side stream) and replay() launches the graph; elsewhere replay() calls fn()."""

    def __init__(self, fn: Callable[[], None], device: torch.device, warmup: int = 2,
                 pool=None) -> None:
        self.fn = fn
        self.graph: torch.cuda.CUDAGraph | None = None
        if device.type == "cuda":
            stream = torch.cuda.Stream(device)
            stream.wait_stream(torch.cuda.current_stream(device))
            with torch.cuda.stream(stream):
                for _ in range(warmup):  # autotuning / lazy init outside the capture
                    fn()
            torch.cuda.current_stream(device).wait_stream(stream)
            self.graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(self.graph, pool=pool):  # graphs of one runner share memory
                fn()

    def replay(self) -> None:
        if self.graph is not None:
            self.graph.replay()
        else:
            self.fn()


@dataclass
class DecodeBuffers:
    """Static inputs/outputs of one padded batch size (B rows, block tables W wide)."""

    ids: torch.Tensor  # long [B]: the token each row feeds this step
    pos: torch.Tensor  # long [B]: its position
    left: torch.Tensor  # long [B]: steps this row still runs (0: padding or done -> sink)
    tables: torch.Tensor  # int32 [B, W]
    rows: torch.Tensor  # int32 [B]: 0..B-1 (constant)
    tokens: torch.Tensor  # long [B]: out
    margins: torch.Tensor  # float32 [B]: out (top-1 minus top-2 logit)

    @classmethod
    def allocate(cls, b: int, width: int, device: torch.device) -> "DecodeBuffers":
        long = dict(dtype=torch.long, device=device)
        return cls(ids=torch.zeros(b, **long), pos=torch.zeros(b, **long),
                   left=torch.zeros(b, **long),
                   tables=torch.zeros(b, width, dtype=torch.int32, device=device),
                   rows=torch.arange(b, dtype=torch.int32, device=device),
                   tokens=torch.zeros(b, **long),
                   margins=torch.zeros(b, dtype=torch.float32, device=device))


def decode_step(runner, buf: DecodeBuffers) -> None:
    """One greedy decode step of every row, entirely on the device and in place (capturable: no
    .item(), no host branching on tensor values)."""
    model = runner.model
    active = buf.left > 0
    slots = torch.where(active, device_slots(buf.tables, buf.pos, runner.block_size),
                        torch.full_like(buf.pos, runner.sink_slot))
    ctx = PagedContext(runner, slots, buf.tables, buf.rows, (buf.pos + 1).to(torch.int32))
    hidden = model.forward_tokens(0, model.embed_tokens(buf.ids), buf.pos, ctx, None)
    top = torch.topk(model.lm_logits(hidden).float(), 2, dim=-1)
    buf.tokens.copy_(top.indices[:, 0])
    buf.margins.copy_(top.values[:, 0] - top.values[:, 1])
    step = active.long()
    buf.ids.copy_(torch.where(active, buf.tokens, buf.ids))
    buf.pos.add_(step)
    buf.left.sub_(step)


class DecodeGraphs:
    """Greedy decode of single-token steps through captured (or stand-in) graphs, one per
    (padded batch, table width)."""

    MAX_GRAPHS = 64  # (batch, width) pairs kept; the least recently used is dropped beyond this

    def __init__(self, runner) -> None:
        self.runner = runner
        self._pool = torch.cuda.graph_pool_handle() if runner.device.type == "cuda" else None
        self._graphs: LRU[tuple[int, int], tuple[DecodeBuffers, StepGraph]] = LRU(self.MAX_GRAPHS)

    def _get(self, b: int, width: int) -> tuple[DecodeBuffers, StepGraph]:
        key = (padded_batch(b), graph_width(width))

        def make() -> tuple[DecodeBuffers, StepGraph]:
            buf = DecodeBuffers.allocate(key[0], key[1], self.runner.device)
            graph = StepGraph(lambda: decode_step(self.runner, buf), self.runner.device, pool=self._pool)
            buf.left.zero_()  # warm-up runs on a CUDA capture wrote only to the sink
            return buf, graph

        return self._graphs.get(key, make)

    @property
    def sizes(self) -> list[tuple[int, int]]:
        return sorted(self._graphs)

    def buffers(self, b: int, width: int) -> DecodeBuffers:
        return self._get(b, width)[0]

    @torch.inference_mode()
    def run(self, tables: Sequence[Sequence[int]], first_ids: Sequence[int] | torch.Tensor,
            first_pos: Sequence[int], steps: Sequence[int]) -> tuple[list[list[int]], list[list[float]]]:
        """Row i feeds first_ids[i] at position first_pos[i] and generates steps[i] tokens.
        first_ids may be a device tensor (the eager step 0's tokens: no host sync for them)."""
        b = len(tables)
        width = max(1, max(len(t) for t in tables))
        buf, graph = self._get(b, width)
        n = buf.ids.shape[0]
        pad = n - b
        dev = buf.ids.device
        buf.tables.copy_(padded_tables(tables, n, buf.tables.shape[1]).to(dev))
        if isinstance(first_ids, torch.Tensor):
            buf.ids.zero_()
            buf.ids[:b].copy_(first_ids)
        else:
            buf.ids.copy_(torch.as_tensor(list(first_ids) + [0] * pad, dtype=torch.long).to(dev))
        buf.pos.copy_(torch.as_tensor(list(first_pos) + [0] * pad, dtype=torch.long).to(dev))
        buf.left.copy_(torch.as_tensor(list(steps) + [0] * pad, dtype=torch.long).to(dev))
        out_t, out_m = [], []
        for _ in range(max(steps)):
            graph.replay()
            out_t.append(buf.tokens[:b].clone())
            out_m.append(buf.margins[:b].clone())
        toks = torch.stack(out_t, 1).tolist()  # the one host sync
        mars = torch.stack(out_m, 1).tolist()
        return ([row[: steps[i]] for i, row in enumerate(toks)],
                [row[: steps[i]] for i, row in enumerate(mars)])


@dataclass
class DenoiseBuffers:
    """Static inputs/outputs of one (expert, S, horizon, table width) denoise graph."""

    x: torch.Tensor  # float32 [H, action_dim]: the noise in, the actions out
    positions: torch.Tensor  # long [H]
    slots: torch.Tensor  # long [H]: the action tokens' scratch slots
    tables: torch.Tensor  # int32 [1, W]
    rows: torch.Tensor  # int32 [H]: zeros
    lens: torch.Tensor  # int32 [H]: prefix + H
    seq_start: torch.Tensor  # int32 [2]: 0, H (all H action queries share the one row)

    @classmethod
    def allocate(cls, h: int, action_dim: int, width: int, sink_slot: int,
                 device: torch.device) -> "DenoiseBuffers":
        # slots start at the sink: capture warm-up runs write nothing that matters
        return cls(x=torch.zeros(h, action_dim, dtype=torch.float32, device=device),
                   positions=torch.zeros(h, dtype=torch.long, device=device),
                   slots=torch.full((h,), sink_slot, dtype=torch.long, device=device),
                   tables=torch.zeros(1, width, dtype=torch.int32, device=device),
                   rows=torch.zeros(h, dtype=torch.int32, device=device),
                   lens=torch.ones(h, dtype=torch.int32, device=device),
                   seq_start=torch.tensor([0, h], dtype=torch.int32, device=device))


def denoise_loop(runner, buf: DenoiseBuffers, expert: int, conds: Mapping[float, object],
                 velocity) -> None:
    """The whole S-step Euler loop on static buffers: the sampler's euler_sample (S = len(conds),
    the adaRMS modulations at each of its times); the prefix length enters only through the
    buffers' values."""
    ctx = PagedContext(runner, buf.slots, buf.tables, buf.rows, buf.lens,
                       buf.seq_start if buf.rows.numel() > 1 else None)

    def v(x: torch.Tensor, t: float) -> torch.Tensor:
        return velocity(runner.model, expert, x.to(runner.dtype), buf.positions, ctx, conds[t])

    buf.x.copy_(euler_sample(v, buf.x, len(conds)))


class DenoiseGraphs:
    """One captured (or stand-in) graph per (expert, S, horizon, table width) for the whole
    denoise loop; the adaRMS modulations of the schedule are held by the graph (fixed addresses)."""

    MAX_GRAPHS = 8  # S may change live: the least recently used graph is dropped beyond this

    def __init__(self, runner) -> None:
        self.runner = runner
        self._pool = torch.cuda.graph_pool_handle() if runner.device.type == "cuda" else None
        self._graphs: LRU[tuple[int, int, int, int], tuple[DenoiseBuffers, StepGraph, dict]] = \
            LRU(self.MAX_GRAPHS)

    @property
    def keys(self) -> list[tuple[int, int, int, int]]:
        return list(self._graphs)

    def buffers(self, key: tuple[int, int, int, int]) -> DenoiseBuffers:
        return self._graphs[key][0]

    @torch.inference_mode()
    def run(self, expert: int, table: Sequence[int], prefix_len: int, slots: Sequence[int],
            noise: torch.Tensor, conds: Mapping[float, object], velocity) -> torch.Tensor:
        """`conds`: the adaRMS modulations at each time of the S-step schedule (S = len(conds))."""
        r = self.runner
        h = noise.shape[0]
        width = graph_width(len(table))
        key = (expert, len(conds), h, width)

        def make() -> tuple[DenoiseBuffers, StepGraph, dict]:
            buf = DenoiseBuffers.allocate(h, noise.shape[1], width, r.sink_slot, r.device)
            held = dict(conds)
            graph = StepGraph(lambda: denoise_loop(r, buf, expert, held, velocity), r.device,
                              pool=self._pool)
            return buf, graph, held

        buf, graph, _ = self._graphs.get(key, make)
        buf.tables.copy_(padded_tables([table], 1, width).to(r.device))
        buf.positions.copy_(torch.arange(prefix_len, prefix_len + h).to(r.device))
        buf.slots.copy_(torch.as_tensor(list(slots), dtype=torch.long).to(r.device))
        buf.lens.fill_(prefix_len + h)
        buf.x.copy_(noise)
        graph.replay()
        return buf.x.clone()
