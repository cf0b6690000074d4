"""Closed-loop evaluation: the oxygen node (a process of its own, as on the robot) drives the sim.

One run per setting: a fresh node process with the setting's parameters, `model.checkpoint`, the
sim's topics and its recorder on (a bag per run); the sim in this process plays the same seeded
episodes for every setting. The sim waits for the node's first FrameStats before its first
episode (start-up is not episode time), then never waits again. This process also listens to the
node's FrameStats (action rate, tokens/s) and memory texts, and keeps what the sim showed when,
so each memory text is checked against the scene it was generated from (its source stamp).

The scripted expert (setting "expert") runs in this process through the same topics: the
ceiling.
"""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from oxygen_ros.engine import MODES
from oxygen_ros.robot.command_config import BLENDS

from .env import CONTROL_PERIOD_S, JOINT_NAMES
from .episodes import Status, stamp_ns
from .metrics import MemoryCheck, Timeline, check_memory
from .aloha.node import FAULTS as ALOHA_FAULTS
from .node import FAULTS as SIM_FAULTS
from .node import SimConfig

# Faults the node's own parameters make (the sim's wiring faults are node.FAULTS):
#   stale  chunk_skip_latency false: every chunk plays from its first step, one inference latency
#          late, instead of skipping the steps whose time passed since its observation
NODE_FAULTS: dict[str, dict[str, Any]] = {"stale": {"chunk_skip_latency": False}}
FAULTS = tuple(dict.fromkeys((*SIM_FAULTS, *ALOHA_FAULTS, *NODE_FAULTS)))  # each sim checks its own


@dataclass(frozen=True)
class Setting:
    """One evaluated configuration; `mode` "expert" is the scripted expert (no node)."""

    mode: str
    k: int = 1
    blend: str = "crossfade"
    memory: bool = True
    fault: str = ""  # FAULTS: a wiring fault fed to the policy or a node fault (sensitivity runs)

    def __post_init__(self) -> None:
        if self.fault not in FAULTS:
            raise ValueError(f"fault {self.fault!r} is not one of {', '.join(f for f in FAULTS if f)}")
        if self.fault and self.mode == "expert":
            raise ValueError("the scripted expert reads the simulator's state: a fault would not reach it")
        if self.mode != "expert" and self.mode not in MODES:
            raise ValueError(f"mode {self.mode!r} is not expert or one of {', '.join(MODES)}")
        if not 1 <= self.k <= 64:
            raise ValueError(f"k {self.k} must be 1..64")
        if self.blend not in BLENDS:
            raise ValueError(f"blend {self.blend!r} is not one of {', '.join(BLENDS)}")

    @property
    def name(self) -> str:
        if self.mode == "expert":
            return "expert"
        base = f"{self.mode}-k{self.k}" if self.mode != "isolated" else "isolated"
        return f"{base}{'' if self.memory else '-nomem'}/{self.blend}{'+' + self.fault if self.fault else ''}"

    @classmethod
    def parse(cls, text: str, blend: str = "crossfade") -> "Setting":
        """'expert', 'isolated', 'oxygen-k5', 'oxygen-k1-nomem', '...+bgr' (with `blend`)."""
        text, _, fault = text.partition("+")
        if text == "expert":
            return cls("expert", fault=fault)
        parts = text.split("-")
        memory = parts[-1] != "nomem"
        parts = parts if memory else parts[:-1]
        k = 1
        if len(parts) == 2 and parts[1].startswith("k") and parts[1][1:].isdigit():
            k = int(parts[1][1:])
        elif len(parts) != 1:
            raise ValueError(f"setting {text!r}: expected expert, <mode>, <mode>-k<N> or ...-nomem")
        return cls(parts[0], k, blend, memory, fault)


@dataclass
class NodeOptions:
    checkpoint: str
    tokenizer: str = ""
    control_rate_hz: float = 1.0 / CONTROL_PERIOD_S
    max_decode_steps: int = 30  # N
    memory_every_n_frames: int = 1
    memory_prompt: str = ""  # "" = the node's default
    denoise_steps: int = 0  # 0 = the node's default
    num_threads: int = 0  # the node's model.num_threads (0: its default, every core but one)
    extra: dict[str, Any] = field(default_factory=dict)  # more node parameters


