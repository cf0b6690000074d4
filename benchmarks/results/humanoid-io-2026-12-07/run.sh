#!/bin/bash
# old (HEAD 6314588, /tmp/oldtree) and new (this change) alternately, the three-camera pair
source /work/main/scripts/env.sh
export ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST
R=/work/main/benchmarks/results/humanoid-io-2026-12-07
for r in 1 2 3; do
  echo "$(date -u +%T) old r$r"; cat /proc/loadavg
  (cd /tmp/oldtree && ROS_DOMAIN_ID=81 PYTHONPATH=/tmp/oldtree:$PYTHONPATH oxygen-bench humanoid-io --runs 3cam-raw-base-fifo 3cam-raw-js500-cmd200-fifo --out $R/old-r$r) > $R/old-r$r.log 2>&1
  echo "$(date -u +%T) new r$r"; cat /proc/loadavg
  (cd /work/main && ROS_DOMAIN_ID=82 oxygen-bench humanoid-io --runs 3cam-raw-base-fifo 3cam-raw-js500-cmd200-fifo --out $R/new-r$r) > $R/new-r$r.log 2>&1
done
echo "$(date -u +%T) done"
