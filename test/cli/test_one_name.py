"""One name for every tool (issue 37): the commands in setup.py are the only entry points (no
module outside oxygen_ros/cli/ runs as __main__), library code never imports the commands' layer,
every benchmark is a module of bench/suite/ behind `oxygen-bench <name>`, every simulator tool a
verb of `oxygen-sim`, and every command and verb the docs, NOTES and scripts name exists."""
from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path

import pytest

from oxygen_ros.bench import registry
from oxygen_ros.cli import dev, sim

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "oxygen_ros"
CLI = PACKAGE / "cli"


def _modules(under: Path = PACKAGE) -> list[Path]:
    return sorted(p for p in under.rglob("*.py") if "__pycache__" not in p.parts)


def _dotted(path: Path) -> str:
    return ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")


def console_scripts() -> dict[str, str]:
    """setup.py's console scripts: name -> module."""
    text = (ROOT / "setup.py").read_text()
    return dict(re.findall(r'"([\w-]+)=([\w.]+):main"', text))


def runs_as_main(tree: ast.Module) -> bool:
    """A module-level `if __name__ == "__main__":`."""
    for node in tree.body:
        if isinstance(node, ast.If) and isinstance(node.test, ast.Compare):
            names = {getattr(n, "id", None) for n in [node.test.left, *node.test.comparators]}
            values = {getattr(n, "value", None) for n in [node.test.left, *node.test.comparators]}
            if "__name__" in names and "__main__" in values:
                return True
    return False


def imported_modules(path: Path, tree: ast.Module) -> set[str]:
    """Every module `path` imports (at any depth), relative imports resolved."""
    package = _dotted(path).split(".") if path.name == "__init__.py" else _dotted(path).split(".")[:-1]
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = package[:len(package) - node.level + 1] if node.level else []
            mod = ".".join(base + ([node.module] if node.module else []))
            out.add(mod)
            out |= {f"{mod}.{a.name}" for a in node.names}
    return out


def test_the_checks_see_a_main_block_and_a_relative_cli_import(tmp_path):
    tree = ast.parse('from ..cli.demo import x\nif __name__ == "__main__":\n    x()\n')
    assert runs_as_main(tree)
    assert "oxygen_ros.cli.demo" in imported_modules(PACKAGE / "sim" / "probe.py", tree)
    assert not runs_as_main(ast.parse('if __name__ == "x":\n    pass\n'))


def test_no_module_outside_cli_runs_as_main():
    found = [str(p.relative_to(ROOT)) for p in _modules()
             if CLI not in p.parents and runs_as_main(ast.parse(p.read_text()))]
    assert found == [], f"run these through a command (oxygen-bench, oxygen-sim, oxygen-dev): {found}"


def test_every_command_module_is_a_console_script():
    """A __main__ in cli/ only where the module is a command (python -m of the same command)."""
    scripts = set(console_scripts().values())
    found = [_dotted(p) for p in _modules(CLI) if runs_as_main(ast.parse(p.read_text()))]
    assert sorted(found) == sorted(scripts)


def test_library_code_never_imports_the_commands():
    bad = []
    for p in _modules():
        if CLI in p.parents:
            continue
        mods = imported_modules(p, ast.parse(p.read_text()))
        bad += [f"{p.relative_to(ROOT)}: {m}" for m in sorted(mods)
                if m == "oxygen_ros.cli" or m.startswith("oxygen_ros.cli.")]
    assert bad == []


@pytest.mark.parametrize("name,module", sorted(console_scripts().items()))
def test_console_scripts_point_at_a_main(name, module):
    assert callable(importlib.import_module(module).main), name


def test_every_benchmark_is_a_module_of_bench_suite():
    """bench/suite/ holds the benchmarks and only them; nothing else in bench/ has a main."""
    assert all(b.module.startswith("oxygen_ros.bench.suite.") for b in registry.BENCHMARKS.values())
    suite = {_dotted(p) for p in _modules(PACKAGE / "bench" / "suite")} - {
        "oxygen_ros.bench.suite", "oxygen_ros.bench.suite.node_process"}  # the node benchmarks' helper
    assert suite == {b.module for b in registry.BENCHMARKS.values()}
    with_main = [p.name for p in (PACKAGE / "bench").glob("*.py")
                 if any(isinstance(n, ast.FunctionDef) and n.name == "main"
                        for n in ast.parse(p.read_text()).body)]
    assert with_main == []


def test_every_tool_with_a_main_has_a_command():
    """A module with a top-level main() is a verb of a command (or the command itself)."""
    verbs = {v.module for table in (sim.VERBS, sim.ALOHA_VERBS, dev.VERBS) for v in table.values()}
    verbs |= {b.module for b in registry.BENCHMARKS.values()}
    verbs |= set(console_scripts().values())
    has_main = {_dotted(p) for p in _modules() if CLI not in p.parents
                and any(isinstance(n, ast.FunctionDef) and n.name == "main" for n in ast.parse(p.read_text()).body)}
    assert has_main - verbs == set()
    for module in verbs:
        assert callable(importlib.import_module(module).main), module


# -- the docs name commands that exist -------------------------------------------------------------

