"""oxygen-sim: the simulated robots and every simulator tool, one command.

    oxygen-sim [--tasks ...] [--expert] ...          Meta-World's arm on ROS topics (docs/simulation.md)
    oxygen-sim aloha [--tasks ...] [--expert] ...    the bimanual ALOHA on ROS topics (docs/aloha.md)
    oxygen-sim <verb> ...                            a tool below (oxygen-sim <verb> --help)
    oxygen-sim aloha <verb> ...                      an ALOHA tool below
"""
from __future__ import annotations

import sys

from .commands import Verb, run_main, usage

# oxygen-sim <verb>: Meta-World's tools (and the evaluation, which runs either robot)
VERBS: dict[str, Verb] = {
    "eval": Verb("oxygen_ros.cli.sim_eval",
                 "closed-loop evaluation of a checkpoint through the node (either robot)"),
    "demos": Verb("oxygen_ros.sim.demos", "record scripted-expert demonstrations"),
    "train": Verb("oxygen_ros.sim.train", "train the simulator policy on demonstrations (CPU)"),
    "offline-eval": Verb("oxygen_ros.sim.offline_eval",
                         "a trained policy served by the engine, no ROS, no clock"),
    "blind": Verb("oxygen_ros.sim.blind", "does a task need the camera: policies that ignore it"),
    "claim-audit": Verb("oxygen_ros.sim.claim_audit", "where completion claims come from"),
    "paired": Verb("oxygen_ros.sim.paired", "time to success of two settings, layout for layout"),
    "loop-timing": Verb("oxygen_ros.sim.loop_timing", "what limited a closed-loop run, from its bag"),
}
# oxygen-sim aloha <verb>: the bimanual robot's tools
ALOHA_VERBS: dict[str, Verb] = {
    "demos": Verb("oxygen_ros.sim.aloha.demos", "record the scripted bimanual expert"),
    "expert": Verb("oxygen_ros.sim.aloha.expert", "the scripted expert's success, no ROS"),
    "offline": Verb("oxygen_ros.sim.aloha.offline",
                    "a trained policy with the simulator waiting for it, no ROS"),
    "bench": Verb("oxygen_ros.sim.aloha.bench", "a physics step and an image per camera, timed"),
}
EPILOG = f"{usage('oxygen-sim <verb>', VERBS)}\n\n{usage('oxygen-sim aloha <verb>', ALOHA_VERBS)}"


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv and argv[0] in VERBS:
        return run_main(VERBS[argv[0]].module, f"oxygen-sim {argv[0]}", argv[1:])
    if argv[:1] == ["aloha"]:
        if argv[1:2] and argv[1] in ALOHA_VERBS:
            return run_main(ALOHA_VERBS[argv[1]].module, f"oxygen-sim aloha {argv[1]}", argv[2:])
        from .sim_run import aloha

        return aloha(argv[1:])
    from .sim_run import metaworld

    return metaworld(argv, epilog=EPILOG)


if __name__ == "__main__":
    sys.exit(main())
