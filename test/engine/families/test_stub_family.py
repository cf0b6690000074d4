"""A family registered from this test alone (no file outside it is edited): a tiny model with
one attention layer, one token per image and a trivial action head on the prefill's last
hidden state, its own checkpoint folder. It runs through Engine.step (actions and language),
oxygen-inspect's checks and the bandwidth floor (bench/floor.py) by answering the Family
interface (engine/families/base.py)."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors import safe_open
from safetensors.torch import load_file, save_file
from torch import nn

from oxygen_ros.cli import inspect_checkpoint as checkpoint_cli
from oxygen_ros.bench.floor import count_params, floor_table, markdown
from oxygen_ros.engine.config import PRESETS, EngineConfig, ModelConfig
from oxygen_ros.engine.core.engine import Engine
from oxygen_ros.engine.runner.action_stage import ActionInputs
from oxygen_ros.engine.config.cache_spec import AttentionKV, CacheSpec
from oxygen_ros.engine.config.family_rules import Capabilities
from oxygen_ros.engine.families.base import Family, ParamCounts, StageCost
from oxygen_ros.engine.config.family_registry import register, unregister
from oxygen_ros.engine.families.loader import Checkpoint, open_checkpoint
from oxygen_ros.engine.model.formats import CheckpointInfo
from oxygen_ros.engine.core.synthetic import SyntheticStream
from oxygen_ros.engine.model.tokenizer import build_tiny_tokenizer

CONFIG_FILE = "stub_family.json"
WEIGHTS_FILE = "stub_family.safetensors"


class StubModel(nn.Module):
    """One attention layer over [one token per image ; prompt], tied logits, an action head."""

    def __init__(self, c: ModelConfig) -> None:
        super().__init__()
        self.config = c
        w, h, kv, d = c.vlm.width, c.num_heads, c.num_kv_heads, c.head_dim
        self.image_in = nn.Linear(3, w)
        self.embed = nn.Embedding(c.vocab_size, w)
        self.q, self.k, self.v = nn.Linear(w, h * d), nn.Linear(w, kv * d), nn.Linear(w, kv * d)
        self.o = nn.Linear(h * d, w)
        self.head = nn.Linear(w, c.action_horizon * c.action_dim)

    def embed_tokens(self, ids: torch.Tensor) -> torch.Tensor:
        return self.embed(ids.to(self.embed.weight.device))

    def lm_logits(self, hidden: torch.Tensor) -> torch.Tensor:
        return hidden @ self.embed.weight.t()

    def forward_tokens(self, expert, hidden, positions, ctx, cond=None, keep=None):
        c, t = self.config, hidden.shape[0]
        q = self.q(hidden).view(t, c.num_heads, c.head_dim)
        k = self.k(hidden).view(t, c.num_kv_heads, c.head_dim)
        v = self.v(hidden).view(t, c.num_kv_heads, c.head_dim)
        out = hidden + self.o(ctx.attend(0, q, k, v).reshape(t, -1))
        if keep is not None:
            keep[0][:t] = out
        return out

    def prefill_prefix(self, images, prompt_ids, ctx, keep=None):
        img = self.image_in(images.mean(dim=(2, 3)))  # one token per image
        txt = self.embed_tokens(torch.as_tensor(list(prompt_ids), dtype=torch.long))
        hidden = torch.cat([img, txt.to(img.dtype)])
        return self.forward_tokens(0, hidden, torch.arange(hidden.shape[0]), ctx, keep=keep)


class StubFamily(Family):
    name = "stub-test"
    capabilities = Capabilities(causal_prefix=True, keeps_hidden=True)
    action_stage_label = "head"

    def validate(self, config: ModelConfig) -> None:
        if config.depth != 1 or config.qwen is not None:
            raise ValueError("the stub family is one attention layer, no qwen fields")

    def image_tokens(self, config: ModelConfig) -> int:
        return 1

    def prompt_ids(self, config, tokenizer, text):
        return tokenizer.encode(text, add_bos=False)

    def cache_spec(self, config: ModelConfig) -> CacheSpec:
        return CacheSpec(AttentionKV((0,), config.num_kv_heads, config.head_dim))

    def init_model(self, config, seed, device, dtype):
        torch.manual_seed(seed)
        return StubModel(config).to(device=device, dtype=dtype).eval().requires_grad_(False)

    def kept_layers(self, config):
        return (0,)

    def action_chunks(self, runner, a: ActionInputs):
        with torch.inference_mode():
            last = runner.hidden[0][a.prefix_len - 1]
            c = runner.config
            chunk = runner.model.head(last).view(c.action_horizon, c.action_dim).float()
            return {"action": chunk + 0.01 * a.noise.to(chunk.device)}

    def count_params(self, config, expert=1) -> ParamCounts:
        with torch.device("meta"):
            m = StubModel(config)
        n = {name: p.numel() for name, p in m.named_parameters()}
        head = n["head.weight"] + n["head.bias"]
        return ParamCounts(vision=n["image_in.weight"] + n["image_in.bias"],
                           vlm_layers=sum(n.values()) - head - n["embed.weight"]
                           - n["image_in.weight"] - n["image_in.bias"],
                           lm_head=n["embed.weight"], action_step=head, adarms_once=0)

    def action_costs(self, config, counts, prefix_tokens, elem):
        return [StageCost("action head", counts.action_step * elem, 0, config.vlm.width * elem,
                          "1")]

    def owns_folder(self, folder: Path) -> bool:
        return (Path(folder) / CONFIG_FILE).is_file()

    def write_folder(self, model, folder) -> None:
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        (folder / CONFIG_FILE).write_text(json.dumps(model.config.to_dict()))
        save_file({k: v.contiguous() for k, v in model.state_dict().items()},
                  str(folder / WEIGHTS_FILE))

    def _config(self, folder: Path) -> ModelConfig:
        return PRESETS["tiny"].replace(**json.loads((folder / CONFIG_FILE).read_text()))

    def inspect_folder(self, folder, tokenizer=None, asset_id=None):
        folder = Path(folder)
        cfg = self._config(folder)
        with torch.device("meta"):
            want = {k: tuple(v.shape) for k, v in StubModel(cfg).state_dict().items()}
        with safe_open(str(folder / WEIGHTS_FILE), "pt") as f:
            got = {k: tuple(f.get_slice(k).get_shape()) for k in f.keys()}
        problems = [f"{k}: {got.get(k)} != {s}" for k, s in want.items() if got.get(k) != s]
        return {"format": "stub", "config": cfg, "tokenizer": "built-in tiny",
                "weights": f"{len(want)} tensors match" if not problems else "mismatch",
                "problems": problems}

    def open_folder(self, folder, device, dtype, tokenizer=None, asset_id=None, progress=None):
        folder = Path(folder)
        cfg = self._config(folder)
        model = StubModel(cfg)
        model.load_state_dict(load_file(str(folder / WEIGHTS_FILE)))
        info = CheckpointInfo(folder, "stub", ("camera0", "camera1"), None, None, 0, (32, 32), ())
        return Checkpoint(model.eval().requires_grad_(False), cfg,
                          build_tiny_tokenizer(min(cfg.vocab_size, 2048)), "built-in", None, info)


@pytest.fixture(scope="module")
def stub():
    family = StubFamily()
    register(family)
    try:
        yield PRESETS["tiny"].replace(name="stub-tiny", family=family.name, depth=1)
    finally:
        unregister(family.name)


def test_stub_family_runs_through_engine_step(stub):
    assert stub.prefix_tokens(2, 5) == 2 + 5  # its layout: one token per image
    engine = Engine(stub, EngineConfig(decode_steps_per_frame=2, max_decode_steps=3))
    rid = engine.ask("what is on the table?", max_new_tokens=3)
    stream = SyntheticStream(stub)
    outs = [engine.step(stream.frame(i)) for i in range(3)]
    for out in outs:
        assert out.actions.shape == (stub.action_horizon, stub.action_dim)
        assert np.isfinite(out.actions).all() and list(out.chunks) == ["action"]
    finals = [u for o in outs for u in o.updates if u.id == rid and u.is_final]
    assert len(finals) == 1 and finals[0].num_tokens == 3
    # the trivial head reads the prefill's last hidden state: another image, another chunk
    other = engine.step(SyntheticStream(stub, seed=7).frame(0))
    assert not np.allclose(other.actions, outs[0].actions)


def test_stub_family_through_oxygen_inspect_and_open(stub, tmp_path, capsys):
    family = StubFamily()
    model = family.init_model(stub, 0, torch.device("cpu"), torch.float32)
    family.write_folder(model, tmp_path / "ok")
    report = checkpoint_cli.inspect(tmp_path / "ok")
    assert report["problems"] == [] and report["model"].startswith("stub-tiny")
    assert checkpoint_cli.main([str(tmp_path / "ok")]) == 0
    assert "OK: the node can serve" in capsys.readouterr().out
    ck = open_checkpoint(tmp_path / "ok")
    assert ck.config == stub and torch.equal(ck.model.head.weight, model.head.weight)
    # a folder whose weights do not fit its config is reported
    bad = stub.replace(vlm=dict(width=96, mlp_dim=256))
    family.write_folder(StubModel(bad), tmp_path / "bad")
    (tmp_path / "bad" / CONFIG_FILE).write_text(json.dumps(stub.to_dict()))
    assert checkpoint_cli.main([str(tmp_path / "bad")]) == 1
    assert "PROBLEM" in capsys.readouterr().out


def test_stub_family_through_the_floor(stub):
    counts = count_params(stub)
    assert counts.total == sum(p.numel() for p in StubModel(stub).parameters())
    table = floor_table(stub, "float32", 100.0, k=2, n=4, s=3)
    b = table["bytes"]
    assert b["stages"] == ("prefill", "action head", "decode_step")
    assert b["action head"] == counts.action_step * 4 + stub.vlm.width * 4
    assert table["denoise_kv_loads"] is None and "action head" in markdown(table)


def test_a_family_needs_no_floor_accounting():
    """count_params / action_costs are optional hooks: a family that only runs (its prompt, its
    model, its action stage) is a Family, and the floor says it cannot price it. Before they
    were abstract, and such a family could not even be built."""

    class RunsOnly(Family):
        name = "runs-only"

        def prompt_ids(self, config, tokenizer, text):
            return tokenizer.encode(text)

        def init_model(self, config, seed, device, dtype):
            return StubModel(config)

        def action_chunks(self, runner, a):
            return {}

    family = RunsOnly()
    with pytest.raises(NotImplementedError, match="runs-only .*bandwidth floor"):
        family.count_params(PRESETS["tiny"])
    with pytest.raises(NotImplementedError, match="runs-only .*bandwidth floor"):
        family.action_costs(PRESETS["tiny"], None, 1, 2)
