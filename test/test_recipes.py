"""docs/development.md's recipes stay true: every repo path it names exists (a path with a
placeholder, e.g. `oxygen_ros/engine/families/<name>.py`, names a room: the folder before the
placeholder exists), every table a "Where to add" entry says to edit (`BENCHMARKS`, `_EXPORTS`,
...) is assigned in a file that entry names, every name it gives in code exists in the source,
and every command it names is a console script in setup.py (a subcommand: one its --help lists)
or a `python -m` module that runs. The checks read the doc, so a moved file or a renamed command
fails here until the doc follows."""
from __future__ import annotations

import ast
import re
import subprocess
import sys
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "development.md"
# made by scripts/setup.sh (the doc says so), not in a clone
GENERATED = {".venv", "build", "install", "log"}
FILE_SUFFIX = re.compile(r"\.(py|md|txt|sh|yaml|yml|json|cfg|toml|xml|cpp|h)$")
_FENCE = re.compile(r"^\s*(```|~~~)")
_PLACEHOLDER = re.compile(r"<[^<>\n]*>")
_PATH = re.compile(r"[\w.~$*{},-]+(?:/[\w.~$*{},-]*)+|[\w.*-]+\.\w+")
_COMMAND = re.compile(r"(?<![\w/.-])(oxygen[-_][\w-]+)(?![\w/.-])")
_TABLE = re.compile(r"^_?[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+$|^_?[A-Z]{3,}$")  # PRESET_DATA, OUTPUTS
_IDENT = re.compile(r"^[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*(?:\(.*\))?$")


def code_spans(text: str) -> list[str]:
    """Inline code, and each line of fenced code."""
    out, fenced = [], False
    for line in text.splitlines():
        if _FENCE.match(line):
            fenced = not fenced
        elif fenced:
            out.append(line.strip())
        else:
            out += re.findall(r"`([^`\n]+)`", line)
    return out


def _root_entries() -> set[str]:
    package = {p.name for p in (ROOT / "oxygen_ros").iterdir() if p.is_dir()}
    return {p.name for p in ROOT.iterdir()} - GENERATED | package


def named_paths(text: str) -> set[str]:
    """Repo paths in the doc (code or prose): a token ending in a file suffix or "/", or one whose
    first folder is a folder of the repo or the package; placeholders become "*"."""
    text = _PLACEHOLDER.sub("*", re.sub(r"\]\([^)]*\)", "]", text))  # link targets: test_docs.py
    roots = _root_entries()
    out = set()
    for token in _PATH.findall(text):
        token = token.rstrip(".,")
        first = token.split("/")[0]
        if token.startswith(("~", "$")) or first in GENERATED or re.match(r"^[\d.]+$", token):
            continue  # outside the repo, or a version / number
        if FILE_SUFFIX.search(token) or token.endswith("/") or ("/" in token and first in roots):
            out.add(token)
    return out


@cache
def _repo_files() -> tuple[Path, ...]:
    return tuple(p for p in ROOT.rglob("*") if p.is_file() and p.relative_to(ROOT).parts[0] not in GENERATED
                 and ".git" not in p.parts and "__pycache__" not in p.parts)


def missing_path(token: str) -> str | None:
    """Why ``token`` names nothing in the repo (None: it names a file, a folder or a room)."""
    parts = token.rstrip("/").split("/")
    room = []
    for part in parts:
        if "*" in part or "{" in part:
            break
        room.append(part)
    bases = (ROOT, ROOT / "oxygen_ros", ROOT / "oxygen_ros" / "engine", DOC.parent)  # engine rooms: from engine/
    if len(room) < len(parts):  # a template: its room exists (`<name>_x.py` alone names none)
        return None if not room or any((b.joinpath(*room)).is_dir() for b in bases) else \
            f"{token}: no room {'/'.join(room)}/"
    if any(b.joinpath(*parts).exists() for b in bases):
        return None
    if len(parts) == 1 and any(p.name == parts[0] for p in _repo_files()):
        return None  # a file named by its name (`source_scan.py`)
    return f"{token}: no such file or folder"


