"""Model families, one folder each: engine/families/<name>/ holds its config rules and section
(config.py, torch-free), its Family (family.py), its model and its checkpoint folders.
engine/families/base.py: the Family interface; engine/families/loader.py: opening a folder with
the family that owns it; the registry of names is the configuration's
(engine/config/family_registry.py)."""
# The configuration first, whatever module of a family is imported first: its presets resolve
# the families' config modules (family_registry.rules), which then find it whole.
from .. import config as _config  # noqa: F401
