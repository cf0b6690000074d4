"""oxygen-demo builds through robot/build.py like the node and oxygen-replay."""
from __future__ import annotations

import dataclasses
import json

from oxygen_ros import demo
from oxygen_ros.engine.config import PRESETS
from oxygen_ros.engine.model import init_model, save_lerobot_checkpoint
from oxygen_ros.engine.tokenizer import build_tiny_tokenizer


def test_compare_runs_the_checkpoints_model_under_its_own_config(tmp_path, capsys, monkeypatch):
    """--compare's second engine shares the first one's weights and tokenizer, under the
    checkpoint's configuration (not the --preset's: here a 7-step action horizon)."""
    mc = dataclasses.replace(PRESETS["tiny"], action_horizon=7)
    folder = save_lerobot_checkpoint(init_model(mc, seed=1), mc, tmp_path / "ck",
                                     tokenizer=build_tiny_tokenizer(mc.vocab_size))
    engines = []
    real = demo.Engine

    def engine(config, *args, **kwargs):
        engines.append(real(config, *args, **kwargs))
        return engines[-1]

    monkeypatch.setattr(demo, "Engine", engine)
    rc = demo.main(["--checkpoint", str(folder), "--compare", "isolated", "--frames", "1",
                    "--warmup", "0", "--k", "2", "--N", "2", "--S", "1", "--threads", "1",
                    "--quiet", "--json", "--dump", str(tmp_path / "dump.json")])
    assert rc == 0
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert result["isolated_action_hz"] > 0
    other = engines[-1]  # the compared mode's engine
    assert other.config.mode == "isolated" and other.model_config.action_horizon == 7
    frames = json.loads((tmp_path / "dump.json").read_text())["frames"]
    assert len(frames[0]["actions"]) == 7
