"""Decode through the graph runner (engine/runner/graphs.py): on the CPU its stand-in replays by calling
the captured function on the same static buffers, so padding, buffers and the device-side
bookkeeping are what a CUDA replay runs."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from oxygen_ros.engine.config import PRESETS, EngineConfig
from oxygen_ros.engine.core.engine import Engine
from oxygen_ros.engine.runner.graphs import DecodeGraphs, decode_step, padded_batch
from oxygen_ros.engine.families.loader import init_model
from oxygen_ros.engine.runner.model_runner import ModelRunner, SeqView
from oxygen_ros.engine.core.synthetic import SyntheticStream
from oxygen_ros.engine.model.tokenizer import build_tiny_tokenizer

MC = PRESETS["tiny"]
BS = 4


@pytest.fixture(scope="module")
def model():
    return init_model(MC, seed=0).fuse_projections()


def _runner(model, graphs: bool) -> ModelRunner:
    return ModelRunner(model, MC, num_blocks=64, block_size=BS, cuda_graphs=graphs)


def _prefilled(runner: ModelRunner, lengths: list[int]) -> list[SeqView]:
    """Sequences of the given lengths, each with room for 6 more tokens, their K/V written by an
    eager causal forward of random ids (so decode reads real, distinct prefixes)."""
    seqs, next_block = [], 0
    g = torch.Generator().manual_seed(1)
    for n in lengths:
        blocks = -(-(n + 6) // BS)
        table = list(range(next_block, next_block + blocks))
        next_block += blocks
        ids = torch.randint(3, MC.vocab_size, (n,), generator=g).tolist()
        runner.generate([SeqView(table, 0)], [ids], [1])
        seqs.append(SeqView(table, n))
    return seqs


def test_padded_sizes():
    assert [padded_batch(b) for b in (1, 2, 3, 4, 5, 8, 9, 16, 17, 24, 30, 32, 33)] == \
        [1, 2, 4, 4, 8, 8, 16, 16, 24, 24, 32, 32, 40]
    with pytest.raises(ValueError):
        padded_batch(0)


@pytest.mark.parametrize("lengths,steps", [([5, 9, 14], [3, 1, 2]), ([3, 8, 2, 11, 6], [2, 2, 3, 1, 3]),
                                           ([7], [4])])
def test_graph_decode_equals_eager_generate(model, lengths, steps):
    """Padded batches (3 -> 4, 5 -> 8) and k replayed steps give generate()'s tokens, and write
    the real rows' K/V exactly where generate() does (padding and finished rows go to the sink)."""
    eager, graphed = _runner(model, False), _runner(model, True)
    seqs = _prefilled(eager, lengths)
    _prefilled(graphed, lengths)
    first = [[int(i) + 3] for i in range(len(seqs))]
    want_t, want_m = eager.generate(seqs, first, steps)
    got_t, got_m = graphed.generate(seqs, first, steps)
    assert got_t == want_t
    for a, b in zip(got_m, want_m):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)
    sink = eager.num_blocks  # everything but the sink block holds the same K/V
    torch.testing.assert_close(graphed.pool[:, :, :sink], eager.pool[:, :, :sink], rtol=1e-5, atol=1e-5)
    assert [size for size, _ in graphed.decode_graphs.sizes] == [padded_batch(len(seqs))]


def test_suffix_step_runs_eagerly_then_graphs(model):
    """A step that carries a newly admitted prompt suffix runs eagerly; the rest replay."""
    eager, graphed = _runner(model, False), _runner(model, True)
    seqs = _prefilled(eager, [6, 10])
    _prefilled(graphed, [6, 10])
    inputs = [[11], [12, 13, 14]]  # row 1: a 3-token suffix
    want = eager.generate(seqs, inputs, [3, 2])
    got = graphed.generate(seqs, inputs, [3, 2])
    assert got[0] == want[0]
    assert graphed.decode_graphs.sizes == [(2, 4)]


def test_static_buffers_keep_their_addresses(model):
    runner = _runner(model, True)
    seqs = _prefilled(runner, [5, 9, 4])
    buf = runner.decode_graphs.buffers(3, 4)
    ptrs = [t.data_ptr() for t in (buf.ids, buf.pos, buf.left, buf.tables, buf.tokens, buf.margins)]
    for frame in range(3):
        runner.generate(seqs[: 2 + frame % 2], [[5]] * (2 + frame % 2), [1] * (2 + frame % 2))
        seqs = [SeqView(s.block_table, s.length + 1) for s in seqs]
    assert runner.decode_graphs.buffers(3, 4) is buf
    assert ptrs == [t.data_ptr() for t in (buf.ids, buf.pos, buf.left, buf.tables, buf.tokens, buf.margins)]


