"""The qwen35 family served by the engine: a tiny random Qwen3_5ForConditionalGeneration saved
by transformers loads through build_engine (the node's model.checkpoint) and oxygen-inspect
checks it; in isolated and oxygen modes the engine's greedy tokens over 24 steps for a question
on a frame equal transformers' generate on the same image and text (question in the user turn),
first-step logits within 1e-4 in float32; every mode gives the same tokens and chunks on the
random preset; the floor prices the state layers from the cache spec."""
from __future__ import annotations

import json
import shutil

import pytest
import torch

from oxygen_ros.cli import inspect_checkpoint as checkpoint_cli
from oxygen_ros.bench.compare import collect_requests
from oxygen_ros.bench.compare import compare_runs
from oxygen_ros.engine.config import MODES, PRESETS, EngineConfig
from oxygen_ros.engine.core.engine import Engine
from oxygen_ros.engine.config.family_registry import family_of
from oxygen_ros.engine.families.qwen35.checkpoint import hf_config
from oxygen_ros.engine.families.qwen3vl.model import patchify
from oxygen_ros.engine.core.synthetic import SyntheticStream
from oxygen_ros.engine.model.tokenizer import build_tiny_tokenizer
from oxygen_ros.robot.build import ModelSource, build_engine

MC = PRESETS["qwen35-tiny"]
TOKENIZER = build_tiny_tokenizer(2048)
QUESTION = "what is on the table?"
STEPS = 24


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    """transformers' model of the qwen35-tiny shape, saved by save_pretrained with the tokenizer
    beside it. Seeded; matrices re-drawn ~ N(0, 1/fan_in) and every 1-D parameter perturbed
    (norms, decays, biases matter), the final norm's gains of random sign: with transformers'
    own 0.02 init the tied head echoes the last prompt token 24 times."""
    from transformers import Qwen3_5ForConditionalGeneration

    torch.manual_seed(0)
    hf = Qwen3_5ForConditionalGeneration(hf_config(MC)).eval()
    with torch.no_grad():
        for p in hf.parameters():
            if p.dim() >= 2:
                p.copy_(torch.randn_like(p) / p[0].numel() ** 0.5)
            else:
                p.add_(0.3 * torch.randn_like(p))
        norm = hf.model.language_model.norm.weight  # stored as gain - 1
        norm.copy_(torch.randn_like(norm) - 1)
    out = tmp_path_factory.mktemp("qwen35-folder")
    hf.save_pretrained(out)
    TOKENIZER.save(out)
    return hf, out


def _engine(folder, mode: str):
    cfg = EngineConfig(mode=mode, decode_steps_per_frame=8, max_decode_steps=STEPS,
                       denoise_steps=1, memory_every_n_frames=0, max_active_requests=4)
    return build_engine(ModelSource(checkpoint=str(folder)), cfg).engine


def test_folder_loads_through_build_engine_and_oxygen_inspect(folder, capsys):
    _, path = folder
    engine = _engine(path, "oxygen")
    mc = engine.model_config
    assert mc.family == "qwen35" and mc.hybrid == MC.hybrid and mc.depth == MC.depth
    spec = family_of(mc).cache_spec(mc)
    assert spec.attention.layers == (3,) and spec.recurrent.layers == (0, 1, 2)
    report = checkpoint_cli.inspect(path)
    assert report["problems"] == [] and report["format"] == "qwen35", report
    assert "RANDOM" in report["action_expert"]
    assert checkpoint_cli.main([str(path)]) == 0
    assert "OK: the node can serve" in capsys.readouterr().out
    # a config that does not fit the weights is reported tensor by tensor, and refused
    bad = path.parent / "bad"
    shutil.copytree(path, bad)
    cfg = json.loads((bad / "config.json").read_text())
    cfg["text_config"]["intermediate_size"] = 512
    (bad / "config.json").write_text(json.dumps(cfg))
    report = checkpoint_cli.inspect(bad)
    assert any("mlp" in p and "512" in p for p in report["problems"]), report["problems"]
    assert checkpoint_cli.main([str(bad)]) == 1
    with pytest.raises(ValueError, match="do not fit"):
        _engine(bad, "oxygen")


@pytest.mark.parametrize("mode", ["isolated", "oxygen"])
def test_greedy_tokens_equal_transformers_generate(folder, mode):
    hf, path = folder
    engine = _engine(path, mode)
    mc, family = engine.model_config, family_of(engine.model_config)
    obs = SyntheticStream(mc, seed=5).frame(0)
    logits: list[torch.Tensor] = []
    model = engine.runner.model
    lm_logits = model.lm_logits
    model.lm_logits = lambda h: logits.append(lm_logits(h)) or logits[-1]
    rid = engine.ask(QUESTION, max_new_tokens=STEPS)
    outs = [engine.step(obs)] + list(engine.drain())
    tokens = [t for o in outs for u in o.updates if u.id == rid for t in u.new_tokens]
    # transformers' input: the frame's prefix (template head, the images, the prompt), then the
    # question on its own line in the same user turn, the template's tail opening the answer
    prompt = engine.intake.action_prompt(obs, engine.config)
    question = family.question_ids(mc, engine.tokenizer, QUESTION)
    # the prefix ends before the instruction's trailing space, which opens the question's text
    # (a space then a newline are one token in Qwen's vocabulary: test_chat_template.py)
    assert question == TOKENIZER.encode(" \n" + QUESTION, add_bos=False) + list(mc.qwen.tail_ids)
    pixels = engine.runner.prepare_images(obs.valid_images())
    n = pixels.shape[0]
    ids = model.prefix_ids(n, prompt) + question
    assert ids[:len(mc.qwen.head_ids)] == list(mc.qwen.head_ids)
    side = mc.vision.image_size // mc.vision.patch_size
    ids_t = torch.tensor([ids])
    with torch.no_grad():
        ref = hf.generate(input_ids=ids_t, pixel_values=patchify(pixels, 16, 2, 2),
                          image_grid_thw=torch.tensor([[1, side, side]] * n),
                          mm_token_type_ids=(ids_t == mc.qwen.image_token_id).int(),
                          max_new_tokens=STEPS, do_sample=False, eos_token_id=None,
                          pad_token_id=0, output_logits=True, return_dict_in_generate=True)
    want = ref.sequences[0, len(ids):].tolist()
    # the engine stops at the model's EOS; transformers ran on without one
    assert len(tokens) == STEPS or tokens[-1] == mc.eos_token_id
    assert tokens == want[:len(tokens)] and len(tokens) >= 8
    assert len(set(tokens)) >= 8, tokens  # not an echo: the comparison means something
    first = logits[0][-1] if logits[0].dim() == 2 else logits[0]
    torch.testing.assert_close(first.float(), ref.logits[0][0], atol=1e-4, rtol=0)


