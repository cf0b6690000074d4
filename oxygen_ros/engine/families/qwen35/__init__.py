"""Qwen3.5 (hybrid: Gated DeltaNet + gated full attention), family qwen35
(engine/families/qwen35/): the family (family.py), the backbone (model.py, gated_delta.py), the
VLA with its head (vla.py), its checkpoint folders (checkpoint.py) and the `hybrid` config section
(config.py, torch-free)."""
