"""Every CPU preset serves its own default configuration: the engine's construction-time check
(default instruction + the longest state text within max_prompt_tokens) passes for each."""
import pytest

from oxygen_ros.engine.config import PRESETS, EngineConfig
from oxygen_ros.engine.engine import Engine
from oxygen_ros.engine.synthetic import SyntheticStream


@pytest.mark.parametrize("preset", ["tiny", "small", "balanced"])
def test_preset_builds_and_steps_with_default_config(preset):
    mc = PRESETS[preset]
    engine = Engine(mc, EngineConfig(denoise_steps=1, decode_steps_per_frame=1, max_decode_steps=2,
                                     max_active_requests=2))
    out = engine.step(SyntheticStream(mc).frame(0))
    assert out.actions.shape == (mc.action_horizon, mc.action_dim)
