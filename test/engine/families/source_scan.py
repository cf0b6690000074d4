"""Reading oxygen_ros's source as data (ast), for the structure tests: which modules import
which (module-level and function-local imports alike; `if TYPE_CHECKING:` blocks, which never
run, apart), and where code branches on a model family."""
from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = "oxygen_ros"


def modules(root: Path) -> dict[str, Path]:
    """Dotted module name -> file, for every .py file of the package under ``root``."""
    out = {}
    for path in sorted((root / PACKAGE).rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def _type_checking_blocks(tree: ast.AST) -> set[int]:
    """ids of the nodes under `if TYPE_CHECKING:` (never executed)."""
    skip: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and isinstance(node.test, (ast.Name, ast.Attribute)) and \
                (getattr(node.test, "id", None) or getattr(node.test, "attr", None)) == "TYPE_CHECKING":
            for child in node.body:
                skip.update(id(n) for n in ast.walk(child))
    return skip


def imports(name: str, path: Path, known: set[str]) -> set[str]:
    """The package's modules ``name`` imports anywhere in its file (a `from X import y` of a
    submodule y counts as importing X.y, else X)."""
    tree = ast.parse(path.read_text(), str(path))
    skip = _type_checking_blocks(tree)
    is_pkg = path.name == "__init__.py"
    here = name if is_pkg else name.rpartition(".")[0]
    out: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names if a.name.split(".")[0] == PACKAGE)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = here.split(".")
                base = base[:len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.split(".")[0] != PACKAGE:
                continue
            for a in node.names:
                sub = f"{target}.{a.name}"
                out.add(sub if sub in known else target)
    return {m for m in out if m in known and m != name}


def import_graph(root: Path) -> dict[str, set[str]]:
    mods = modules(root)
    known = set(mods)
    return {name: imports(name, path, known) for name, path in mods.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


# -- family branches ------------------------------------------------------------------------------
# The family modules: each family's own folder (engine/families/<name>/: the family, its model,
# its checkpoint format, its config section) and the shared code that defines the expert kinds or
# a Qwen family's prompt. Code anywhere else (engine/families/base.py and loader.py included)
# asks the family (engine/families/base.py) instead of branching on it. A new family's folder
# needs no entry here.
FAMILY_FOLDERS = "oxygen_ros/engine/families/"  # its subfolders, one per family
FAMILY_MODULES = (
    "oxygen_ros/engine/config/head_config.py",
    "oxygen_ros/engine/model/chat_template.py",  # the Qwen families' prompt head and tail
    "oxygen_ros/engine/model/formats.py",
    # the StarVLA family's own benchmark: it times each StarVLA head alone, by its kind
    "oxygen_ros/bench/suite/starvla_heads.py",
)
# ModelConfig.family names (today's and the ones before the registry) and the expert kinds
# (engine/config/head_config.py's, and the model objects' own names for them)
FAMILY_WORDS = frozenset({"pi05", "qwen3vl", "starvla", "xr0", "qwen35"})
KIND_WORDS = frozenset({"kv-layerwise", "hidden-crossattn", "regress", "dit", "adarms"})
# attributes and calls that only stand for a family
FAMILY_PROXIES = frozenset({"is_starvla", "expert_kind"})
# a name or attribute that is a model object (hasattr / getattr with a default on it probes the
# model for a capability it should declare)
MODEL_NAMES = frozenset({"model"})


def _literals(node: ast.AST) -> set[str]:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return {node.value}
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return {e.value for e in node.elts if isinstance(e, ast.Constant)
                and isinstance(e.value, str)}
    return set()


def _names_family(node: ast.AST) -> bool:
    """An expression reading a family: a name or attribute with "family" in it (config.family,
    a local `family`)."""
    return any((isinstance(n, ast.Name) and "family" in n.id)
               or (isinstance(n, ast.Attribute) and "family" in n.attr) for n in ast.walk(node))


def _is_model(node: ast.AST) -> bool:
    return (isinstance(node, ast.Name) and node.id in MODEL_NAMES) or \
        (isinstance(node, ast.Attribute) and node.attr in MODEL_NAMES)


def family_branches(path: Path) -> list[str]:
    """What in ``path`` decides by family instead of asking it, one line each:
    - a comparison (==, !=, in, not in) with an expert kind as a string literal (alone or in a
      literal tuple / list / set), or of a family (config.family, a variable named family) with
      a family name literal (a preset that shares a family's name, "pi05", is not a family);
    - `<x>.qwen is None` / `is not None` (the Qwen section standing for the family);
    - a use of is_starvla or expert_kind;
    - hasattr(<model>, ...) or getattr(<model>, ..., default) (probing a model instead of a
      declared capability)."""
    tree = ast.parse(path.read_text(), str(path))
    found = []
    for node in ast.walk(tree):
        line = getattr(node, "lineno", 0)
        if isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            words = set().union(*(_literals(s) for s in sides))
            hits = words & KIND_WORDS
            if any(_names_family(s) for s in sides):
                hits |= words & FAMILY_WORDS
            if any(isinstance(op, (ast.Eq, ast.NotEq, ast.In, ast.NotIn)) for op in node.ops) \
                    and hits:
                found.append(f"{path}:{line}: compares with {sorted(hits)}")
            if any(isinstance(op, (ast.Is, ast.IsNot)) for op in node.ops) and any(
                    isinstance(s, ast.Attribute) and s.attr == "qwen" for s in sides):
                found.append(f"{path}:{line}: .qwen is (not) None")
        elif isinstance(node, (ast.Name, ast.Attribute)):
            name = node.id if isinstance(node, ast.Name) else node.attr
            if name in FAMILY_PROXIES:
                found.append(f"{path}:{line}: {name}")
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.args:
            fn = node.func.id
            if (fn == "hasattr" or (fn == "getattr" and len(node.args) == 3)) \
                    and _is_model(node.args[0]):
                found.append(f"{path}:{line}: {fn} on a model")
    return found


def branches_outside_families(root: Path) -> list[str]:
    out = []
    for path in sorted((root / PACKAGE).rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        in_family_folder = rel.startswith(FAMILY_FOLDERS) and "/" in rel[len(FAMILY_FOLDERS):]
        if in_family_folder or rel in FAMILY_MODULES:
            continue
        out += [line.replace(str(path), rel) for line in family_branches(path)]
    return out


# -- the engine's layers --------------------------------------------------------------------------
# engine/'s role folders from the bottom up: a module imports only its own layer and the ones
# below (docs/development.md, "Engine layout"). A family's config.py (its config rules and
# section, torch-free) belongs to the configuration's layer: ModelConfig's validation asks it.
LAYERS = ("config", "model", "runner", "families", "core")
ENGINE = f"{PACKAGE}.engine"
# the marker a function-local import inside engine/ carries (same line or the line above)
LAZY_MARKER = "# lazy:"


def layer_of(module: str) -> int:
    """Rank of an engine module's layer (engine/__init__.py, the front door: above them all)."""
    parts = module.split(".")
    if len(parts) < 3:
        return len(LAYERS)
    if parts[2] == "families" and len(parts) == 5 and parts[4] == "config":
        return LAYERS.index("config")
    return LAYERS.index(parts[2])


def engine_imports(name: str, path: Path, known: set[str]) -> list[tuple[str, int, bool]]:
    """Every import of an engine module in ``path`` (module-level, `if TYPE_CHECKING:` and
    function-local alike): (target module, line, whether inside a function)."""
    tree = ast.parse(path.read_text(), str(path))
    here = name if path.name == "__init__.py" else name.rpartition(".")[0]
    local: set[int] = set()
    for fn in ast.walk(tree):
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            local.update(id(n) for n in ast.walk(fn))
    out = []
    for node in ast.walk(tree):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = here.split(".")
                base = base[:len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            targets = [f"{target}.{a.name}" if f"{target}.{a.name}" in known else target
                       for a in node.names]
        for t in targets:
            if t == ENGINE or t.startswith(ENGINE + "."):
                out.append((t, node.lineno, id(node) in local))
    return out


def back_arrows(root: Path) -> list[str]:
    """Every import in engine/ of a module in a layer above the importer's."""
    mods = modules(root)
    known = set(mods)
    found = []
    for name, path in mods.items():
        if not name.startswith(ENGINE + "."):
            continue
        for target, line, _ in engine_imports(name, path, known):
            if layer_of(target) > layer_of(name):
                found.append(f"{path.relative_to(root)}:{line}: {name} -> {target}")
    return found


def unmarked_local_imports(root: Path) -> list[str]:
    """Function-local imports inside engine/ without LAZY_MARKER on their line or the line
    above (a function-local import is kept only for an optional or heavy dependency)."""
    found = []
    for name, path in modules(root).items():
        if not name.startswith(ENGINE):
            continue
        lines = path.read_text().splitlines()
        tree = ast.parse("\n".join(lines), str(path))
        for fn in ast.walk(tree):
            if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for node in ast.walk(fn):
                if isinstance(node, (ast.Import, ast.ImportFrom)):
                    near = lines[node.lineno - 1] + (lines[node.lineno - 2] if node.lineno > 1 else "")
                    if LAZY_MARKER not in near:
                        found.append(f"{path.relative_to(root)}:{node.lineno}: "
                                     f"{lines[node.lineno - 1].strip()}")
    return sorted(set(found))
