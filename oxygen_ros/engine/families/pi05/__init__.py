"""pi0.5 (engine/families/pi05/): the family (family.py), its Mixture-of-Transformers model
(model.py, vision.py) and its LeRobot / openpi checkpoint folders (checkpoint.py, writer.py)."""
