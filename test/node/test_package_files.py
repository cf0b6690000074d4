"""launch/oxygen.launch.py, config/oxygen.yaml and config/oxygen.rviz, read as text / AST
(launch_ros is not importable off-robot), and their installation under share/oxygen_ros."""
import ast
import os
from pathlib import Path

import pytest
import yaml

from oxygen_ros.node import params as P

ROOT = Path(__file__).resolve().parents[2]
LAUNCH = ROOT / "launch" / "oxygen.launch.py"
CONFIG = ROOT / "config" / "oxygen.yaml"
RVIZ = ROOT / "config" / "oxygen.rviz"


def _calls(tree, name):
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            f = node.func
            fname = f.id if isinstance(f, ast.Name) else getattr(f, "attr", None)
            if fname == name:
                out.append(node)
    return out


def _kw(call, key):
    for k in call.keywords:
        if k.arg == key:
            return k.value
    return None


def _const(node):
    return node.value if isinstance(node, ast.Constant) else None


def test_launch_file_arguments_and_node():
    tree = ast.parse(LAUNCH.read_text())
    assert any(isinstance(n, ast.FunctionDef) and n.name == "generate_launch_description"
               for n in tree.body)
    args = {}
    for call in _calls(tree, "DeclareLaunchArgument"):
        name = _const(call.args[0])
        desc = _kw(call, "description")
        assert desc is not None, f"launch argument {name} has no description"
        text = "".join(_const(v) or "" for v in ast.walk(desc) if isinstance(v, ast.Constant))
        assert len(text) > 10
        args[name] = call
    assert set(args) >= {"params_file", "namespace", "autostart", "log_level", "use_sim_time"}
    nodes = _calls(tree, "LifecycleNode")
    assert len(nodes) == 1
    node = nodes[0]
    assert _const(_kw(node, "package")) == "oxygen_ros"
    assert _const(_kw(node, "executable")) == "oxygen_node"
    assert _const(_kw(node, "name")) == "oxygen"
    # params_file defaults to share/oxygen_ros/config/oxygen.yaml
    src = LAUNCH.read_text()
    assert 'get_package_share_directory("oxygen_ros")' in src
    assert '"config", "oxygen.yaml"' in src
    # lifecycle-aware start: configure, then activate on configuring -> inactive
    assert "TRANSITION_CONFIGURE" in src and "TRANSITION_ACTIVATE" in src
    handler = _calls(tree, "OnStateTransition")[0]
    assert _const(_kw(handler, "goal_state")) == "inactive"


def test_config_has_every_parameter_and_only_those():
    data = yaml.safe_load(CONFIG.read_text())
    params = data["/**"]["ros__parameters"]
    assert set(params) == set(P.SPECS)
    for name, value in params.items():
        spec = P.SPECS[name]
        if spec.type == "double_array" and value == []:
            continue
        assert P.validate_value(spec, value) is None, name
        if spec.type == "double":
            assert isinstance(value, float), f"{name} must be written as a float (e.g. 50.0)"
    assert params["model.preset"] == "tiny" and params["model.device"] == "cpu"


def test_rviz_config():
    data = yaml.safe_load(RVIZ.read_text())
    vm = data["Visualization Manager"]
    assert vm["Global Options"]["Fixed Frame"] == "base_link"
    displays = {d["Class"]: d for d in vm["Displays"]}
    assert displays["rviz_default_plugins/Image"]["Topic"]["Value"] == "/camera/image_raw"
    assert displays["rviz_default_plugins/MarkerArray"]["Topic"]["Value"] == "/oxygen/markers"


def _install_prefix():
    for cand in [os.environ.get("OXYGEN_INSTALL_PREFIX", "")] + \
            os.environ.get("AMENT_PREFIX_PATH", "").split(os.pathsep) + [str(ROOT / "install" / "oxygen_ros")]:
        if cand and (Path(cand) / "share" / "oxygen_ros" / "package.xml").is_file():
            return Path(cand)
    return None


def test_files_installed_under_share():
    prefix = _install_prefix()
    if prefix is None:
        pytest.skip("oxygen_ros is not built (run scripts/setup.sh)")
    share = prefix / "share" / "oxygen_ros"
    for rel in ("launch/oxygen.launch.py", "config/oxygen.yaml", "config/oxygen.rviz"):
        installed = share / rel
        assert installed.is_file(), f"{installed} missing: rebuild (scripts/setup.sh)"
        assert installed.read_text() == (ROOT / rel).read_text(), f"{installed} is stale: rebuild"
    exe = prefix / "lib" / "oxygen_ros" / "oxygen_node"
    assert exe.is_file() and os.access(exe, os.X_OK)
