"""Entry point of the `oxygen_node` executable (lib/oxygen_ros/oxygen_node, and the pip script).

    oxygen_node --ros-args --params-file config/oxygen.yaml [-p autostart:=true]

With autostart true the node configures and activates itself; otherwise it waits unconfigured
for lifecycle transitions (`ros2 lifecycle set /oxygen configure`, a launch file, a manager).
"""
from __future__ import annotations

import sys

import rclpy
from rclpy.executors import ExternalShutdownException, SingleThreadedExecutor
from rclpy.lifecycle import TransitionCallbackReturn

from . import params as P
from .oxygen_node import OxygenNode


def main(args: list[str] | None = None) -> int:
    # hand the GIL over faster (default 5 ms): the control timer's thread waits less behind the
    # inference thread's Python parts
    sys.setswitchinterval(0.001)
    rclpy.init(args=args)
    node = None
    # Single-threaded on purpose: rclpy's MultiThreadedExecutor rebuilds the wait set in Python
    # and hands every callback to a pool thread (futures, guard-condition wake-ups), several
    # GIL-holding loop passes per message, and the inference and control threads then queue
    # behind the spin thread for the GIL. Nothing needs concurrent callbacks: input callbacks
    # only check + store, the model and the control loop run on their own threads, and a
    # lifecycle transition blocking the executor for its duration is what the service
    # semantics imply anyway.
    executor = SingleThreadedExecutor()
    rc = 0
    try:
        node = OxygenNode()
        executor.add_node(node)
        if P.get(node, "autostart"):
            if node.trigger_configure() == TransitionCallbackReturn.SUCCESS:
                if node.trigger_activate() != TransitionCallbackReturn.SUCCESS:
                    node.get_logger().error("autostart: activate failed")
            else:
                node.get_logger().error("autostart: configure failed; node stays unconfigured")
        executor.spin()
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    except Exception as exc:  # noqa: BLE001
        print(f"oxygen_node: {type(exc).__name__}: {exc}", file=sys.stderr)
        rc = 1
    finally:
        if node is not None:
            node.stop()
        executor.shutdown(timeout_sec=1.0)
        if node is not None:
            node.destroy_node()
        rclpy.try_shutdown()
    return rc


if __name__ == "__main__":
    sys.exit(main())
