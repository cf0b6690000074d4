"""What both simulated robots' nodes share (node.py: Meta-World's arm; aloha/node.py: the
bimanual robot): commands checked and stored in the callback, rate-limited warnings, the
episodes run one after the other in a loop thread of their own, and start / stop."""
from __future__ import annotations

import threading
import time
from typing import Any, Callable

import numpy as np
from rclpy.node import Node

from builtin_interfaces.msg import Time
from sensor_msgs.msg import JointState

from .episodes import Episode, Status
from .render_worker import RenderWorker


class SimLoopNode(Node):
    """A simulated robot's node: `episodes` on the wall clock; `finished` is set after the last
    one, `error` says why the loop ended early ("" = it did not). A robot gives its scene
    (`_make_env`), its command check (`_check_command`), one episode (`_episode`) and what the
    render thread delivers (`_deliver`)."""

    loop_name = "sim-loop"  # the loop thread's name

    def __init__(self, node_name: str, config: Any, episodes: list[Episode], stats: Any, *,
                 context: Any = None, on_status: Callable[[Status], None] | None = None) -> None:
        super().__init__(node_name, context=context)
        self.config = config
        self.episodes = episodes
        self.stats = stats
        self.finished = threading.Event()
        self.error = ""
        self._on_status = on_status
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._target: np.ndarray | None = None  # newest command, robot units
        self._envs: dict[str, Any] = {}
        self._warned: dict[str, float] = {}
        self._thread: threading.Thread | None = None
        self._render: RenderWorker | None = None
        self._ready: threading.Event | None = None
        self._ready_timeout_s = 300.0

    # -- what a robot gives ------------------------------------------------------------------------
    def _make_env(self, task: str) -> Any:
        raise NotImplementedError

    def _check_command(self, msg: JointState) -> np.ndarray:
        """The command's absolute target in robot units; ValueError when it is refused."""
        raise NotImplementedError

    def _episode(self, ep: Episode) -> None:
        raise NotImplementedError

    def _deliver(self, images: np.ndarray, stamp: Time | None, tag: object) -> None:
        raise NotImplementedError

    def _store_target(self, target: np.ndarray) -> None:
        """Under the lock: the newest command becomes the target."""
        self._target = target

    # -- commands (callback: check and store only) ------------------------------------------------
    def _command_cb(self, msg: JointState) -> None:
        try:
            target = self._check_command(msg)
        except ValueError as exc:
            self.stats.bad_commands += 1
            self._warn("command", f"command refused: {exc}")
            return
        with self._lock:
            self._store_target(target)
            self.stats.commands += 1

    def _warn(self, key: str, text: str, every_s: float = 2.0) -> None:
        now = time.monotonic()
        if now - self._warned.get(key, -1e9) >= every_s:
            self._warned[key] = now
            self.get_logger().warning(text)

    # -- the loop ----------------------------------------------------------------------------------
    def start(self, ready: threading.Event | None = None, ready_timeout_s: float = 300.0) -> None:
        """Make the scenes (slow: Meta-World builds each) and start the loop thread. With
        `ready`, the first episode's scene is published (the robot holding still) until it is
        set, e.g. by the policy's first output: a policy's start-up is not the episode's time.
        Not set within `ready_timeout_s`: the run ends with no episode (`error` says why)."""
        self._ready, self._ready_timeout_s = ready, ready_timeout_s
        for name in dict.fromkeys(self.config.tasks):
            self._envs[name] = self._make_env(name)
        self._render = RenderWorker(self._deliver)
        self._thread = threading.Thread(target=self._run, name=self.loop_name, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=5.0)
        if self._render is not None:
            self._render.close()
            self._render = None
        for env in self._envs.values():
            env.close()
        self._envs.clear()

    def _run(self) -> None:
        try:
            for episode in self.episodes:
                if self._stop.is_set():
                    break
                self._episode(episode)
        except Exception as exc:  # noqa: BLE001 - the loop thread must say why it ended
            self.error = f"simulation loop failed: {type(exc).__name__}: {exc}"
            self.get_logger().error(self.error)
            raise
        finally:
            self.finished.set()

    def _stamp(self) -> Time:
        return self.get_clock().now().to_msg()