def test_step_traces_as_one_graph(model):
    """torch.compile(fullgraph=True) fails on anything that would break a CUDA graph capture
    inside the step: .item(), .tolist(), host branching on tensor values."""
    runner = _runner(model, True)
    seqs = _prefilled(runner, [5, 9])
    graphs = DecodeGraphs(runner)
    buf = graphs.buffers(2, 4)
    for i, s in enumerate(seqs):
        buf.tables[i, : len(s.block_table)] = torch.tensor(s.block_table, dtype=torch.int32)
    buf.pos.copy_(torch.tensor([5, 9]))
    buf.left.copy_(torch.tensor([1, 1]))
    buf.ids.copy_(torch.tensor([7, 8]))
    torch._dynamo.reset()
    compiled = torch.compile(lambda: decode_step(runner, buf), fullgraph=True, backend="eager")
    with torch.inference_mode():
        compiled()
    assert buf.left.tolist() == [0, 0] and buf.pos.tolist() == [6, 10]


def test_engine_frames_with_graphs_equal_eager(model):
    tok = build_tiny_tokenizer(512)

    def frames(graphs: bool):
        engine = Engine(MC, EngineConfig(decode_steps_per_frame=3, max_decode_steps=6, denoise_steps=2,
                                         cuda_graphs=graphs), model=model, tokenizer=tok)
        engine.ask("What is on the table?\n")
        stream = SyntheticStream(MC, seed=0)
        outs = [engine.step(stream.frame(i)) for i in range(4)]
        assert (engine.runner.decode_graphs is not None) == graphs
        return [o.actions for o in outs], [(u.id, u.new_tokens) for o in outs for u in o.updates]

    (a_g, t_g), (a_e, t_e) = frames(True), frames(False)
    assert t_g == t_e and len(t_g) >= 4
    for x, y in zip(a_g, a_e):
        np.testing.assert_allclose(x, y, rtol=1e-6, atol=1e-6)


def test_denoise_graph_equals_eager_and_keeps_buffers(model):
    """The whole S-step loop on static buffers gives denoise()'s actions exactly, for different
    prefix lengths through the same graph (the prefix enters only through buffer values)."""
    eager, graphed = _runner(model, False), _runner(model, True)
    _prefilled(eager, [9, 13])
    _prefilled(graphed, [9, 13])
    noise = torch.randn(MC.action_horizon, MC.action_dim, generator=torch.Generator().manual_seed(3))
    table = list(range(40, 46))  # scratch blocks after the prefix blocks: [prefix copy] + actions
    graphed.pool[:, :, 40:46] = eager.pool[:, :, 40:46] = eager.pool[:, :, 0:6]
    for prefix in (9, 13):
        want = eager.denoise(SeqView(table, prefix), prefix, noise, 3)
        got = graphed.denoise(SeqView(table, prefix), prefix, noise, 3)
        assert torch.equal(got, want)
    [key] = graphed.denoise_graphs.keys
    buf = graphed.denoise_graphs.buffers(key)
    ptr = buf.x.data_ptr()
    graphed.denoise(SeqView(table, 9), 9, noise, 3)
    assert graphed.denoise_graphs.buffers(key).x.data_ptr() == ptr and len(graphed.denoise_graphs.keys) == 1
    graphed.denoise(SeqView(table, 9), 9, noise, 2)  # a new S: its own graph
    assert len(graphed.denoise_graphs.keys) == 2


def test_denoise_loop_traces_as_one_graph(model):
    from oxygen_ros.engine.runner.graphs import DenoiseBuffers, denoise_loop
    from oxygen_ros.engine.families.pi05.family import FAMILY
    from oxygen_ros.engine.families.pi05.family import velocity_fn as _velocity

    runner = _runner(model, True)
    conds = FAMILY.adarms_schedule(runner, 1, 2)
    buf = DenoiseBuffers.allocate(MC.action_horizon, MC.action_dim, 4, runner.sink_slot, runner.device)
    buf.x.normal_()
    torch._dynamo.reset()
    compiled = torch.compile(lambda: denoise_loop(runner, buf, 1, conds, _velocity),
                             fullgraph=True, backend="eager")
    before = buf.x.clone()
    with torch.inference_mode():
        compiled()
    assert torch.isfinite(buf.x).all() and not torch.equal(buf.x, before)


def test_decode_graphs_are_bounded(model, monkeypatch):
    """Batch sizes and table widths vary over hours: the least recently used graph is dropped."""
    runner = _runner(model, True)
    monkeypatch.setattr(DecodeGraphs, "MAX_GRAPHS", 3)
    graphs = DecodeGraphs(runner)
    for b, w in [(1, 1), (2, 1), (3, 2), (1, 1), (5, 4)]:
        graphs.buffers(b, w)
    assert graphs.sizes == [(1, 1), (4, 2), (8, 4)]
