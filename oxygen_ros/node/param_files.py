"""config/oxygen.yaml and the docs' parameter table, generated from the parameter table
(node/params.py PARAMETERS: the engine's knobs and the node's own).

    oxygen-dev param-files --write   # rewrite both
    oxygen-dev param-files --check   # exit 1 when either is out of date

test/node/test_package_files.py runs the check, so a knob changed in the table and not here
(or edited here by hand) fails the tests.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import params as P

ROOT = Path(__file__).resolve().parents[2]
CONFIG = "config/oxygen.yaml"


@dataclass(frozen=True)
class DocTable:
    """Where the parameter table lives: a markdown file and the markers around the table."""

    path: str  # relative to the repository root
    begin: str = "<!-- params:begin -->"
    end: str = "<!-- params:end -->"


PARAMS_DOC = DocTable("docs/node.md")

_YAML_HEADER = """\
# oxygen_ros node parameters (node name: oxygen): every one at the node's own default (tiny
# random model on the CPU, for trying the node and for tests). On the robot set model.checkpoint /
# model.device / joints: config/oxygen_thor.yaml (cuda, bfloat16, threads) is a robot's file.
# [live]      may change at any time (`ros2 param set /oxygen <name> <value>`); engine knobs apply
#             on the next frame.
# [configure] read in on_configure; rejected while configured (cleanup, set, configure again).
# Doubles must be written with a decimal point (50.0, not 50): ROS parameters are typed.
# Generated from the parameter table (engine/config/engine_config.py ENGINE_KNOBS, node/params.py):
# oxygen-dev param-files --write
/**:
  ros__parameters:
"""
_SECTIONS = {(True, P.LIVE): "engine (live: the next frame)",
             (False, P.LIVE): "control, inputs, command shaping (live: the next tick / message)",
             (True, P.CONFIGURE): "configure-time", (False, P.CONFIGURE): "configure-time",
             (False, P.READ_ONLY): "start-up (read-only)"}
_PLAIN = re.compile(r"[A-Za-z_/][A-Za-z0-9_./-]*")
_YAML_WORDS = {"true", "false", "yes", "no", "on", "off", "null", "y", "n", "~"}


def _yaml_value(spec: P.Spec, value: Any) -> str:
    if spec.type == "bool":
        return "true" if value else "false"
    if spec.type == "double":
        return repr(float(value))
    if spec.type == "int":
        return str(int(value))
    if spec.type == "string":
        plain = _PLAIN.fullmatch(value) and value.lower() not in _YAML_WORDS
        return value if plain else json.dumps(value)  # YAML double quotes take JSON escapes
    return json.dumps(list(value))


def yaml_text() -> str:
    """config/oxygen.yaml: every parameter at its default, described (one default per
    parameter: the node's built-in, this file and the docs' table never disagree)."""
    lines, section = [_YAML_HEADER.rstrip("\n")], None
    for spec in P.PARAMETERS:
        title = _SECTIONS[(spec.field is not None, spec.kind)]
        if title != section:
            section = title
            lines.append(f"    # -- {title} " + "-" * max(3, 88 - len(title)))
        rng = f". Values: {spec.range_text}" if spec.range_text else ""
        text = f"{spec.description}{rng}"
        lines += textwrap.wrap(text, 96, initial_indent="    # ", subsequent_indent="    #   ")
        lines.append(f"    {spec.name}: {_yaml_value(spec, spec.default)}")
    return "\n".join(lines) + "\n"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", "\\n")


def _default_text(spec: P.Spec) -> str:
    v = spec.default
    if spec.type == "string":
        return "`\"\"`" if v == "" else f"`{_cell(v)}`"
    return f"`{_yaml_value(spec, v)}`"


def _links(text: str, doc: DocTable) -> str:
    """docs/<page>.md mentioned in a description -> a link relative to the table's file."""
    base = os.path.dirname(doc.path)

    def link(m: re.Match) -> str:
        return f"[{m.group(0)}]({os.path.relpath(m.group(0), base or '.')})"

    return re.sub(r"docs/[A-Za-z0-9_-]+\.md", link, text)


_TYPE = {"string_array": "string[]", "double_array": "double[]", "int_array": "integer[]"}
_WHEN = {P.LIVE: "live", P.CONFIGURE: "configure", P.READ_ONLY: "read-only"}


def markdown_table(doc: DocTable = PARAMS_DOC) -> str:
    rows = ["| Name | Type | Default | Range | When | Meaning |", "|---|---|---|---|---|---|"]
    for s in P.PARAMETERS:
        rows.append(f"| `{s.name}` | {_TYPE.get(s.type, s.type)} | {_default_text(s)} | "
                    f"{_cell(s.range_text)} | {_WHEN[s.kind]} | "
                    f"{_links(_cell(s.description), doc)} |")
    return "\n".join(rows) + "\n"


def _split(text: str, doc: DocTable) -> tuple[str, str, str]:
    """(before the table, the table, after it) of the doc's text, markers included outside."""
    try:
        head, rest = text.split(doc.begin + "\n", 1)
        table, tail = rest.split(doc.end, 1)
    except ValueError:
        raise ValueError(f"{doc.path}: no '{doc.begin}' ... '{doc.end}' block") from None
    return head + doc.begin + "\n", table, doc.end + tail


def doc_text(current: str, doc: DocTable = PARAMS_DOC) -> str:
    """`current` (the doc's text) with the table between the markers regenerated."""
    head, _, tail = _split(current, doc)
    return head + markdown_table(doc) + tail


def outdated(root: Path = ROOT) -> list[str]:
    """Files that differ from what the table generates."""
    out = []
    if (root / CONFIG).read_text() != yaml_text():
        out.append(CONFIG)
    doc = (root / PARAMS_DOC.path).read_text()
    if doc != doc_text(doc):
        out.append(PARAMS_DOC.path)
    return out


def write(root: Path = ROOT) -> None:
    (root / CONFIG).write_text(yaml_text())
    path = root / PARAMS_DOC.path
    path.write_text(doc_text(path.read_text()))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    g = p.add_mutually_exclusive_group(required=True)
    g.add_argument("--write", action="store_true", help=f"rewrite {CONFIG} and {PARAMS_DOC.path}")
    g.add_argument("--check", action="store_true", help="exit 1 when either is out of date")
    args = p.parse_args(argv)
    if args.write:
        write()
        return 0
    stale = outdated()
    for name in stale:
        print(f"{name} is out of date: oxygen-dev param-files --write",
              file=sys.stderr)
    return 1 if stale else 0
