import pytest
import torch

from oxygen_ros.engine.config import PRESETS
from oxygen_ros.engine.model import init_model


@pytest.fixture(scope="session")
def tiny_cfg():
    return PRESETS["tiny"]


@pytest.fixture(scope="session")
def tiny_model(tiny_cfg):
    return init_model(tiny_cfg, seed=0)


@pytest.fixture
def gen():
    return torch.Generator().manual_seed(1234)
