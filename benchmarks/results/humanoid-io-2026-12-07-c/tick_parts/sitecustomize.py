"""What the parts of a control tick cost inside the node under the humanoid load (measuring
code, not the node's): put this folder first on PYTHONPATH and run the benchmark; every node
process (`oxygen_ros.cli.node` on its command line) then times, on its control thread, the
whole tick, the joint-state take (`Inputs.poll`), the Python part of that take
(`Inputs._joint_bytes_cb`) and rclpy's publish (`Publisher.publish`), in thread CPU time, and writes p50 / mean over the newest 6000 of each to
$TICK_PARTS_OUT/parts-<pid>.json every 5 s (default: the current folder).

    D=benchmarks/results/humanoid-io-2026-12-07-c
    PYTHONPATH=$D/tick_parts:$PYTHONPATH TICK_PARTS_OUT=$D/tick_parts \\
        oxygen-bench humanoid-io --runs 3cam-raw-js500-cmd200-fifo --seconds 30 --out /tmp/parts
"""
import json
import os
import sys
import threading
import time

if "oxygen_ros.cli.node" in open("/proc/self/cmdline").read():
    _records: dict = {}

    def _wrap(cls, name, key):
        orig = getattr(cls, name)

        def timed(*args, **kwargs):
            if threading.current_thread().name != "oxygen-control":
                return orig(*args, **kwargs)
            c0 = time.thread_time()
            out = orig(*args, **kwargs)
            _records.setdefault(key, []).append(time.thread_time() - c0)
            return out
        setattr(cls, name, timed)

    def _run():
        while "oxygen_ros.node.control_loop" not in sys.modules or "oxygen_ros.node.inputs" not in sys.modules:
            time.sleep(0.5)
        import rclpy.publisher

        inputs = sys.modules["oxygen_ros.node.inputs"].Inputs
        _wrap(sys.modules["oxygen_ros.node.control_loop"].ControlLoop, "tick", "tick")
        _wrap(rclpy.publisher.Publisher, "publish", "publish")
        _wrap(inputs, "poll", "poll")
        _wrap(inputs, "_joint_bytes_cb", "joint_bytes_cb")
        out_dir = os.environ.get("TICK_PARTS_OUT", ".")
        while True:
            time.sleep(5)
            out = {}
            for key, values in list(_records.items()):
                newest = sorted(values[-6000:])
                if newest:
                    out[key] = {"n": len(newest), "p50_us": 1e6 * newest[len(newest) // 2],
                                "mean_us": 1e6 * sum(newest) / len(newest)}
                if len(values) > 100000:
                    del values[:50000]
            with open(os.path.join(out_dir, f"parts-{os.getpid()}.json"), "w") as f:
                json.dump(out, f, indent=1)

    threading.Thread(target=_run, daemon=True).start()
