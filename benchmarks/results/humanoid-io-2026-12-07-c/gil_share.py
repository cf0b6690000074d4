"""Does a call hold the interpreter lock? Another Python thread counts for 1 s while this one
calls it in a loop: beside a call that releases the lock the counter keeps its idle rate, beside
one that holds it (like pure Python) it gets about half. rclpy's publish and take are measured
against the same calls through rcl with the lock released (node/rcl_unlocked.py).

    git checkout 34e4184 && source scripts/env.sh && python benchmarks/results/humanoid-io-2026-12-07-c/gil_share.py

(node/rcl_unlocked.py exists at commit 34e4184 only: it was reverted after these measurements.)
"""
import threading, time, rclpy, sys, hashlib
from sensor_msgs.msg import JointState
from rclpy.serialization import serialize_message
sys.setswitchinterval(0.001)
rclpy.init()
n = rclpy.create_node('giltest')
pub = n.create_publisher(JointState, '/giltest', 10)
sub = n.create_subscription(JointState, '/giltest', lambda m: None, 10, raw=True)
msg = JointState(name=[f'j{i}' for i in range(30)], position=[0.0]*30)
raw = serialize_message(msg)
data = b'x' * 100000
def take():
    with sub.handle:
        sub.handle.take_message(sub.msg_type, True)
from oxygen_ros.node.rcl_unlocked import Probe, UnlockedPublisher, UnlockedTake
rcl, why = Probe.run(n)
assert rcl is not None, why
ours_pub, ours_take = UnlockedPublisher(rcl, pub), UnlockedTake(rcl, sub)
loads = {'idle': None, 'pure python': lambda: sum(range(50)),
         'rclpy publish (raw bytes)': lambda: pub.publish(raw), 'rclpy take (raw)': take,
         'rcl publish, lock released': lambda: ours_pub.publish(raw),
         'rcl take, lock released': ours_take.take,
         'sha256 100kB (releases GIL)': lambda: hashlib.sha256(data).digest()}
for name, fn in loads.items():
    stop = [False]; calls = [0]
    def a():
        while not stop[0]:
            if fn is None:
                time.sleep(0.01)
            else:
                fn(); calls[0] += 1
    th = threading.Thread(target=a, daemon=True); th.start()
    time.sleep(0.1)
    c = 0; t0 = time.perf_counter()
    while time.perf_counter() - t0 < 1.0:
        c += 1
    stop[0] = True; th.join()
    print(f"{name:32s}: counter {c/1e6:.2f} M/s, load calls {calls[0]}")
