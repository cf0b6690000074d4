"""The scripted expert as a policy node: the ceiling of the evaluation, and a check of the plumbing.

It reads what the sim publishes (joint states, the privileged simulator state it needs to know
where the object is, and the camera, whose frames it counts) and sends the expert's action as an
absolute target on the command topic, exactly as the oxygen node does: the sim converts it back
with action_from_target. Reaching the expert's success rate through ROS checks the sim's timing,
the topics and the target conversion without a trained policy.

It acts on every privileged state message (one per control step), so its latency is the topic's
(about a millisecond): it is the best a policy can do here, not a model of one.
"""
from __future__ import annotations

import json
import threading
from typing import Any

import numpy as np
from rclpy.node import Node
from rclpy.qos import qos_profile_sensor_data

from sensor_msgs.msg import Image, JointState
from std_msgs.msg import Header, String

from .env import GAIN, JOINT_NAMES, target_from_expert
from .node import RELIABLE
from .tasks import ALL_TASKS


class ExpertNode(Node):
    def __init__(self, *, context: Any = None, node_name: str = "sim_expert",
                 privileged_topic: str = "/sim/privileged_state", image_topic: str = "/sim/camera/image_raw",
                 command_topic: str = "/oxygen/joint_command", gain: float = GAIN) -> None:
        super().__init__(node_name, context=context)
        from metaworld.policies import ENV_POLICY_MAP

        self._experts = {name: ENV_POLICY_MAP[t.env_name]() for name, t in ALL_TASKS.items()}
        self._gain = gain
        self._pub = self.create_publisher(JointState, command_topic, RELIABLE)
        self.create_subscription(String, privileged_topic, self._state_cb, RELIABLE)
        self.create_subscription(Image, image_topic, self._image_cb, qos_profile_sensor_data)
        self._lock = threading.Lock()
        self.images = 0
        self.commands = 0

    def _image_cb(self, msg: Image) -> None:
        with self._lock:
            self.images += 1

    def _state_cb(self, msg: String) -> None:
        import warnings

        data = json.loads(msg.data)
        obs = np.asarray(data["obs"], dtype=np.float64)
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=r"Constant\(s\) may be too high")
            action = self._experts[data["task"]].get_action(obs)
        target = target_from_expert(obs[0:4], action, self._gain)
        self._pub.publish(JointState(header=Header(stamp=self.get_clock().now().to_msg()),
                                     name=list(JOINT_NAMES), position=[float(v) for v in target]))
        with self._lock:
            self.commands += 1
