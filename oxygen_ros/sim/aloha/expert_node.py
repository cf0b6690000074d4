"""The scripted bimanual expert as a policy node: the ceiling, and a check of the plumbing.

It knows the layout seed from the sim's episode status (as the Meta-World expert reads the
privileged state), computes the expert's joint trajectory (expert.joint_trajectory) in a thread
during the reset hold, and publishes target k of it as absolute joint targets on the command
topic at 50 Hz, k counted from the sim's episode step (status) plus the wall time since that
status arrived. Open loop, like the expert itself: a late start or a slow machine costs it.
"""
from __future__ import annotations

import threading
import time
from typing import Any

import numpy as np
from rclpy.node import Node

from sensor_msgs.msg import JointState
from std_msgs.msg import Header, String

from ..episodes import Status
from ..node import RELIABLE, STATUS_QOS
from .env import CONTROL_PERIOD_S, JOINT_NAMES
from .expert import EndEffectorScene, joint_trajectory
from .tasks import TASKS


class AlohaExpertNode(Node):
    def __init__(self, *, context: Any = None, node_name: str = "aloha_expert",
                 episode_topic: str = "/aloha/episode", command_topic: str = "/oxygen/joint_command") -> None:
        super().__init__(node_name, context=context)
        self._scenes = {name: EndEffectorScene(t) for name, t in TASKS.items()}
        self._pub = self.create_publisher(JointState, command_topic, RELIABLE)
        self.create_subscription(String, episode_topic, self._status_cb, STATUS_QOS)
        self._lock = threading.Lock()
        self._episode = -1
        self._traj: np.ndarray | None = None
        self._ep_clock: tuple[int, float] | None = None  # (episode step, monotonic time it was seen)
        self.commands = 0
        self.create_timer(CONTROL_PERIOD_S, self._tick)

    def _status_cb(self, msg: String) -> None:
        st = Status.from_json(msg.data)
        with self._lock:
            if st.episode != self._episode:
                self._episode, self._traj, self._ep_clock = st.episode, None, None
                threading.Thread(target=self._plan, args=(st.episode, st.task, st.seed), daemon=True).start()
            if st.t > 0.0 and not st.done:  # the hold is over: the episode's clock runs
                self._ep_clock = (st.step, time.monotonic())

    def _plan(self, episode: int, task: str, seed: int) -> None:
        traj, _ = joint_trajectory(TASKS[task], seed, self._scenes[task])
        with self._lock:
            if episode == self._episode:
                self._traj = traj

    def _tick(self) -> None:
        with self._lock:
            traj, clock = self._traj, self._ep_clock
        if traj is None:
            return
        k = 0 if clock is None else clock[0] + int((time.monotonic() - clock[1]) / CONTROL_PERIOD_S)
        target = traj[min(k, len(traj) - 1)]
        self._pub.publish(JointState(header=Header(stamp=self.get_clock().now().to_msg()),
                                     name=list(JOINT_NAMES), position=[float(v) for v in target]))
        self.commands += 1
