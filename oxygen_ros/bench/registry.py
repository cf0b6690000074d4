"""Every benchmark and bench tool behind one command: `oxygen-bench <name> [its arguments]`
(vLLM's `vllm bench <name>` is the example). `oxygen-bench` without a name runs the mode sweep
(cli/bench.py). A benchmark is a module of bench/suite/ with `main(argv: list[str] | None) ->
int | None`; adding one is that module and a line here (docs/development.md, "Where to add").

Modules are imported only when run (cli/commands.py run_main): the node benchmarks need ROS,
the sweep does not.
"""
from __future__ import annotations

import sys
from dataclasses import dataclass


@dataclass(frozen=True)
class Benchmark:
    module: str  # import path of a module with main(argv)
    summary: str  # one line for `oxygen-bench --help`


BENCHMARKS: dict[str, Benchmark] = {
    # the engine's parts
    "profile": Benchmark("oxygen_ros.bench.suite.profile", "stage costs, KV replay, linear layouts"),
    "floor": Benchmark("oxygen_ros.bench.suite.floor", "the bandwidth floor of a frame, per stage"),
    "memory": Benchmark("oxygen_ros.bench.suite.memory", "parameter bytes and peak memory of a preset"),
    "attention": Benchmark("oxygen_ros.bench.suite.attention", "paged attention per backend"),
    "rate": Benchmark("oxygen_ros.bench.suite.rate", "action-rate target vs achieved"),
    "gpu-compile": Benchmark("oxygen_ros.bench.suite.gpu_compile",
                             "compile every Triton kernel per architecture and dtype"),
    "table4": Benchmark("oxygen_ros.bench.suite.table4", "the StarVLA tables from a results.json"),
    "compare": Benchmark("oxygen_ros.bench.suite.compare", "two oxygen-demo --dump files, output for output"),
    # the engine and the node, one measurement or soak each
    "engine-soak": Benchmark("oxygen_ros.bench.suite.engine_soak", "the engine over many frames"),
    "gpu-checks": Benchmark("oxygen_ros.bench.suite.gpu_checks",
                            "Triton attention and pi0.5 frames on a GPU (gpu.sh)"),
    "load-memory": Benchmark("oxygen_ros.bench.suite.load_memory",
                             "peak memory of loading a checkpoint"),
    "full-size": Benchmark("oxygen_ros.bench.suite.full_size",
                           "a full-size pi0.5 LeRobot checkpoint: inspect, configure, one frame"),
    "starvla-heads": Benchmark("oxygen_ros.bench.suite.starvla_heads",
                               "each StarVLA head alone per frame"),
    "rtc-denoise": Benchmark("oxygen_ros.bench.suite.rtc_denoise", "RTC guidance in the engine"),
    "node-soak": Benchmark("oxygen_ros.bench.suite.node_soak", "the node process over minutes"),
    "cameras": Benchmark("oxygen_ros.bench.suite.cameras", "camera callbacks, decode, rates"),
    "humanoid-io": Benchmark("oxygen_ros.bench.suite.humanoid_io",
                             "a fake humanoid's joint states, cameras and commands under load"),
    "control-tick": Benchmark("oxygen_ros.bench.suite.control_tick",
                              "the CPU cost of one control tick (the joint-state take included)"),
    "command-safety": Benchmark("oxygen_ros.bench.suite.command_safety",
                                "the command path of a running node, recorded"),
    "rtc-node-seam": Benchmark("oxygen_ros.bench.suite.rtc_node_seam",
                               "chunk seams through the node's topics"),
    "bags-sample": Benchmark("oxygen_ros.bench.suite.bags_sample", "a sample bag of the node"),
}


def child_command(target: str, *args: str) -> list[str]:
    """The command line that runs `target` ("module:function") with `args` in a fresh
    interpreter: a benchmark's own child process (a probe, a measured load), which imports only
    that module (not the command's), its peak memory its own."""
    module, function = target.split(":")
    return [sys.executable, "-c",
            f"import sys; from {module} import {function}; sys.exit({function}(sys.argv[1:]))", *args]

