"""A command with verbs (`oxygen-sim eval ...`, `oxygen-dev param-files ...`, `oxygen-bench
<name> ...`): each verb is a module with `main(argv: list[str] | None) -> int | None`, imported
only when run (some need ROS or MuJoCo, the others do not). oxygen-bench's verbs are the
benchmarks of bench/registry.py (a module and a summary each, as a Verb has)."""
from __future__ import annotations

import importlib
import sys
from dataclasses import dataclass
from typing import Any, Mapping, Sequence


@dataclass(frozen=True)
class Verb:
    module: str  # import path of a module with main(argv)
    summary: str  # one line for the command's --help


def usage(title: str, verbs: Mapping[str, Any]) -> str:
    """The verbs, one line each (a --help epilog)."""
    width = max(map(len, verbs))
    return f"{title}:\n" + "\n".join(f"  {name:<{width}}  {v.summary}" for name, v in verbs.items())


def run_main(module: str, prog: str, argv: Sequence[str]) -> int:
    """Run `module`.main(argv) with `prog` as argparse's program name; its exit status."""
    main = importlib.import_module(module).main
    old, sys.argv[0] = sys.argv[0], prog  # argparse's usage line names the command and verb
    try:
        return int(main(list(argv)) or 0)
    finally:
        sys.argv[0] = old
