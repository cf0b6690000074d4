"""Entry point of the `oxygen_node` executable (lib/oxygen_ros/oxygen_node, and the pip script).

    oxygen_node --ros-args --params-file config/oxygen.yaml [-p autostart:=true]

With autostart true the node configures and activates itself; otherwise it waits unconfigured
for lifecycle transitions (`ros2 lifecycle set /oxygen configure`, a launch file, a manager).

The first Ctrl-C (SIGINT) stops the node cleanly: threads, open questions (each gets its final
message), the bag. Further ones while it stops print one line and are otherwise ignored (and
once everything is stopped, during the interpreter's exit, ignored outright), so that they
cannot break the stop half-way with a KeyboardInterrupt (before: a traceback from a finaliser
during the exit's garbage collection). SIGKILL still ends it at once.
"""
from __future__ import annotations

import signal
import sys

import rclpy
from rclpy.executors import ExternalShutdownException, SingleThreadedExecutor
from rclpy.lifecycle import TransitionCallbackReturn

from ..node import params as P
from ..node.oxygen_node import OxygenNode


def _ignore_further_interrupts() -> None:
    """From here on a SIGINT only says that the node is stopping (main thread only)."""
    def stopping(signum: int, frame: object) -> None:
        print("oxygen_node: already stopping (threads, open questions, the bag); please wait",
              file=sys.stderr, flush=True)
    signal.signal(signal.SIGINT, stopping)


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
    # semantics imply anyway. The one fast input, joint states (500 Hz - 1 kHz on a humanoid),
    # never enters this executor: each pass costs ~0.25 ms of GIL-holding Python per message,
    # so the control thread takes the newest joint state itself at every tick (node/inputs.py).
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
        _ignore_further_interrupts()  # replaces rclpy's handler: the stop below is not broken
        if node is not None:
            node.stop()
        executor.shutdown(timeout_sec=1.0)
        if node is not None:
            node.destroy_node()
        rclpy.try_shutdown()  # restores the handler rclpy replaced (Python's KeyboardInterrupt)
        # nothing is left to stop: ignored outright for the rest of the exit (the interpreter's
        # final collection takes seconds here, and Python puts SIG_DFL back for a handler of
        # its own as it finalises, which would kill the process by SIGINT; not SIG_IGN)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    return rc


if __name__ == "__main__":
    sys.exit(main())