def recipes(text: str) -> list[str]:
    """The "Where to add" section's entries: its list items and paragraphs."""
    section = text.split("## Where to add", 1)[1].split("\n## ", 1)[0]
    entries = re.split(r"\n(?=\s*(?:-|\d+\.) )|\n\s*\n", section)
    return [e for e in entries if e.strip() and not e.lstrip().startswith("#")]


def _module_level_names(path: Path) -> set[str]:
    out = set()
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        targets = node.targets if isinstance(node, ast.Assign) else \
            [node.target] if isinstance(node, ast.AnnAssign) else []
        out.update(t.id for t in targets if isinstance(t, ast.Name))
    return out


def _resolve(token: str) -> list[Path]:
    parts = token.split("/")
    found = [b.joinpath(*parts) for b in (ROOT, ROOT / "oxygen_ros") if b.joinpath(*parts).is_file()]
    return found or ([p for p in _repo_files() if p.name == token] if len(parts) == 1 else [])


def misplaced_tables(entry: str) -> list[str]:
    """Tables an entry says to edit that no .py file it names assigns."""
    files = [f for t in named_paths(entry) if t.endswith(".py") for f in _resolve(t)]
    names = set().union(*(_module_level_names(f) for f in files)) if files else set()
    return [f"{t} is in none of {sorted(str(f.relative_to(ROOT)) for f in files)}"
            for t in code_spans(entry) if _TABLE.match(t) and t not in names]


@cache
def source_names() -> frozenset[str]:
    """Every name setup.py, the package, its launch files and tests define: functions, classes,
    assigned names and attributes, arguments, keywords, imports, and identifier-like strings (node
    parameters are strings)."""
    out = set()
    for path in [*ROOT.glob("*.py"), *(ROOT / "oxygen_ros").rglob("*.py"), *(ROOT / "test").rglob("*.py"),
                 *(ROOT / "launch").rglob("*.py")]:
        if path.resolve() == Path(__file__).resolve():
            continue  # this file's own examples of missing names
        out.add(path.stem)
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                out.add(node.name)
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                out.add(node.id)
            elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
                out.add(node.attr)
            elif isinstance(node, ast.arg):
                out.add(node.arg)
            elif isinstance(node, ast.keyword) and node.arg:
                out.add(node.arg)
            elif isinstance(node, ast.alias):
                out.add((node.asname or node.name).split(".")[-1])
            elif isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.isidentifier():
                out.add(node.value)
    return frozenset(out)


def unknown_names(text: str) -> list[str]:
    """Names in the recipes' code spans (`add_bench_args`, `Engine.validate_changes`) that the
    source does not define."""
    spans = [s for entry in recipes(text) for s in code_spans(entry)]
    names = source_names()
    return sorted({part for s in spans if _IDENT.match(s) and not FILE_SUFFIX.search(s)
                   for part in s.split("(")[0].split(".") if part not in names})


@cache
def console_scripts() -> dict[str, str]:
    """setup.py's console scripts: name -> module."""
    tree = ast.parse((ROOT / "setup.py").read_text(encoding="utf-8"))
    lines = [n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)
             and re.match(r"^[\w-]+\s*=\s*[\w.]+:\w+$", n.value)]
    return {k.strip(): v.split(":")[0].strip() for k, v in (line.split("=", 1) for line in lines)}


def _distribution() -> str:
    return re.search(r"name=\"([^\"]+)\"", (ROOT / "setup.py").read_text(encoding="utf-8")).group(1)


def unknown_commands(text: str) -> list[str]:
    known = set(console_scripts()) | {_distribution(), "oxygen_ros"}
    return sorted({c for c in _COMMAND.findall(text) if c not in known})


def subcommands(text: str) -> set[tuple[str, str]]:
    """(script, word) for each `script word ...` in code (a placeholder or a flag is no word)."""
    out = set()
    for span in code_spans(text):
        for m in re.finditer(r"(?<![\w/.-])(oxygen[-_][\w-]+) ([a-z][\w-]*)", span):
            if m.group(1) in console_scripts():
                out.add((m.group(1), m.group(2)))
    return out