@dataclass
class RunResult:
    setting: Setting
    episodes: list[Status]  # final status of each episode
    statuses: list[Status]  # every status (progress curves)
    frame_ms: list[float]
    action_rate_hz: list[float]
    tokens_per_s: list[float]
    memory: list[MemoryCheck]
    commands_per_s: float | None  # commands the sim received per second of episode time
    late_steps: int
    steps: int
    lost_s: float
    wall_s: float
    bag: str
    error: str = ""
    # episode -> stamp (ns) of its first successful status, None if it ended without success
    success_ns: dict[int, int | None] = field(default_factory=dict)

    def summary(self) -> dict[str, Any]:
        from .metrics import summarize_memory, wilson

        tasks: dict[str, dict[str, Any]] = {}
        for s in self.episodes:
            tasks.setdefault(s.task, {"n": 0, "success": 0, "times": []})
            row = tasks[s.task]
            row["n"] += 1
            row["success"] += int(s.success)
            if s.success:
                row["times"].append(s.time_to_success)
        out_tasks = {}
        for task, row in tasks.items():
            lo, hi = wilson(row["success"], row["n"])
            out_tasks[task] = {"n": row["n"], "success": row["success"],
                               "rate": row["success"] / row["n"], "ci95": [lo, hi],
                               "time_to_success_s": float(np.median(row["times"])) if row["times"] else None}
        n = sum(r["n"] for r in tasks.values())
        k = sum(r["success"] for r in tasks.values())
        times = [s.time_to_success for s in self.episodes if s.success]

        def med(xs):
            return float(np.median(xs)) if xs else None

        return {"setting": self.setting.name, "config": asdict(self.setting), "tasks": out_tasks,
                "all": {"n": n, "success": k, "rate": k / n if n else None,
                        "ci95": list(wilson(k, n)) if n else None, "time_to_success_s": med(times)},
                "action_rate_hz": med(self.action_rate_hz), "tokens_per_s": med(self.tokens_per_s),
                "frame_ms_p50": med(self.frame_ms),
                "commands_per_s": self.commands_per_s,
                "late_step_fraction": self.late_steps / self.steps if self.steps else None,
                "lost_s": self.lost_s, "wall_s": self.wall_s, "bag": self.bag, "error": self.error,
                "memory": summarize_memory(self.memory, success_ns=self.success_ns)}


def _is_aloha(sim: Any) -> bool:
    return type(sim).__name__ == "AlohaSimConfig"


def robot_io(sim: Any) -> tuple[list[str], list[str]]:
    """(camera topics in the policy's order, joint names) of the simulated robot: Meta-World's
    one camera and 4 values, or ALOHA's cameras and 14 joints (sim/aloha)."""
    if _is_aloha(sim):
        from .aloha.env import JOINT_NAMES as ALOHA_JOINTS

        return sim.image_topics, list(ALOHA_JOINTS)
    return [sim.image_topic], list(JOINT_NAMES)


def node_parameters(setting: Setting, opts: NodeOptions, sim: Any, bag: Path,
                    instruction: str) -> dict[str, Any]:
    """The node's parameters for one run (its parameter names, docs/node.md)."""
    cameras, joints = robot_io(sim)
    p: dict[str, Any] = {
        "autostart": True,
        "model.checkpoint": opts.checkpoint,
        "model.num_threads": opts.num_threads,
        "camera_topics": cameras,
        "joint_state_topic": sim.joint_state_topic,
        "joint_names": joints,
        "control_rate_hz": float(opts.control_rate_hz),
        "mode": setting.mode,
        "decode_steps_per_frame": setting.k,
        "max_decode_steps": opts.max_decode_steps,
        "memory.enabled": setting.memory,
        "memory.every_n_frames": opts.memory_every_n_frames,
        "chunk_blend": setting.blend,
        "instruction": instruction,
        "record.enabled": True,
        "record.path": str(bag),
        # the node's own inputs/outputs and the sim's episode status (success and progress)
        "record.topics": [*cameras, sim.joint_state_topic, "/oxygen/joint_command",
                          "/oxygen/action_chunk", "/oxygen/memory", "/oxygen/frame_stats",
                          "/oxygen/instruction", "/diagnostics", sim.episode_topic],
    }
    if _is_aloha(sim):
        from .aloha.env import REPLAN_STEPS, TRACKING_TOLERANCE

        p["max_tracking_error"] = list(TRACKING_TOLERANCE)
        p["chunk_replan_steps"] = REPLAN_STEPS
    if opts.tokenizer:
        p["model.tokenizer"] = opts.tokenizer
    if opts.memory_prompt:
        p["memory.prompt"] = opts.memory_prompt
    if opts.denoise_steps:
        p["denoise_steps"] = opts.denoise_steps
    p.update(opts.extra)
    p.update(NODE_FAULTS.get(setting.fault, {}))  # the setting's fault wins over --param
    return p


