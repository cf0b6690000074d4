"""engine/'s roles point one way (issue 37): config <- model <- runner <- families <- core, each
importing only its own layer and the ones below (a family's config.py with the configuration),
counting every import: module-level, `if TYPE_CHECKING:` and function-local. A function-local
import says why it is one (# lazy:). On the code before, the scan found the 7-file circle
config/model_config.py, core/rtc.py, families/base.py, families/registry.py,
runner/model_runner.py, runner/state_pool.py (type-only) and core.rtc -> families -> core.rtc at
run time; and the configuration imported torch through the families' modules."""
from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from source_scan import back_arrows, layer_of, unmarked_local_imports  # noqa: E402

ROOT = Path(__file__).resolve().parents[3]


def test_engine_imports_point_down_the_layers():
    found = back_arrows(ROOT)
    assert not found, "an import pointing up the layers (docs/development.md):\n" + "\n".join(found)


def test_function_local_imports_say_why():
    found = unmarked_local_imports(ROOT)
    assert not found, "make it module-level, or say why it is lazy (# lazy: ...):\n" + \
        "\n".join(found)


def _package(tmp_path: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = tmp_path / "oxygen_ros" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    for folder in [p for p in (tmp_path / "oxygen_ros").rglob("*") if p.is_dir()] + \
            [tmp_path / "oxygen_ros"]:
        (folder / "__init__.py").touch()
    return tmp_path


def test_the_scan_sees_every_kind_of_back_arrow(tmp_path):
    """Module-level, type-only and function-local arrows up are found; arrows down, a
    family's config.py read by the configuration and a marked lazy import are not."""
    root = _package(tmp_path, {
        "engine/config/a.py": "from ..families.pi05 import config\n",
        "engine/config/b.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                              "    from ..runner import r\n",
        "engine/model/m.py": "def f():\n    from ..core import c  # lazy: a test\n",
        "engine/runner/r.py": "from ..model import m\n",
        "engine/core/c.py": "from ..families.pi05 import family\n",
        "engine/families/pi05/config.py": "from ...config import a\n",
        "engine/families/pi05/family.py": "def g():\n    from ...model import m\n",
    })
    found = back_arrows(root)
    assert [f.split(": ")[1] for f in found] == [
        "oxygen_ros.engine.config.b -> oxygen_ros.engine.runner.r",
        "oxygen_ros.engine.model.m -> oxygen_ros.engine.core.c"], found
    unmarked = unmarked_local_imports(root)
    assert len(unmarked) == 1 and "families/pi05/family.py:2" in unmarked[0], unmarked
    assert layer_of("oxygen_ros.engine.families.qwen35.config") == 0
    assert layer_of("oxygen_ros.engine.families.qwen35.model") == 3


def test_the_configuration_and_the_families_rules_load_no_torch():
    """The node validates parameters with the configuration: importing it (and every family's
    config rules, each imported first in a fresh interpreter) loads neither torch nor
    transformers."""
    for first in ("oxygen_ros.engine.config", "oxygen_ros.engine.families.pi05.config",
                  "oxygen_ros.engine.families.qwen3vl.config",
                  "oxygen_ros.engine.families.starvla.config",
                  "oxygen_ros.engine.families.qwen35.config"):
        code = (f"import sys, {first}\n"
                "from oxygen_ros.engine.config import PRESETS, RUNNABLE_PRESETS, model_config_from_dict\n"
                "c = model_config_from_dict(PRESETS['qwen35-tiny'].to_dict())\n"
                "assert c == PRESETS['qwen35-tiny'] and RUNNABLE_PRESETS\n"
                "print(sorted(m for m in ('torch', 'transformers') if m in sys.modules))")
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                             cwd=ROOT, timeout=120)
        assert out.returncode == 0, out.stderr[-3000:]
        assert out.stdout.strip() == "[]", (first, out.stdout)
