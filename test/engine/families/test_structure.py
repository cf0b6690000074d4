"""The structure the family interface keeps (issue 28): outside the family modules no code
branches on a family name, an expert kind or hasattr of a model, and no oxygen_ros modules
import each other in a circle (module-level and function-local imports alike). What each test
looks for is in source_scan.py; on the code before the family interface the first found 43
branches (config.py, runner.py, engine.py, intake.py, rtc.py, bench/floor.py, bench/profile.py)
and the second the circle families/pi05/checkpoint.py <-> families/qwen3vl/checkpoint.py."""
from __future__ import annotations

import sys
import textwrap
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from source_scan import (branches_outside_families, cycles, family_branches,  # noqa: E402
                         import_graph, imports)

ROOT = Path(__file__).resolve().parents[3]


def test_no_family_branches_outside_the_family_modules():
    found = branches_outside_families(ROOT)
    assert not found, "ask the family (engine/families/base.py) instead:\n" + "\n".join(found)


def test_the_scan_finds_each_kind_of_branch(tmp_path):
    """The scan is not blind: each rule finds its pattern, and a preset's name is not a family."""
    src = tmp_path / "m.py"
    src.write_text(textwrap.dedent('''
        def f(config, model, e, family, r):
            a = config.family == "pi05"
            b = family != "qwen3vl"
            c = e.kind in ("regress", "hidden-crossattn")
            d = config.qwen is None
            g = hasattr(model, "fuse_projections")
            h = getattr(self.model, "kept_layers", ())
            i = is_starvla(config)
            j = r["preset"] == "pi05"
            k = getattr(model, "config")
    '''))
    found = family_branches(src)
    assert [int(x.split(":")[1]) for x in found] == [3, 4, 5, 6, 7, 8, 9], found


def test_no_import_circle():
    graph = import_graph(ROOT)
    assert "oxygen_ros.engine.families.loader" in graph["oxygen_ros.engine.families.pi05.checkpoint"]
    assert not cycles(graph)


def test_the_import_graph_sees_function_local_imports(tmp_path):
    pkg = tmp_path / "oxygen_ros"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("def f():\n    from .b import g\n    return g\n")
    (pkg / "b.py").write_text("from oxygen_ros import a\n\ndef g():\n    return a\n")
    (pkg / "c.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                              "    from . import a\n")
    graph = import_graph(tmp_path)
    assert imports("oxygen_ros.c", pkg / "c.py", set(graph)) == set()
    assert cycles(graph) == [["oxygen_ros.a", "oxygen_ros.b"]]


def test_engine_is_grouped_by_role_and_its_tests_mirror_it():
    """engine/ holds at most six entries (its roles: core, runner, model, config, families), no
    loose modules, and test/engine/ has the same subfolders (a role's tests live beside each
    other). On the old layout engine/ held 31 entries, 25 of them loose modules."""
    engine = ROOT / "oxygen_ros" / "engine"
    entries = sorted(p.name for p in engine.iterdir() if p.name != "__pycache__")
    assert len(entries) <= 6, entries
    assert [e for e in entries if e.endswith(".py")] == ["__init__.py"], entries
    roles = {e for e in entries if (engine / e).is_dir()}
    tests = {p.name for p in (ROOT / "test" / "engine").iterdir() if p.is_dir() and p.name != "__pycache__"}
    assert roles == tests, (roles, tests)
    # conftest.py: the fixtures the model's and the families' tests share (not a test file)
    loose = [p.name for p in (ROOT / "test" / "engine").glob("*.py") if p.name != "conftest.py"]
    assert not loose, "test files belong in a role's folder"
