"""oxygen_ros.engine is the engine's front door: code outside engine/ and bench/ imports engine
names only from it (never an engine submodule), every name it lists resolves to the module that
defines it, type checkers see the same names, and importing it costs no torch."""
from __future__ import annotations

import ast
import importlib
import inspect
import json
import subprocess
import sys
from pathlib import Path

import oxygen_ros.engine as front_door

ROOT = Path(__file__).resolve().parents[1]
ENGINE = "oxygen_ros.engine"
# engine/ itself and bench/ (the engine's own tools and benchmarks) may reach inside
INSIDE = ("oxygen_ros/engine", "oxygen_ros/bench")


def outside_files() -> list[Path]:
    files = [p for p in sorted((ROOT / "oxygen_ros").rglob("*.py"))
             if not p.relative_to(ROOT).as_posix().startswith(INSIDE)]
    return files + sorted((ROOT / "launch").rglob("*.py"))


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def engine_reaches(path: Path) -> list[str]:
    """Each import in ``path`` (anywhere: module level, functions, TYPE_CHECKING) that goes past the
    front door: an engine submodule, or a name the front door does not list."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    package = _module_name(path) if path.name == "__init__.py" else _module_name(path).rpartition(".")[0]
    bad = []
    for node in ast.walk(tree):
        where = f"{path.relative_to(ROOT)}:{getattr(node, 'lineno', 0)}"
        if isinstance(node, ast.Import):
            bad += [f"{where} import {a.name}" for a in node.names if a.name.startswith(ENGINE + ".")]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[:len(package.split(".")) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.startswith(ENGINE + "."):
                bad.append(f"{where} from {target} import ...")
            elif target == ENGINE:
                bad += [f"{where} from {ENGINE} import {a.name} (not a front-door name)"
                        for a in node.names if a.name not in front_door._EXPORTS]
        elif isinstance(node, ast.Call) and isinstance(node.func, (ast.Name, ast.Attribute)) and \
                getattr(node.func, "id", getattr(node.func, "attr", "")) in ("import_module", "__import__"):
            arg = node.args[0] if node.args else None
            if isinstance(arg, ast.Constant) and str(arg.value).startswith(ENGINE + "."):
                bad.append(f"{where} import_module({arg.value!r})")
    return bad


def test_code_outside_the_engine_imports_only_the_front_door():
    files = outside_files()
    assert len(files) > 50  # the scan sees the node, robot, bags, sim, cli and launch files
    bad = [line for path in files for line in engine_reaches(path)]
    assert bad == [], "import these names from oxygen_ros.engine (add a name to its _EXPORTS):\n" + \
        "\n".join(bad)


def test_the_scan_sees_every_way_past_the_front_door(tmp_path, monkeypatch):
    monkeypatch.setitem(globals(), "ROOT", tmp_path)
    path = tmp_path / "oxygen_ros" / "sim" / "x.py"
    path.parent.mkdir(parents=True)
    path.write_text("from typing import TYPE_CHECKING\n"
                    "import oxygen_ros.engine\n"
                    "from oxygen_ros.engine import Engine\n"
                    "from ..engine import EngineConfig\n"
                    "from .. import engine\n"
                    "import oxygen_ros.engine.core.engine\n"                     # 6
                    "from ..engine.config import MODES\n"                       # 7
                    "from oxygen_ros.engine import config\n"                    # 8
                    "if TYPE_CHECKING:\n    from oxygen_ros.engine.core import rtc\n"  # 10
                    "def f():\n    from ..robot.engine_port import EnginePort\n"  # not the engine
                    "    return importlib.import_module('oxygen_ros.engine.model')\n")  # 13
    assert [line.split(" ", 1)[0] for line in engine_reaches(path)] == [
        f"oxygen_ros/sim/x.py:{n}" for n in (6, 7, 8, 10, 13)]


def resolution_problems() -> list[str]:
    """Each front-door name that does not resolve (in name order, from a bare import of the front
    door), or is not the module's own: a class or function defined elsewhere, a value not
    assigned there."""
    problems = []
    for name, module_name in front_door._EXPORTS.items():
        try:
            value = getattr(front_door, name)
            module = importlib.import_module(module_name)
        except Exception as e:  # a moved module or an import circle: name the entry that met it
            problems.append(f"{name} ({module_name}): {type(e).__name__}: {e}")
            continue
        if value is not getattr(module, name):
            problems.append(f"{name}: not {module_name}.{name}")
        elif inspect.isclass(value) or inspect.isfunction(value):
            if value.__module__ != module_name:
                problems.append(f"{name}: defined in {value.__module__}, not {module_name}")
        elif name not in _assigned_names(Path(module.__file__)):
            problems.append(f"{name}: not assigned in {module_name}")
    return problems


def test_every_front_door_name_resolves_to_the_module_that_defines_it():
    assert list(front_door._EXPORTS) == sorted(front_door._EXPORTS)  # one per line, sorted
    assert front_door.__all__ == sorted(front_door._EXPORTS)
    assert set(front_door._EXPORTS) <= set(dir(front_door))
    # in a fresh interpreter: what other tests imported first must not hide an import circle
    code = ("import json, sys; sys.path.insert(0, %r); import test_front_door as t; "
            "print(json.dumps(t.resolution_problems()))") % str(Path(__file__).parent)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout.splitlines()[-1]) == []


def _assigned_names(path: Path) -> set[str]:
    out = set()
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        targets = node.targets if isinstance(node, ast.Assign) else \
            [node.target] if isinstance(node, ast.AnnAssign) else []
        out.update(t.id for t in targets if isinstance(t, ast.Name))
    return out


def test_an_unknown_name_is_an_attribute_error():
    try:
        front_door.NoSuchName  # noqa: B018
    except AttributeError as e:
        assert "NoSuchName" in str(e)
    else:
        raise AssertionError("oxygen_ros.engine.NoSuchName resolved")


def test_type_checkers_see_the_same_names_and_modules():
    tree = ast.parse(Path(front_door.__file__).read_text(encoding="utf-8"))
    block = next(n for n in tree.body
                 if isinstance(n, ast.If) and getattr(n.test, "id", "") == "TYPE_CHECKING")
    seen = {}
    for node in block.body:
        assert isinstance(node, ast.ImportFrom)
        for a in node.names:
            assert a.asname == a.name, f"{a.name}: `import X as X` marks a re-export for type checkers"
            seen[a.name] = node.module
    assert seen == front_door._EXPORTS


def test_importing_the_front_door_leaves_torch_unimported():
    code = ("import sys, oxygen_ros.engine as e; dir(e); "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'numpy') "
            "or m.startswith('oxygen_ros.engine.')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=ROOT).stdout
    assert out.strip() == "[]"
