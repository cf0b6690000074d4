"""Qwen3-VL with a DiT action expert, family qwen3vl (engine/families/qwen3vl/): the family
(family.py), the backbone (model.py), its checkpoint folders (checkpoint.py) and the `qwen` config
section the Qwen families share (config.py, torch-free)."""