def write_params_file(path: Path, params: dict[str, Any], node_name: str = "oxygen") -> Path:
    """A --params-file (JSON is valid YAML; doubles keep their decimal point)."""
    path.write_text(json.dumps({node_name: {"ros__parameters": params}}, indent=1))
    return path


def node_command(params_file: Path) -> list[str]:
    """OXYGEN_NODE_CMD (a command line) overrides the module."""
    if os.environ.get("OXYGEN_NODE_CMD"):
        import shlex

        base = shlex.split(os.environ["OXYGEN_NODE_CMD"])
    else:
        base = [sys.executable, "-m", "oxygen_ros.cli.node"]
    return base + ["--ros-args", "--params-file", str(params_file)]


def run_setting(setting: Setting, sim_cfg: Any, out: Path, opts: NodeOptions | None = None,
                ready_timeout_s: float = 300.0, log=print) -> RunResult:
    """Run the sim's episodes under one setting; returns everything measured."""
    import rclpy
    from rclpy.executors import SingleThreadedExecutor

    from std_msgs.msg import String  # noqa: F401 - message types load before the nodes

    from .node import SimNode

    out.mkdir(parents=True, exist_ok=True)
    safe = setting.name.replace("/", "_").replace("+", "_")
    bag = out / "bags" / safe
    expert = setting.mode == "expert"
    aloha = _is_aloha(sim_cfg)
    if aloha:  # the bimanual robot (sim/aloha): its own faults, the expert reads the episode status
        from dataclasses import replace

        from .aloha.metrics import check_memory as check
        from .aloha.node import FAULTS as ALOHA_FAULTS
        from .aloha.node import AlohaSimNode as SimNode  # noqa: F811

        if setting.fault and setting.fault not in ALOHA_FAULTS and setting.fault not in NODE_FAULTS:
            raise ValueError(f"fault {setting.fault!r} is not one of the bimanual robot's "
                             f"{', '.join(f for f in ALOHA_FAULTS if f)} or {', '.join(NODE_FAULTS)}")
        sim_fault = setting.fault if setting.fault in ALOHA_FAULTS else ""
        sim_cfg = replace(sim_cfg, fault=sim_fault)
    else:
        check = check_memory
        sim_fault = setting.fault if setting.fault in SIM_FAULTS else ""  # the node makes the others
        sim_cfg = SimConfig(**{**asdict(sim_cfg), "privileged": expert, "fault": sim_fault,
                               "tasks": tuple(sim_cfg.tasks)})
    if not expert and opts is None:
        raise ValueError("a node setting needs NodeOptions (the checkpoint)")

    statuses: list[Status] = []
    timeline = Timeline()
    lock = threading.Lock()

    def on_status(s: Status) -> None:
        with lock:
            statuses.append(s)
            # the scene's own stamp: a memory text's source stamp is its step's stamp exactly
            # (the arrival time here is later, and would give the previous status's scene)
            timeline.add(s.stamp_ns or time.time_ns(), s.task, s.caption, s.episode, s.success)
        if s.done:
            log(f"  [{setting.name}] episode {s.episode:3d} {s.task:22s} "
                f"{'success' if s.success else 'timeout'} {s.time_to_success:5.2f} s")

    context = rclpy.Context()
    rclpy.init(context=context)
    ready = threading.Event()
    frame_ms: list[float] = []
    hz: list[float] = []
    tps: list[float] = []
    memory: list[MemoryCheck] = []
    proc = None
    nodes: list[Any] = []
    # single-threaded, as the node's: rclpy's multi-threaded executor rebuilds its wait set in
    # Python and holds the interpreter lock the physics thread needs (docs/simulation.md, Timing)
    executor = SingleThreadedExecutor(context=context)
    spin = threading.Thread(target=executor.spin, daemon=True)
    try:
        sim = SimNode(sim_cfg, context=context, on_status=on_status)
        nodes.append(sim)
        if expert and aloha:
            from .aloha.expert_node import AlohaExpertNode

            nodes.append(AlohaExpertNode(context=context, episode_topic=sim_cfg.episode_topic,
                                         command_topic=sim_cfg.command_topic))
            ready.set()
        elif expert:
            from .expert import ExpertNode

            nodes.append(ExpertNode(context=context, command_topic=sim_cfg.command_topic))
            ready.set()
        else:
            from oxygen_ros.msg import FrameStats, TextMemory

            monitor = rclpy.create_node("sim_eval_monitor", context=context)
            nodes.append(monitor)

            def on_stats(msg: FrameStats) -> None:
                if ready.is_set():  # the first frame (warm-up) is not counted
                    frame_ms.append(float(msg.frame_ms))
                    hz.append(float(msg.action_rate_hz))
                    tps.append(float(msg.tokens_per_s))
                ready.set()

            def on_memory(msg: TextMemory) -> None:
                if not (msg.is_final and msg.kind == "memory") or msg.finish_reason not in ("eos", "length"):
                    return
                stamp = stamp_ns(msg.header.stamp)
                with lock:
                    where = timeline.scene_at(stamp)
                if where is not None:
                    memory.append(check(msg.text, where, stamp))

            monitor.create_subscription(FrameStats, "/oxygen/frame_stats", on_stats, 100)
            monitor.create_subscription(TextMemory, "/oxygen/memory", on_memory, 1000)
            params = node_parameters(setting, opts, sim_cfg, bag,
                                     instruction=sim.episodes[0].instruction)
            pfile = write_params_file(out / f"params_{safe}.yaml", params)
            log_path = out / f"node_{safe}.log"
            bag.parent.mkdir(parents=True, exist_ok=True)
            with open(log_path, "wb") as node_log:
                proc = subprocess.Popen(node_command(pfile), stdout=node_log, stderr=subprocess.STDOUT,
                                        start_new_session=True)
        for n in nodes:
            executor.add_node(n)
        spin.start()
        t0 = time.monotonic()
        sim.start(ready=ready, ready_timeout_s=ready_timeout_s)
        checked = expert
        while not sim.finished.wait(0.5):
            if proc is not None and proc.poll() is not None:
                sim.error = f"the node exited with {proc.returncode} (log: {out / f'node_{safe}.log'})"
                break
            if not checked:
                state = _lifecycle_state(monitor)
                if state is not None:
                    checked = True
                    if state != "active":  # autostart failed: say so now, not after the timeout
                        sim.error = (f"the node is {state} after start-up (log: "
                                     f"{out / f'node_{safe}.log'}): {_log_error(out / f'node_{safe}.log')}")
                        break
        wall = time.monotonic() - t0
        sim.stop()
        st = sim.stats
        error = sim.error
    finally:
        if proc is not None and proc.poll() is None:
            os.killpg(proc.pid, signal.SIGINT)  # the node closes its bag on shutdown
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(5)
        executor.shutdown(timeout_sec=1.0)
        if spin.is_alive():
            spin.join(timeout=5.0)  # a spin thread still inside rcl at exit aborts the process
        for n in nodes:
            n.destroy_node()
        rclpy.try_shutdown(context=context)
    cps = st.episode_commands / st.episode_s if st.episode_s > 0 else None
    success_ns = {r.episode: timeline.success_ns.get(r.episode) for r in st.results}
    return RunResult(setting, list(st.results), statuses, frame_ms, hz, tps, memory, cps,
                     st.late_steps, st.steps, st.lost_s, wall, "" if expert else newest_bag(bag), error,
                     success_ns)


