#!/bin/bash
# humanoid-io-2026-12-07-c: the tick's middleware calls with and without the interpreter lock
# (needs commit 34e4184, where control_unlocked_calls and the -rclpy configurations exist), the
# whole load with the tick's cheaper checks, and what a tick's parts cost inside the node.
set -e
cd "$(git rev-parse --show-toplevel)" && source scripts/env.sh
D=benchmarks/results/humanoid-io-2026-12-07-c
git checkout -q 34e4184
oxygen-bench humanoid-io --runs 3cam-raw-js500-cmd200-fifo-rclpy 3cam-raw-js500-cmd200-fifo --alternate 4 --seconds 40 --out $D/alt-3cam-unlocked-r1
oxygen-bench humanoid-io --runs 3cam-raw-base-fifo 3cam-raw-js500-cmd200-fifo --alternate 4 --seconds 40 --out $D/alt-3cam-whole-r1
oxygen-bench humanoid-io --runs 3cam-raw-base-fifo 3cam-raw-js500-cmd200-fifo --alternate 4 --seconds 40 --out $D/alt-3cam-whole-r2
oxygen-bench humanoid-io --runs 3cam-raw-js500-cmd200-fifo-rclpy 3cam-raw-js500-cmd200-fifo --alternate 6 --seconds 40 --out $D/alt-3cam-unlocked-r2
python $D/gil_share.py | tee $D/gil_share.txt
git checkout -q -  # back; the rest runs on the commit after 34e4184's revert or later
PYTHONPATH=$D/tick_parts:$PYTHONPATH TICK_PARTS_OUT=$D/tick_parts \
    oxygen-bench humanoid-io --runs 3cam-raw-js500-cmd200-fifo --seconds 30 --out /tmp/parts
# control-tick, this code against 02425ad (a worktree of it first on PYTHONPATH), interleaved
git worktree add -f /tmp/base 02425ad
for i in 1 2 3 4 5; do
  (cd /tmp/base && PYTHONPATH=/tmp/base:$PYTHONPATH oxygen-bench control-tick --joints 30 | tail -1 | sed 's/^/02425ad /')
  oxygen-bench control-tick --joints 30 | tail -1 | sed 's/^/this    /'
done | tee $D/control_tick_ab.txt
