"""node/inference_worker.py: a pair the inputs retired when the instruction changed is never run
under the new instruction (the sim's task switch once had a pressed button described as "the
window is open" under the next task's instruction); the applier retires, then sets the text."""
import numpy as np
import pytest

pytestmark = pytest.mark.ros
rclpy = pytest.importorskip("rclpy")

from oxygen_ros.node.inference_worker import InferenceWorker  # noqa: E402
from oxygen_ros.robot.pairing import Mailbox, Pair, Pairer  # noqa: E402


@pytest.fixture(scope="module")
def node():
    context = rclpy.Context()
    rclpy.init(context=context)
    n = rclpy.create_node("oxygen_worker_test", context=context)
    yield n
    n.destroy_node()
    rclpy.try_shutdown(context=context)


def test_a_pair_made_before_a_new_instruction_is_skipped(node):
    pairer = Pairer(1)
    decoded: list[tuple[float, str]] = []
    worker = None

    def decode(pair: Pair):
        decoded.append((pair.stamp, worker.instruction))
        return None  # stops the frame before the engine (there is none here)

    worker = InferenceWorker(None, lambda: None, None, Mailbox(), None, None, ["a"], "press the button",
                             "f", lambda *a: None, node, decode=decode, retired=pairer.retired)
    pairer.add_state(5.0, np.zeros(4, np.float32))
    pairer.add_image(0, 5.0, "old scene")
    old = pairer.newest_pair()
    worker.frame(old)  # nothing retired: it runs
    assert decoded == [(5.0, "press the button")] and worker.retired_pairs == 0

    pairer.retire()  # what the node's instruction applier does first
    worker.instruction = "slide the window open"
    worker.frame(old)  # the old scene's pair, still in the mailbox
    assert worker.retired_pairs == 1 and len(decoded) == 1
    pairer.add_image(0, 5.04, "new scene")
    pairer.add_state(5.04, np.zeros(4, np.float32))
    worker.frame(pairer.newest_pair())
    assert decoded[-1] == (5.04, "slide the window open") and worker.retired_pairs == 1
