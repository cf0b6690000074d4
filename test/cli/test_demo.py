"""oxygen-demo builds through robot/build.py like the node and oxygen-replay."""
from __future__ import annotations

import dataclasses
import json

from oxygen_ros.cli import demo
from oxygen_ros.engine.config import PRESETS
from oxygen_ros.engine.families.loader import init_model
from oxygen_ros.engine.families.pi05.writer import save_lerobot_checkpoint
from oxygen_ros.engine.model.tokenizer import build_tiny_tokenizer


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


def test_sim_demo_drives_the_trained_policy_to_success(capsys):
    """oxygen-demo --sim: the committed simulator policy presses the button in the simulator,
    and its memory text is one of the task's stage captions."""
    import pytest

    from oxygen_ros.sim import get_task, metaworld_available, unavailable_reason

    if not metaworld_available():
        pytest.skip(str(unavailable_reason()))
    from pathlib import Path

    ck = Path(__file__).resolve().parents[2] / "checkpoints" / "sim-policy"
    rc = demo.main(["--checkpoint", str(ck), "--sim", "button-press-topdown", "--threads", "1",
                    "--json"])
    assert rc == 0
    out = capsys.readouterr().out
    (episode,) = json.loads(out.strip().splitlines()[-1])["sim"]
    assert episode["success"] and episode["memory_frames"] >= 1
    captions = get_task("button-press-topdown").captions
    said = {line.split("memory ")[1].split("'")[1] for line in out.splitlines() if "  frame" in line
            and "memory ''" not in line}
    assert said and said <= set(captions), said
    assert "SUCCESS" in out and "sim summary: 1/1 episodes succeeded" in out
