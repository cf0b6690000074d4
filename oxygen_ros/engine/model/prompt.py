"""The pi0.5 text prompt: instruction + discretised proprioceptive state.

The convention of openpi (``PaligemmaTokenizer.tokenize`` with a state) and LeRobot 0.6.1
(``Pi05PrepareStateTokenizerProcessorStep``), which pi0.5 checkpoints were trained with:
cleaned = instruction.strip().replace("_", " ").replace("\\n", " ");
bins = digitize(state, linspace(-1, 1, 257)[:-1]) - 1 over the normalised state's own values
(no clipping: a value below -1 becomes bin -1, anything from 1 - 2/256 up is 255; no padding,
except for checkpoints of LeRobot v0.4.x, which zero-padded the state to 32 values first: pad_to);
prompt = f"Task: {cleaned}, State: {' '.join(bins)};\\nAction: ", tokenised with BOS.
"""
from __future__ import annotations

import numpy as np


def clean_instruction(instruction: str) -> str:
    return instruction.strip().replace("_", " ").replace("\n", " ")


def discretize_state(state, bins: int = 256) -> np.ndarray:
    """Normalised state [D] -> int bins, -1..bins-1 (ValueError naming a non-finite joint).

    Not clipped: the model was trained on -1 for values below -1, so it must see the same."""
    s = np.asarray(state).reshape(-1)
    if not np.issubdtype(s.dtype, np.floating):
        s = s.astype(np.float64)
    bad = np.flatnonzero(~np.isfinite(s))
    if bad.size:
        raise ValueError(f"state joint {int(bad[0])} is not finite ({s[bad[0]]!r})")
    if bins < 1:
        raise ValueError(f"bins must be >= 1, got {bins}")
    # float32 states are compared against float64 edges, exactly as numpy does upstream
    return np.digitize(s, bins=np.linspace(-1.0, 1.0, bins + 1)[:-1]) - 1


def pad_state(state, pad_to: int = 0) -> np.ndarray:
    """The state zero-padded to `pad_to` values, as LeRobot v0.4.x did before discretising
    (pad_vector: a longer state is left as it is; 0 = no padding, v0.5.0 on)."""
    s = np.asarray(state).reshape(-1)
    if pad_to <= s.size:
        return s
    return np.concatenate([s, np.zeros(pad_to - s.size, dtype=s.dtype)])


PROMPT_END = ";\nAction: "  # what every prompt ends with (the Qwen families split before its space)


def format_prompt(instruction: str, state, bins: int = 256, pad_to: int = 0) -> str:
    """"Task: {cleaned instruction}, State: {bins};\\nAction: " for a normalised state
    (`pad_to`: LeRobot v0.4.x's zero padding of the state, pad_state)."""
    state_str = " ".join(str(int(b)) for b in discretize_state(pad_state(state, pad_to), bins))
    return f"Task: {clean_instruction(instruction)}, State: {state_str}{PROMPT_END}"
