"""bags/replay_outputs: oxygen-replay's frame_stats carry every field the node's ~/frame_stats does,
with the same values (one FrameOutput -> FrameStats mapping, robot/frame_stats.py)."""
import numpy as np
import pytest

from oxygen_ros.bags.reader import read_bag
from oxygen_ros.bags.replay import Frame, ReplayConfig, ReplayResult
from oxygen_ros.bags.replay_outputs import write_outputs
from oxygen_ros.engine.core.engine import FrameOutput
from oxygen_ros.engine.core.kv import KVUsage


def frame_output(frame: int, feasible: bool) -> FrameOutput:
    kv = KVUsage(blocks_used=5, blocks_cached=1, blocks_free=10, blocks_total=16, bytes_used=5000,
                 peak_blocks=6, peak_bytes=6000)
    return FrameOutput(frame=frame, stamp=1.0, mode="oxygen", k=4, n=12, s=10,
                       actions=np.zeros((10, 2), np.float32), updates=(),
                       timings_ms={"vision_prefill": 1.0, "denoise": 2.0, "decode": 3.0,
                                   "kv": 0.1, "sched": 0.5},
                       frame_ms=7.0, batch_size=3, tokens_this_frame=12, num_waiting=1,
                       num_running=3, kv=kv, k_chosen=2, target_action_hz=15.0,
                       target_feasible=feasible)


def replayed_frame_stats(tmp_path, outs):
    cfg = ReplayConfig(camera_topics=["/camera/image_raw"], joint_state_topic="/joint_states",
                       joint_names=["a", "b"])
    frames = [Frame(pair=None, header_ns=1_000_000_000 + i * 100_000_000,
                    done_ns=1_050_000_000 + i * 100_000_000, chunk=np.zeros((10, 2), np.float32),
                    out=out) for i, out in enumerate(outs)]
    write_outputs(tmp_path / "out", "mcap", ReplayResult(frames=frames), cfg, "/oxygen")
    return [m for _, m in read_bag(tmp_path / "out").get("/oxygen/frame_stats")]


def test_replayed_frame_stats_keep_the_target_fields(tmp_path):
    """Replay bags said target_feasible=false (and k_chosen 0) where the robot's said true."""
    first, second = replayed_frame_stats(tmp_path, [frame_output(0, True), frame_output(1, False)])
    assert (first.target_feasible, first.k_chosen, first.target_action_hz) == (True, 2, 15.0)
    assert second.target_feasible is False


@pytest.mark.ros
def test_node_and_replay_give_the_same_frame_stats(tmp_path):
    conv = pytest.importorskip("oxygen_ros.node.conversions")
    from builtin_interfaces.msg import Time

    out = frame_output(3, True)
    (replayed,) = replayed_frame_stats(tmp_path, [out])
    node = conv.frame_stats(out, Time(sec=1))  # the replay's first frame has no rate yet: 0, 0
    names = [n for n in node.get_fields_and_field_types() if n != "header"]
    assert names and set(names) == set(replayed.__dataclass_fields__) - {"header", "__msgtype__"}
    for name in names:
        assert getattr(replayed, name) == pytest.approx(getattr(node, name)), name
