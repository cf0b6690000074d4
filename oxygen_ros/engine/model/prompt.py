"""The pi0.5 text prompt: instruction + discretised proprioceptive state.

Convention read from openpi ``src/openpi/models/tokenizer.py`` (PaligemmaTokenizer.tokenize) and
LeRobot ``src/lerobot/policies/pi05/processor_pi05.py`` (Pi05PrepareStateTokenizerProcessorStep):
cleaned = instruction.strip().replace("_", " ").replace("\\n", " ");
bins = digitize(state, linspace(-1, 1, 257)[:-1]) - 1;
prompt = f"Task: {cleaned}, State: {' '.join(bins)};\\nAction: " (tokenised with BOS).
LeRobot pads the normalised state to max_state_dim (32) with zeros BEFORE discretising: pass
``pad_to=32`` for that. One deliberate difference: the state is clipped to [-1, 1] first, so values
below -1 go to bin 0 (upstream np.digitize would give -1); values above 1 give 255 in both.
"""
from __future__ import annotations

import numpy as np


def clean_instruction(instruction: str) -> str:
    return instruction.strip().replace("_", " ").replace("\n", " ")


def discretize_state(state, bins: int = 256) -> np.ndarray:
    """Normalised state [D] -> int bins in [0, bins) (ValueError naming a non-finite joint)."""
    s = np.asarray(state, dtype=np.float64).reshape(-1)
    bad = np.flatnonzero(~np.isfinite(s))
    if bad.size:
        raise ValueError(f"state joint {int(bad[0])} is not finite ({s[bad[0]]!r})")
    if bins < 1:
        raise ValueError(f"bins must be >= 1, got {bins}")
    s = np.clip(s, -1.0, 1.0)
    return np.digitize(s, bins=np.linspace(-1.0, 1.0, bins + 1)[:-1]) - 1


def format_prompt(instruction: str, state, bins: int = 256, pad_to: int | None = None) -> str:
    """"Task: {cleaned instruction}, State: {bins};\\nAction: " for a state already in [-1, 1]."""
    s = np.asarray(state, dtype=np.float64).reshape(-1)
    if pad_to is not None:
        if s.size > pad_to:
            raise ValueError(f"state has {s.size} joints, more than pad_to={pad_to}")
        s = np.concatenate((s, np.zeros(pad_to - s.size)))
    state_str = " ".join(str(int(b)) for b in discretize_state(s, bins))
    return f"Task: {clean_instruction(instruction)}, State: {state_str};\nAction: "