PAGES = [ROOT / "README.md", ROOT / "benchmarks" / "README.md", *sorted((ROOT / "docs").glob("*.md")),
         *sorted((ROOT / "benchmarks" / "results").glob("*/NOTES.md"))]
SCRIPTS = [*sorted((ROOT / "scripts").glob("*.sh")), *sorted((ROOT / "benchmarks").glob("*.sh")),
           *sorted((ROOT / "launch").glob("*"))]
_FENCE = re.compile(r"^\s*(```|~~~)")
_COMMAND = re.compile(r"(?<![\w/.-])(oxygen_node|oxygen-[a-z]+(?:-[a-z]+)*)((?:[ \t]+[^\s`|;&)]+){0,2})")
NOT_COMMANDS = re.compile(r"oxygen-k\d*|oxygen-ros-engine|oxygen-bench-in-detail")


def code_of(path: Path) -> list[str]:
    """The code of a page (fenced blocks and inline code), or the whole of a script."""
    text = path.read_text(encoding="utf-8")
    if path.suffix != ".md":
        return text.splitlines()
    out, fenced = [], False
    for line in text.splitlines():
        if _FENCE.match(line):
            fenced = not fenced
        elif fenced:
            out.append(line)
        else:
            out += re.findall(r"`([^`\n]+)`", line)
    return out


def named_commands(path: Path) -> list[tuple[str, list[str]]]:
    """(command, the next two words) for every oxygen-* command in the code of `path`."""
    out = []
    for code in code_of(path):
        for m in _COMMAND.finditer(code):
            if not NOT_COMMANDS.fullmatch(m.group(1)):
                out.append((m.group(1), m.group(2).split()))
    return out


def unknown(command: str, words: list[str]) -> str | None:
    """Why `command words...` is not a command line that exists, else None."""
    scripts = console_scripts()
    if command not in scripts:
        return f"no command {command}"
    tables = {"oxygen-bench": registry.BENCHMARKS, "oxygen-sim": sim.VERBS, "oxygen-dev": dev.VERBS}
    if command not in tables or not words or not re.fullmatch(r"[a-z][a-z0-9-]*", words[0]):
        return None  # a flag, a placeholder (<name>), a path or a command without verbs
    if command == "oxygen-sim" and words[0] == "aloha":
        if len(words) > 1 and re.fullmatch(r"[a-z][a-z0-9-]*", words[1]) and words[1] not in sim.ALOHA_VERBS:
            return f"no verb oxygen-sim aloha {words[1]}"
        return None
    if words[0] not in tables[command]:
        return f"no verb {command} {words[0]}"
    return None


def test_the_check_sees_a_command_and_a_verb_that_do_not_exist():
    assert unknown("oxygen-sim-eval", []) == "no command oxygen-sim-eval"
    assert unknown("oxygen-bench", ["no-such"]) == "no verb oxygen-bench no-such"
    assert unknown("oxygen-sim", ["aloha", "nope"]) == "no verb oxygen-sim aloha nope"
    assert unknown("oxygen-sim", ["aloha", "demos"]) is None
    assert unknown("oxygen-bench", ["--quick"]) is None and unknown("oxygen-demo", ["run"]) is None


@pytest.mark.parametrize("path", PAGES + SCRIPTS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_command_the_docs_name_exists(path):
    bad = [f"{c} {' '.join(w)}: {why}" for c, w in named_commands(path) if (why := unknown(c, w))]
    assert bad == []


@pytest.mark.parametrize("path", PAGES + SCRIPTS, ids=lambda p: str(p.relative_to(ROOT)))
def test_the_docs_run_tools_by_their_command_not_their_module(path):
    """`python -m oxygen_ros.<module>` only for a command's own module (scripts that run before
    the console scripts are installed); the docs name the command."""
    text = path.read_text(encoding="utf-8")
    modules = re.findall(r"python3? -m\s+(oxygen_ros[\w.]*)", text)
    allowed = set(console_scripts().values())
    assert [m for m in modules if m not in allowed] == []


# -- the verbs run --------------------------------------------------------------------------------

@pytest.mark.parametrize("argv,prog", [(["paired"], "oxygen-sim paired"),
                                       (["loop-timing"], "oxygen-sim loop-timing"),
                                       (["eval"], "oxygen-sim eval"),
                                       (["aloha"], "oxygen-sim aloha")])
def test_a_sim_tool_runs_by_its_verb(argv, prog, capsys):
    with pytest.raises(SystemExit) as exc:
        sim.main([*argv, "--help"])
    assert exc.value.code == 0
    assert capsys.readouterr().out.startswith(f"usage: {prog} ")


def test_oxygen_sim_alone_is_the_meta_world_robot_and_lists_its_verbs(capsys):
    with pytest.raises(SystemExit) as exc:
        sim.main(["--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: oxygen-sim ") and "--camera" in out
    assert all(f"  {v} " in out for v in [*sim.VERBS, *sim.ALOHA_VERBS])


def test_oxygen_dev_runs_its_verbs(capsys):
    assert dev.main(["param-files", "--check"]) == 0  # the committed files are up to date
    with pytest.raises(SystemExit) as exc:
        dev.main(["no-such-verb"])
    assert exc.value.code == 2
