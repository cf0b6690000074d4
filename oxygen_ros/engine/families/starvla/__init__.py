"""StarVLA heads on the Qwen3-VL backbone, family starvla (engine/families/starvla/): the family
(family.py) and the heads (heads.py)."""
