"""The typed seam between the engine and the rest (issue 28): the real Engine satisfies
robot/engine_port.EnginePort, each port method's parameters are the Engine's, and no code outside
the engine holds an engine typed `Any`."""
import inspect
import pathlib
import re

import pytest

from oxygen_ros.robot.engine_port import EnginePort

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _port_members() -> list[str]:
    return [n for n in vars(EnginePort) if not n.startswith("_")] + \
        list(EnginePort.__annotations__)


def test_the_engine_satisfies_the_port():
    pytest.importorskip("torch")
    from oxygen_ros.engine.config import EngineConfig, load_model_config
    from oxygen_ros.engine.core.engine import Engine

    engine = Engine(load_model_config("tiny"), EngineConfig(device="cpu", dtype="float32"))
    assert isinstance(engine, EnginePort)
    for name in _port_members():
        assert hasattr(engine, name), name
        port = getattr(EnginePort, name, None)
        if inspect.isfunction(port):  # same parameter names, in order, as the Engine's method
            mine = list(inspect.signature(getattr(Engine, name)).parameters)
            theirs = list(inspect.signature(port).parameters)
            assert mine == theirs, (name, mine, theirs)


def test_an_object_missing_a_port_method_is_not_an_engine():
    class Half:
        model_config = config = None

        def step(self, obs):
            return obs
    assert not isinstance(Half(), EnginePort)


def test_no_engine_is_typed_any_outside_the_engine():
    pattern = re.compile(r"\bengine\s*:\s*Any\b")
    hits = [f"{p.relative_to(ROOT)}:{i}" for p in (ROOT / "oxygen_ros").rglob("*.py")
            for i, line in enumerate(p.read_text().splitlines(), 1) if pattern.search(line)]
    assert not hits, hits
