"""Single hand-offs between the node and the engine (issue 28), in-process: a live parameter
change is validated once (in on_set; the worker applies the validated config without checking it
again) and a question's text is tokenised once on its way into the engine (the check's ids are
the ones Engine.ask takes)."""
import numpy as np
import pytest

pytestmark = pytest.mark.ros
rclpy = pytest.importorskip("rclpy")
pytest.importorskip("oxygen_ros.msg")

from builtin_interfaces.msg import Time  # noqa: E402
from rclpy.lifecycle import TransitionCallbackReturn  # noqa: E402
from rclpy.parameter import Parameter  # noqa: E402

from oxygen_ros.node.oxygen_node import OxygenNode  # noqa: E402
from oxygen_ros.node.questions import Question  # noqa: E402
from oxygen_ros.robot.pairing import Pair  # noqa: E402

QUESTION = "what colour is the cube on the left"


@pytest.fixture(scope="module")
def ctx(module_ctx):  # one context for the module's node (test/conftest.py)
    return module_ctx


@pytest.fixture
def node(ctx):
    n = OxygenNode(context=ctx, parameter_overrides=[
        Parameter("model.num_threads", value=1), Parameter("memory.enabled", value=False)])
    assert n.trigger_configure() == TransitionCallbackReturn.SUCCESS
    yield n
    n.stop()
    n.destroy_node()


def _frame(rt, t: float):
    size = rt.built.model_config.vision.image_size
    return rt.worker.frame(Pair(stamp=t, images=(np.zeros((size, size, 3), np.uint8),),
                                state=np.zeros(6, np.float32), header_stamp=Time(sec=int(t)),
                                image_stamps=(t,), state_stamp=t))


def test_a_live_engine_change_is_validated_once_and_applied_after_on_set(node):
    rt, engine = node.rt, node.rt.built.engine
    calls = []
    validate = engine.validate_changes
    engine.validate_changes = lambda **kw: calls.append(kw) or validate(**kw)
    before = engine.config.decode_steps_per_frame
    assert node.set_parameters([Parameter("decode_steps_per_frame", value=before + 1)])[0].successful
    assert len(calls) == 1
    assert engine.config.decode_steps_per_frame == before  # the worker applies it, next frame
    _frame(rt, 100.0)
    assert engine.config.decode_steps_per_frame == before + 1
    assert len(calls) == 1, "the worker validated the change again"
    # memory.enabled and memory.every_n_frames make one engine field, merged in one place
    assert node.set_parameters([Parameter("memory.every_n_frames", value=3)])[0].successful
    _frame(rt, 101.0)
    assert engine.config.memory_every_n_frames == 0  # memory.enabled is still false
    assert node.set_parameters([Parameter("memory.enabled", value=True)])[0].successful
    _frame(rt, 102.0)
    assert engine.config.memory_every_n_frames == 3
    # a refused change applies nothing and stages nothing
    assert not node.set_parameters([Parameter("max_decode_steps", value=10**6)])[0].successful
    _frame(rt, 103.0)
    assert engine.config.decode_steps_per_frame == before + 1


def test_a_question_is_tokenised_once(node):
    rt, engine = node.rt, node.rt.built.engine
    rt.text._active = lambda: True  # the question path as when active, without the threads
    seen = []
    encode = engine.tokenizer.encode

    def counting(text, *args, **kwargs):
        if QUESTION in text:
            seen.append(text)
        return encode(text, *args, **kwargs)
    engine.tokenizer.encode = counting
    q = Question(QUESTION)
    assert rt.text.submit(q)
    _frame(rt, 100.0)  # hand_over: Engine.ask with the check's ids; the request is born
    assert q.request_id > 0
    assert len(seen) == 1, seen
    engine.tokenizer.encode = encode
    assert q.prompt_ids  # the check's ids, kept on the question for Engine.ask
    assert q.prompt_ids == engine.check_question(QUESTION)
