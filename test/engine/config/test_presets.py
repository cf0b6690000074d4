"""Every CPU preset serves its own default configuration: the engine's construction-time check
(default instruction + the longest state text within max_prompt_tokens) passes for each."""
import pytest

from oxygen_ros.engine.config import PRESETS, EngineConfig
from oxygen_ros.engine.core.engine import Engine
from oxygen_ros.engine.core.synthetic import SyntheticStream


@pytest.mark.parametrize("preset", ["tiny", "small", "balanced", "xr0-tiny"])
def test_preset_builds_and_steps_with_default_config(preset):
    mc = PRESETS[preset]
    engine = Engine(mc, EngineConfig(denoise_steps=1, decode_steps_per_frame=1, max_decode_steps=2,
                                     max_active_requests=2))
    out = engine.step(SyntheticStream(mc).frame(0))
    assert out.actions.shape == (mc.action_horizon, mc.action_dim)


def test_xr0_presets_are_shaped_like_xiaomi_robotics_0():
    """The expert on the last layers, GQA, head dim 128, chunks of 30 x 32 (xr0: full size)."""
    for name in ("xr0-tiny", "xr0"):
        mc = PRESETS[name]
        e = mc.action_experts[0]
        assert mc.family == "qwen3vl" and mc.head_dim == 128
        assert 0 < e.num_layers < mc.depth and mc.num_heads // mc.num_kv_heads >= 2
        assert (mc.action_horizon, mc.action_dim) == (30, 32)
        assert mc.action_tokens == mc.qwen.state_tokens + 1 + 30
    full = PRESETS["xr0"]
    assert (full.depth, full.action_experts[0].num_layers, full.action_experts[0].width,
            full.num_kv_heads, full.vlm.width) == (36, 16, 1024, 8, 2560)


def test_family_fields_are_validated():
    mc = PRESETS["xr0-tiny"]
    with pytest.raises(ValueError, match="qwen3vl"):
        mc.replace(qwen=None)
    with pytest.raises(ValueError, match="mrope_section"):
        mc.replace(qwen={**mc.to_dict()["qwen"], "mrope_section": (8, 8, 8)})
    with pytest.raises(ValueError, match="last layers"):
        mc.replace(action_experts=({"width": 64, "mlp_dim": 64, "num_layers": 9},))
