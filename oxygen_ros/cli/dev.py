"""oxygen-dev: tools for working on the package itself.

    oxygen-dev param-files --write     # config/oxygen.yaml and docs/node.md's table from node/params.py
    oxygen-dev param-files --check     # exit 1 when either is out of date (a test runs it)
    oxygen-dev attention-op            # pre-compile the C++ paged attention op (scripts/setup.sh)
"""
from __future__ import annotations

import argparse
import sys

from .commands import Verb, run_main, usage

VERBS: dict[str, Verb] = {
    "param-files": Verb("oxygen_ros.node.param_files",
                        "write or check config/oxygen.yaml and the docs' parameter table"),
    "attention-op": Verb("oxygen_ros.engine.runner.attention.build",
                         "pre-compile the C++ paged attention op"),
}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv and argv[0] in VERBS:
        return run_main(VERBS[argv[0]].module, f"oxygen-dev {argv[0]}", argv[1:])
    p = argparse.ArgumentParser(prog="oxygen-dev", description=__doc__, epilog=usage("verbs", VERBS),
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("verb", choices=list(VERBS))
    p.parse_args(argv)  # exits: --help, or a verb that is not one
    return 2


if __name__ == "__main__":
    sys.exit(main())