def newest_bag(path: Path) -> str:
    """The newest bag the node wrote for record.path `path`: the path itself or, when it existed,
    path_<date-time>[_n] (recorder.bag_path); never another setting's path_<suffix>."""
    own = re.compile(re.escape(path.name) + r"(_\d{8}-\d{6}(_\d+)?)?")
    bags = [p for p in path.parent.glob(path.name + "*") if own.fullmatch(p.name)]
    return str(max(bags, key=lambda p: p.stat().st_mtime)) if bags else ""


def _lifecycle_state(node) -> str | None:
    """The oxygen node's lifecycle state label, or None while it does not answer (the node
    serves its services only after autostart's configure + activate finished)."""
    from lifecycle_msgs.srv import GetState

    client = getattr(node, "_state_client", None)
    if client is None:
        client = node._state_client = node.create_client(GetState, "/oxygen/get_state")
    if not client.service_is_ready():
        return None
    future = client.call_async(GetState.Request())
    deadline = time.monotonic() + 2.0
    while not future.done() and time.monotonic() < deadline:
        time.sleep(0.02)
    return future.result().current_state.label if future.done() and future.result() else None


def _log_error(path: Path) -> str:
    lines = [ln for ln in path.read_text(errors="replace").splitlines() if "ERROR" in ln]
    return lines[0].split("]: ", 1)[-1] if lines else "no error in its log"


def run_all(settings: Sequence[Setting], sim_cfg: Any, out: Path, opts: NodeOptions | None,
            log=print) -> list[RunResult]:
    results = []
    for s in settings:
        log(f"setting {s.name}: {len(sim_cfg.tasks)} tasks x {sim_cfg.episodes_per_task} episodes")
        r = run_setting(s, sim_cfg, out, opts, log=log)
        if r.error:
            log(f"setting {s.name}: {r.error}")
        results.append(r)
    return results