def _help(script: str) -> str:
    code = (f"import sys; from {console_scripts()[script]} import main; sys.argv = [{script!r}, '--help']; "
            "main(['--help'])")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    return done.stdout + done.stderr


def broken_python_m(text: str) -> list[str]:
    """`python -m X` modules that do not exist or do not run as a program."""
    bad = []
    for module in sorted(set(re.findall(r"python3? -m ([\w.]+)", "\n".join(code_spans(text))))):
        if module.split(".")[0] != "oxygen_ros":
            continue
        path = ROOT.joinpath(*module.split("."))
        if (path / "__main__.py").is_file():
            continue
        source = path.with_suffix(".py")
        if not source.is_file():
            bad.append(f"python -m {module}: no module")
        elif "__name__ == \"__main__\"" not in source.read_text(encoding="utf-8"):
            bad.append(f"python -m {module}: runs nothing (no __main__ block)")
    return bad


TEXT = DOC.read_text(encoding="utf-8")


def test_every_path_the_doc_names_exists():
    paths = named_paths(TEXT)
    assert len(paths) > 30 and "oxygen_ros/bench/registry.py" in paths
    assert [why for why in map(missing_path, sorted(paths)) if why] == []


def test_every_table_a_recipe_edits_is_in_the_file_it_names():
    entries = recipes(TEXT)
    assert any("BENCHMARKS" in e for e in entries)
    assert [bad for e in entries for bad in misplaced_tables(e)] == []


def test_every_name_the_recipes_give_exists_in_the_source():
    assert unknown_names(TEXT) == []


def test_every_command_is_a_console_script_or_a_module_that_runs():
    assert unknown_commands(TEXT) == []
    assert broken_python_m(TEXT) == []


def test_every_subcommand_is_in_its_commands_help():
    missing = []
    for script in sorted({s for s, _ in subcommands(TEXT)}):  # none named: nothing to run
        usage = _help(script)
        missing += [f"{script} {w}" for s, w in sorted(subcommands(TEXT)) if s == script
                    and not re.search(rf"(?<![\w-]){re.escape(w)}(?![\w-])", usage)]
    assert missing == []


def test_the_checks_see_a_missing_path_room_table_name_and_command(tmp_path):
    doc = ("## Where to add\n\n### A thing\n\n"
           "- one line in `BENCHMARKS` (`oxygen_ros/bench/registry.py`) and `NO_SUCH_TABLE` there;\n"
           "  a module `oxygen_ros/no_such_room/<name>.py`, `oxygen_ros/bench/<name>.py`,\n"
           "  `oxygen_ros/bench/no_such_file.py`, `source_scan.py`, `no_such_file.py`; call\n"
           "  `add_bench_args` and `no_such_function`; run `oxygen-bench <name>`, `oxygen-nope`,\n"
           "  `python -m oxygen_ros.no_such_module`, `python -m oxygen_ros.robot.engine_port`.\n")
    assert sorted(why.split(":")[0] for why in map(missing_path, sorted(named_paths(doc))) if why) == [
        "no_such_file.py", "oxygen_ros/bench/no_such_file.py", "oxygen_ros/no_such_room/*.py"]
    (entry,) = recipes(doc)
    assert [t.split()[0] for t in misplaced_tables(entry)] == ["NO_SUCH_TABLE"]
    assert unknown_names(doc) == ["NO_SUCH_TABLE", "no_such_function"]
    assert unknown_commands(doc) == ["oxygen-nope"]
    assert broken_python_m(doc) == [
        "python -m oxygen_ros.no_such_module: no module",
        "python -m oxygen_ros.robot.engine_port: runs nothing (no __main__ block)"]
    assert subcommands("run `oxygen-bench floor --preset tiny` or `oxygen-bench <name>`") == {
        ("oxygen-bench", "floor")}
