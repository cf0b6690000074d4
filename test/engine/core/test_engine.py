"""Engine.step(): bad input, live knobs, KV accounting, and the zero-copy decode path."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import oxygen_ros.engine.runner.paging as paging
from oxygen_ros.bench.compare import collect_requests
from oxygen_ros.engine.config import PRESETS, EngineConfig
from oxygen_ros.engine.core.engine import Engine
from oxygen_ros.engine.families.loader import init_model
from oxygen_ros.engine.core.observation import Observation
from oxygen_ros.engine.core.synthetic import SyntheticStream
from oxygen_ros.engine.model.tokenizer import build_tiny_tokenizer

MC = PRESETS["tiny"]


@pytest.fixture(scope="module")
def parts():
    return init_model(MC, seed=0), build_tiny_tokenizer(512)


def make(parts, **cfg) -> Engine:
    model, tok = parts
    return Engine(MC, EngineConfig(**cfg), model=model, tokenizer=tok)


def obs(i: int = 0) -> Observation:
    return SyntheticStream(MC, seed=0).frame(i)


@pytest.mark.parametrize("change,match", [
    (dict(images=np.zeros((2, 16, 16, 4), np.uint8)), r"must have shape \[H, W, 3\]"),
    (dict(images=[np.zeros((48, 64, 3), np.uint8), np.zeros((0, 64, 3), np.uint8)]),
     r"camera 1 image is 64x0"),
    (dict(images=np.zeros((2, 32, 32, 3), np.float32)), "must be uint8"),
    (dict(images=np.zeros((32, 32, 3), np.uint8)), r"\[cameras, H, W, 3\] or a list"),
    (dict(images=np.zeros((3, 32, 32, 3), np.uint8)), "takes 1..2"),
    (dict(state=np.array([0.1, np.nan, 0.2], np.float32)), r"non-finite values at joint indices \[1\]"),
    (dict(instruction="  "), "instruction must be a non-empty string"),
    (dict(camera_valid=(False, False)), "every camera is masked"),
])
def test_bad_observation_raises_naming_the_problem(parts, change, match):
    engine = make(parts)
    good = obs()
    bad = Observation(**{**dict(images=good.images, state=good.state,
                                instruction=good.instruction, stamp=good.stamp), **change})
    with pytest.raises(ValueError, match=match):
        engine.step(bad)
    engine.step(good)  # the engine is unharmed


def test_bad_requests_and_knobs(parts):
    engine = make(parts)
    with pytest.raises(ValueError, match="non-empty prompt"):
        engine.ask("")
    with pytest.raises(ValueError, match=r"prompt is \d+ tokens; it must be 1..48"):
        engine.ask("pick up the red cube " * 40)
    with pytest.raises(ValueError, match="max_new_tokens"):
        engine.ask("hello?", max_new_tokens=0)
    for field, value, match in [("decode_steps_per_frame", 0, r"\(k\)"),
                                ("max_decode_steps", 0, r"\(N\)"),
                                ("denoise_steps", 0, r"\(S\)"), ("mode", "turbo", "mode must be"),
                                ("linear_layout", "columns", "linear_layout must be")]:
        with pytest.raises(ValueError, match=match):
            engine.update_config(**{field: value})
        with pytest.raises(ValueError, match=match):
            EngineConfig(**{field: value})
    with pytest.raises(ValueError, match="block_size cannot change"):
        engine.update_config(block_size=32)
    with pytest.raises(ValueError, match="linear_layout cannot change"):
        engine.update_config(linear_layout="transposed")


def test_validate_changes_is_pure_and_gives_reasons(parts):
    engine = make(parts, num_blocks=40)
    before = engine.config
    new = engine.validate_changes(decode_steps_per_frame=2, mode="shared")
    assert (new.decode_steps_per_frame, new.mode) == (2, "shared")
    assert engine.config is before and engine.config.mode == "oxygen"  # nothing applied
    for changes, match in [
        (dict(instruction="stack the blocks " * 30), "instruction \\+ state prompt can reach"),
        (dict(instruction="  "), "instruction must be a non-empty string"),
        (dict(memory_prompt="what happened " * 40), "memory_prompt: prompt is"),
        (dict(memory_prompt=""), "memory_prompt: a language request needs"),
        (dict(max_decode_steps=4000), r"needs up to \d+ KV blocks .* the pool has 40"),
        (dict(turbo=True), r"unknown engine settings \['turbo'\]"),
        (dict(num_blocks=80), "num_blocks cannot change"),
    ]:
        with pytest.raises(ValueError, match=match):
            engine.validate_changes(**changes)
        with pytest.raises(ValueError, match=match):
            engine.update_config(**changes)
        assert engine.config is before
    engine.step(obs())  # still serving


def test_instruction_fits_with_the_longest_state_text(parts):
    """An instruction accepted by validate_changes fits with ANY state of up to action_dim
    joints, so no later frame can fail on the prompt budget."""
    engine = make(parts)
    words = "pick up the red cube and put it in the bowl".split()
    accepted = None
    for n in range(1, 60):
        text = " ".join(words[i % len(words)] for i in range(n))
        try:
            engine.validate_changes(instruction=text)
            accepted = text
        except ValueError:
            break
    assert accepted is not None
    engine.update_config(instruction=accepted)
    rng = np.random.default_rng(0)
    o = obs()
    for _ in range(50):
        state = rng.uniform(-1, 1, MC.action_dim).astype(np.float32)
        prompt = engine.intake.action_prompt(Observation(o.images, state), engine.config)
        assert len(prompt) <= MC.max_prompt_tokens


def test_check_question(parts):
    engine = make(parts)
    engine.check_question("What is on the table?")
    for text, match in [("", "non-empty"), ("   ", "non-empty"),
                        ("cube " * 60, r"prompt is \d+ tokens"),
                        ("x" * 100_000, r"prompt is 100000 characters")]:
        with pytest.raises(ValueError, match=match):
            engine.check_question(text)
        with pytest.raises(ValueError, match=match):
            engine.ask(text)
    assert not engine.has_unfinished()


def test_observation_without_instruction_uses_the_configured_one(parts):
    o = obs()
    a = make(parts, denoise_steps=2, memory_every_n_frames=0, instruction="open the drawer")
    b = make(parts, denoise_steps=2, memory_every_n_frames=0)
    implicit = a.step(Observation(o.images, o.state)).actions
    explicit = b.step(Observation(o.images, o.state, instruction="open the drawer")).actions
    np.testing.assert_array_equal(implicit, explicit)
    with pytest.raises(ValueError, match=r"state has 9 joints; the model takes at most 8"):
        a.step(Observation(o.images, np.zeros(9, np.float32)))


def test_long_instruction_is_rejected_not_truncated(parts):
    engine = make(parts)
    o = obs()
    long = Observation(images=o.images, state=o.state, instruction="stack the blocks " * 30)
    with pytest.raises(ValueError, match="max_prompt_tokens"):
        engine.step(long)


def test_batch_follows_k_and_kv_returns_to_baseline(parts):
    engine = make(parts, decode_steps_per_frame=4, max_decode_steps=12, denoise_steps=2)
    batches = [engine.step(obs(i)).batch_size for i in range(6)]
    assert batches == [1, 2, 3, 3, 3, 3]  # steady state ceil(N/k) = 3
    engine.update_config(decode_steps_per_frame=2)  # live change: ceil(12/2) = 6
    batches = [engine.step(obs(i)).batch_size for i in range(6, 14)]
    assert batches[-1] == 6
    *_, out = engine.drain(obs)
    assert out.kv.blocks_used == 0 and out.num_running == 0
    assert out.kv.peak_blocks > 0 and out.kv.peak_bytes == out.kv.peak_blocks * engine.runner.bytes_per_block


def _drained(parts, observe) -> tuple[Engine, list, list]:
    """Three frames with a question and a memory request each, then Engine.drain(observe)."""
    engine = make(parts, decode_steps_per_frame=2, max_decode_steps=6, denoise_steps=1,
                  memory_every_n_frames=1)
    outs = []
    for i in range(3):
        engine.ask(f"what is in view at frame {i}?")
        outs.append(engine.step(obs(i)))
    return engine, outs, list(engine.drain(observe))


def test_drain_finishes_every_request_once_and_births_no_memory(parts):
    engine, outs, drained = _drained(parts, None)  # on the last observation
    assert drained and not engine.has_unfinished() and engine.num_live_requests == 0
    assert all(u.birth_frame < 3 for o in drained for u in o.updates)  # nothing new was born
    finals = [u.id for o in outs + drained for u in o.updates if u.is_final]
    assert sorted(finals) == sorted({u.id for o in outs for u in o.updates}) == list(range(1, 7))
    assert engine.config.memory_every_n_frames == 1  # the config is not changed
    assert drained[-1].kv.blocks_used == 0
    assert list(engine.drain()) == []  # nothing left: no frame is stepped
    out = engine.step(obs(9))  # serving goes on, periodic memory requests included
    assert [u.kind for u in out.updates] == ["memory"]


def test_drain_on_the_last_observation_gives_the_tokens_a_stream_gives(parts):
    _, outs_a, a = _drained(parts, None)
    _, outs_b, b = _drained(parts, obs)
    assert collect_requests(outs_a + a) == collect_requests(outs_b + b)
    assert [o.frame for o in a] == [o.frame for o in b]


def test_drain_is_bounded_and_needs_an_observation(parts):
    engine = make(parts, decode_steps_per_frame=1, max_decode_steps=6, memory_every_n_frames=0)
    engine.ask("what is on the table?")
    with pytest.raises(RuntimeError, match="no observation"):
        next(engine.drain())  # nothing stepped yet, no observe
    assert len(list(engine.drain(obs, max_frames=2))) == 2 and engine.has_unfinished()
    assert len(list(engine.drain())) == 4 and not engine.has_unfinished()  # 6 tokens at k=1


def test_frame_output_reports_stages_and_streams_text(parts):
    engine = make(parts, decode_steps_per_frame=3, max_decode_steps=6, denoise_steps=2)
    rid = engine.ask("What is on the table?\n")
    outs = [engine.step(obs(i)) for i in range(3)]
    assert outs[0].actions.shape == (MC.action_horizon, MC.action_dim)
    assert np.isfinite(outs[0].actions).all()
    assert set(outs[0].timings_ms) == {"vision_prefill", "denoise", "decode", "kv", "sched", "detokenize"}
    answer = [u for o in outs for u in o.updates if u.id == rid]
    assert [u.num_tokens for u in answer] == [3, 6] and answer[-1].is_final
    assert answer[-1].frames_spanned == 2 and answer[-1].kind == "question"
    assert answer[-1].stamp == outs[0].stamp  # the stamp of the observation it came from
    assert answer[-1].finish_reason in ("length", "eos")


@pytest.mark.parametrize("mode", ["isolated", "oxygen", "shared", "parallel"])
def test_the_chunk_is_handed_over_before_the_language_work(parts, mode):
    """step(obs, on_actions) gives the chunk the moment it exists: a robot acts on it while the
    frame decodes (isolated mode decodes whole texts after it; before, the chunk waited for
    them). Once per frame, the same arrays as the output, before any decode step."""
    engine = make(parts, mode=mode, decode_steps_per_frame=3, max_decode_steps=12,
                  denoise_steps=2, memory_every_n_frames=1)
    for i in range(3):
        engine.ask("What is on the table?\n")
        seen: list = []

        def ready(actions, chunks):
            seen.append((actions, chunks, engine.timer.ms()["decode"]))
        out = engine.step(obs(i), on_actions=ready)
        [(actions, chunks, decoded_ms)] = seen
        assert actions is out.actions and chunks is out.chunks
        assert out.timings_ms["decode"] > 0 and out.tokens_this_frame > 0
        if mode != "parallel":  # there, decode runs in a thread beside the action path
            assert decoded_ms == 0.0, "the chunk was handed over after language work"
            assert 0 < out.actions_ms < out.frame_ms
    if mode == "isolated":  # whole texts after the chunk: most of the frame
        assert out.actions_ms < 0.8 * out.frame_ms, (out.actions_ms, out.frame_ms)


def test_a_failing_hand_over_fails_the_frame_before_any_request_is_born(parts):
    engine = make(parts, decode_steps_per_frame=2, max_decode_steps=4, denoise_steps=1)
    rid = engine.ask("What is on the table?\n")

    def broken(actions, chunks):
        raise RuntimeError("publisher gone")
    with pytest.raises(RuntimeError, match="publisher gone"):
        engine.step(obs(0), on_actions=broken)
    assert engine.kv.usage().blocks_used == 0  # the action path's blocks are back
    outs = [engine.step(obs(1 + i)) for i in range(3)]  # the question is served next frames
    assert [u.is_final for o in outs for u in o.updates if u.id == rid][-1]


def test_decode_reads_the_pool_in_place(parts, monkeypatch):
    """Batched decode hands the attention op the pool tensors themselves (no per-request or
    per-frame gather); the only copies are one copy-on-write block per forked sequence."""
    engine = make(parts, decode_steps_per_frame=2, max_decode_steps=8, denoise_steps=1)
    assert engine.runner.backend == "cpp"
    real = paging.paged_attention
    pool_ptrs = {c.data_ptr() for c in engine.runner.k_cache + engine.runner.v_cache}
    seen: list[int] = []

    def spy(backend, q, k_cache, v_cache, *args):
        assert k_cache.data_ptr() in pool_ptrs and v_cache.data_ptr() in pool_ptrs
        assert k_cache.is_contiguous() and k_cache.shape[0] == engine.runner.num_blocks + 1  # + sink
        seen.append(q.shape[0])
        return real(backend, q, k_cache, v_cache, *args)

    copies: list[int] = []
    real_copy = engine.runner.copy_blocks

    def count_copies(ops):
        copies.append(len(ops))
        return real_copy(ops)

    monkeypatch.setattr(paging, "paged_attention", spy)
    monkeypatch.setattr(engine.runner, "copy_blocks", count_copies)
    import oxygen_ros.engine.runner.attention.paged as paged_mod
    monkeypatch.setattr(paged_mod, "paged_attention_reference",
                        lambda *a, **k: pytest.fail("gathering reference path used"))
    for i in range(6):
        out = engine.step(obs(i))
    assert out.batch_size == 4 and max(seen) >= 4
    # per frame: one CoW for the action scratch + one per admitted request, never per decode
    assert sum(copies) <= 6 * 2


def test_actions_depend_on_observation_and_noise_seed(parts):
    a = make(parts, denoise_steps=3).step(obs(0)).actions
    b = make(parts, denoise_steps=3).step(obs(0)).actions
    c = make(parts, denoise_steps=3, seed=1).step(obs(0)).actions
    np.testing.assert_array_equal(a, b)
    assert np.abs(a - c).max() > 1e-3


def test_masked_camera_equals_missing_camera(parts):
    e1, e2 = make(parts, denoise_steps=2), make(parts, denoise_steps=2)
    o = obs(0)
    masked = Observation(images=o.images, state=o.state, instruction=o.instruction,
                         camera_valid=(True, False))
    single = Observation(images=o.images[:1], state=o.state, instruction=o.instruction)
    np.testing.assert_allclose(e1.step(masked).actions, e2.step(single).actions, atol=1e-6)


def test_tiny_frame_is_fast_on_one_core(parts):
    torch.set_num_threads(1)
    try:
        engine = make(parts, memory_every_n_frames=0)
        engine.step(obs(0))
        times = [engine.step(obs(i)).frame_ms for i in range(1, 6)]
    finally:
        torch.set_num_threads(2)
    assert min(times) < 200.0, times


def spy_admissions(engine: Engine, monkeypatch) -> list:
    """Record the KVCacheBlocks of every request the scheduler admits, in order."""
    admitted: list = []
    real_admit = engine.scheduler.admit

    def spy(frame, limit=None, reserve=None):
        out = real_admit(frame, limit, reserve)
        admitted.extend(a.blocks for a in out)
        return out

    monkeypatch.setattr(engine.scheduler, "admit", spy)
    return admitted


def test_identical_suffixes_in_one_frame_hit_the_prefix_cache(parts, monkeypatch):
    """Two people ask the same long question about the same observation: the second request's
    full suffix blocks are the first one's (refcounted), and both get the same answer."""
    engine = make(parts, decode_steps_per_frame=4, max_decode_steps=8, denoise_steps=1,
                  memory_every_n_frames=0)
    question = "Is the red cube inside the bowl now, or is it still on the table next to it?\n"
    admitted = spy_admissions(engine, monkeypatch)
    a, b = engine.ask(question), engine.ask(question)
    outs = [engine.step(obs(0))]
    assert admitted[0].num_cached_tokens == 0
    assert admitted[1].num_cached_tokens >= engine.config.block_size
    outs.append(engine.step(obs(1)))
    got = {r["id"]: r for r in collect_requests(outs)}
    assert got[a]["finish_reason"] and got[b]["finish_reason"]
    assert got[a]["tokens"] == got[b]["tokens"]
    # the same question on a different observation must not hit
    engine.ask(question)
    engine.step(obs(2))
    assert admitted[2].num_cached_tokens == 0


