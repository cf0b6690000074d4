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


def test_config_and_docs_are_generated_from_the_table():
    """config/oxygen.yaml and the docs' parameter table are what the table generates (names,
    defaults, ranges, live / configure, meanings): oxygen-dev param-files --write."""
    from oxygen_ros.node import param_files as F

    assert F.outdated() == [], "run: oxygen-dev param-files --write"
    params = yaml.safe_load(CONFIG.read_text())["/**"]["ros__parameters"]
    for name, value in params.items():
        want = P.SPECS[name].default
        assert value == want and type(value) is type(want), name
    doc = (ROOT / F.PARAMS_DOC.path).read_text()
    table = doc.split(F.PARAMS_DOC.begin, 1)[1].split(F.PARAMS_DOC.end, 1)[0]
    rows = {line.split("|")[1].strip(" `"): line for line in table.splitlines()
            if line.startswith("| `")}
    assert set(rows) == set(P.SPECS)
    assert "| `decode_steps_per_frame` | int | `4` | [1, 64] | live |" in table
    assert "| `model.dtype` | string | `float32` | float32 \\| bfloat16 \\| float16 | configure |" in table


def test_a_file_that_disagrees_with_the_table_is_reported(tmp_path):
    from oxygen_ros.node import param_files as F

    for rel in (F.CONFIG, F.PARAMS_DOC.path):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text((ROOT / rel).read_text())
    assert F.outdated(tmp_path) == []
    cfg = tmp_path / F.CONFIG
    cfg.write_text(cfg.read_text().replace("decode_steps_per_frame: 4", "decode_steps_per_frame: 5"))
    doc = tmp_path / F.PARAMS_DOC.path
    doc.write_text(doc.read_text().replace("| [1, 64] | live |", "| [1, 65] | live |", 1))
    assert F.outdated(tmp_path) == [F.CONFIG, F.PARAMS_DOC.path]
    doc.write_text(doc.read_text().replace("| `autostart` | bool | `false` |  | read-only |",
                                           "| `autostart` | bool | `false` |  | live |"))
    F.write(tmp_path)
    assert F.outdated(tmp_path) == [] and cfg.read_text() == F.yaml_text()
    doc.write_text(doc.read_text().replace(F.PARAMS_DOC.end, ""))
    with pytest.raises(ValueError, match="params:begin"):
        F.outdated(tmp_path)


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


def test_one_default_per_parameter():
    """The node's built-in default is the value config/oxygen.yaml sets and the docs' table
    shows, for every parameter: a node started without the file (docs/simulation.md's "by hand"
    command) runs as one started with it (the file used to set model.num_threads 1 where the node
    took every core)."""
    from oxygen_ros.node import param_files as F

    params = yaml.safe_load(CONFIG.read_text())["/**"]["ros__parameters"]
    assert set(params) == set(P.SPECS)
    differ = {n: (v, P.SPECS[n].default) for n, v in params.items() if v != P.SPECS[n].default}
    assert differ == {}
    doc = (ROOT / F.PARAMS_DOC.path).read_text()
    assert "| `model.num_threads` | int | `0` |" in doc


def test_the_robot_file_sets_valid_parameters():
    """config/oxygen_thor.yaml (a robot with a GPU) overrides only real parameters, with valid
    values, and says cuda, bfloat16 and a thread count; the docs point at it."""
    thor = yaml.safe_load((ROOT / "config" / "oxygen_thor.yaml").read_text())["/**"]["ros__parameters"]
    for name, value in thor.items():
        assert name in P.SPECS, name
        assert P.validate_value(P.SPECS[name], value) is None, name
    assert thor["model.device"] == "cuda" and thor["model.dtype"] == "bfloat16"
    assert thor["model.num_threads"] > 0 and thor["model.preset"] == "pi05"
    for page in ("README.md", "docs/node.md"):
        assert "config/oxygen_thor.yaml" in (ROOT / page).read_text(), page