def _run(mode: str, model, then: str | None = None) -> dict:
    """Two frames of asks (a burst on the second), drained; ``then``: the mode from frame 1 on,
    with requests in flight (each in its own slot or waiting on the first frame's snapshot)."""
    engine = Engine(MC, EngineConfig(mode=mode, decode_steps_per_frame=2, max_decode_steps=4,
                                     denoise_steps=1, max_active_requests=2,
                                     memory_every_n_frames=2, seed=3), model=model,
                    tokenizer=TOKENIZER)
    stream = SyntheticStream(MC, seed=3)
    outs = []
    for f in range(2):
        if f == 1 and then:
            assert engine.scheduler.num_unfinished > 0
            engine.update_config(mode=then)
        for j in range(f + 1):  # a burst on frame 1: requests wait and share its snapshot
            engine.ask(["What is on the table?", "Describe the gripper."][j], priority=j)
        outs.append(engine.step(stream.frame(f)))
    outs += engine.drain(stream.frame, max_frames=20)
    assert not engine.has_unfinished()
    usage = engine.kv.usage()
    assert usage.blocks_used == 0 and usage.state_slots_used == 0
    engine.kv.check_invariants()
    return {"requests": collect_requests(outs),
            "frames": [{"frame": o.frame, "actions": o.actions.tolist()} for o in outs],
            "peak_slots": usage.peak_state_slots}


def test_every_mode_gives_the_tokens_and_chunks_of_isolated():
    from oxygen_ros.engine.families.loader import init_model

    model = init_model(MC, seed=3)
    runs = {m: _run(m, model) for m in MODES}
    runs["oxygen->isolated"] = _run("oxygen", model, then="isolated")
    base = runs["isolated"]
    assert max(len(set(r["tokens"])) for r in base["requests"]) >= 3, base["requests"]
    assert len(base["requests"]) == 4 and base["peak_slots"] == 1
    assert runs["oxygen"]["peak_slots"] > 1  # requests in flight, each in its own slot
    for mode in runs:
        result = compare_runs(base, runs[mode], tie=1e-4, atol=1e-5)
        assert result.ok, f"{mode}: {result.summary()}\n" + "\n".join(result.mismatches)


def test_the_floor_prices_state_layers_from_the_cache_spec():
    from oxygen_ros.bench.floor import stage_bytes

    mc = PRESETS["qwen35-0.8b"]
    spec = family_of(mc).cache_spec(mc)
    b = stage_bytes(mc, "bfloat16", batch=30, context_tokens=100)
    assert b["kv_bytes_per_token"] == 6 * 2 * 2 * 256 * 2  # the 6 full-attention layers only
    state = spec.recurrent.bytes_per_sequence()
    assert state / 2**20 == pytest.approx(19.69, abs=0.01)  # conv kept in float32
    # a decode step reads and writes each request's state
    assert b["attention"]["decode_step"] == 30 * (101 * b["kv_bytes_per_token"] + 2 * state)
    assert b["attention"]["prefill"] == mc.max_prefix_tokens * b["kv_bytes_per_token"] + state


def test_configs_are_checked_where_they_enter():
    """The hybrid section belongs to family qwen35 only; qwen35 refuses what it cannot run."""
    hybrid = dict(layer_types=("linear_attention", "full_attention"))
    for preset in ("tiny", "xr0-tiny", "starvla-tiny"):
        with pytest.raises(ValueError, match="no hybrid fields"):
            PRESETS[preset].replace(hybrid=hybrid)
    with pytest.raises(ValueError, match="DeepStack"):
        MC.replace(qwen={**MC.qwen.__dict__, "deepstack_visual_indexes": (0,)})
    with pytest.raises(ValueError, match="layer_types has 2 entries"):
        MC.replace(hybrid={**MC.hybrid.__dict__, **hybrid})
    with pytest.raises(ValueError, match="mrope_section"):
        MC.replace(head_dim=128)
    with pytest.raises(ValueError, match="needs a full_attention layer"):
        MC.replace(hybrid={**MC.hybrid.__dict__, "layer_types": ("linear_attention",) * 4})
    with pytest.raises(ValueError, match="kv-layerwise"):
        MC.replace(action_experts=PRESETS["xr0-tiny"].to_dict()["action_experts"])