def test_fully_cached_suffix_is_recomputed_without_writing_the_shared_block(parts, monkeypatch):
    """When every suffix token hits the prefix cache, the last one is recomputed only for its
    logits: its K/V goes to the runner's sink slot, the shared block is left untouched."""
    engine = make(parts, decode_steps_per_frame=4, max_decode_steps=4, denoise_steps=1,
                  memory_every_n_frames=0)
    o = obs(0)
    images = o.valid_images()
    plen = engine.prefix_tokens(images, engine.intake.action_prompt(o, engine.config))
    bs = engine.config.block_size
    words = "the red cube is next to the blue bowl on the table".split()
    question = next(q for q in (" ".join(words[:n]) + " ok" * extra + "?\n"
                                for n in range(3, len(words) + 1) for extra in range(16))
                    if (plen + len(engine.tokenizer.encode(q))) % bs == 0
                    and len(engine.tokenizer.encode(q)) >= bs)
    n_tokens = len(engine.tokenizer.encode(question))
    admitted = spy_admissions(engine, monkeypatch)
    written: list[list[int]] = []
    real_write = paging.PoolWriter._write

    def record(self, layer, k, v):
        if layer == 0:
            written.append(self.slots.tolist())
        return real_write(self, layer, k, v)

    monkeypatch.setattr(paging.PoolWriter, "_write", record)
    a, b = engine.ask(question), engine.ask(question)
    out = engine.step(o)
    assert [b.num_cached_tokens for b in admitted] == [0, n_tokens]
    table_b = admitted[1].block_ids
    shared_slots = {blk * bs + i for blk in table_b[: (plen + n_tokens) // bs] for i in range(bs)}
    language_step0 = written[2]  # after the prefix prefill and the first denoise step
    assert engine.runner.sink_slot in language_step0
    assert language_step0.count(engine.runner.sink_slot) == 1
    first_a = set(language_step0[:n_tokens])  # request a wrote its suffix; b wrote only the sink
    assert first_a <= shared_slots
    got = {r["id"]: r["tokens"] for r in collect_requests([out])}
    assert got[a] == got[b] and len(got[a]) == 4


def test_compiled_denoise_matches_eager(parts):
    """torch.compile of the action expert's step changes speed, not the action chunk."""
    eager = make(parts, denoise_steps=3, memory_every_n_frames=0).step(obs(0)).actions
    compiled = make(parts, denoise_steps=3, memory_every_n_frames=0,
                    compile_denoise=True).step(obs(0)).actions
    np.testing.assert_allclose(compiled, eager, atol=1e-4, rtol=1e-4)


def test_warmup_leaves_no_trace(parts):
    engine = make(parts, decode_steps_per_frame=4, max_decode_steps=6, denoise_steps=2)
    fresh = make(parts, decode_steps_per_frame=4, max_decode_steps=6, denoise_steps=2)
    engine.warmup()
    assert engine.frame == 0 and engine.num_live_requests == 0 and not engine.has_unfinished()
    assert engine.kv.usage().blocks_used == 0 and engine.kv.usage().peak_blocks == 0
    a, b = engine.step(obs(0)), fresh.step(obs(0))
    assert a.frame == b.frame == 0
    np.testing.assert_array_equal(a.actions, b.actions)
    assert [u.new_tokens for u in a.updates] == [u.new_tokens for u in b.updates]
    with pytest.raises(RuntimeError, match="before the engine serves"):
        engine.warmup()


def test_a_given_model_needs_its_tokenizer(parts):
    """A loaded model with the built-in tiny tokenizer would run and emit nonsense: refused."""
    model, _ = parts
    with pytest.raises(ValueError, match="without its tokenizer"):
        Engine(MC, EngineConfig(), model=model)


def test_tokenizer_with_an_added_token_past_the_rows_serves(parts, image_token_tokenizer):
    """A PaliGemma-like tokenizer (<image> one past the embedding's rows) serves the model: the
    engine never emits an id past the rows; a question, memory prompt or instruction holding
    <image> is refused with the reason where it enters."""
    from oxygen_ros.engine.model.tokenizer import load_tokenizer

    tok = load_tokenizer(image_token_tokenizer)
    engine = Engine(MC, EngineConfig(max_decode_steps=6, decode_steps_per_frame=3), model=parts[0],
                    tokenizer=tok)
    engine.ask("what happened?")
    tokens = [t for out in [engine.step(obs(0)), *engine.drain(lambda i: obs(i))]
              for u in out.updates for t in u.new_tokens]
    assert tokens and all(0 <= t < MC.vocab_size for t in tokens)
    reason = r"holds '<image>' \(id 512\): a token of the tokenizer the checkpoint's embedding"
    with pytest.raises(ValueError, match="prompt " + reason):
        engine.ask("what is in <image>?")
    with pytest.raises(ValueError, match="prompt " + reason):
        engine.check_question("<image>")
    with pytest.raises(ValueError, match="memory_prompt: prompt " + reason):
        engine.update_config(memory_prompt="describe <image>")
    with pytest.raises(ValueError, match="instruction " + reason):
        engine.update_config(instruction="pick up <image>")
    import dataclasses

    with pytest.raises(ValueError, match="instruction " + reason):
        engine.step(dataclasses.replace(obs(1), instruction="open <image>"))
