#!/bin/bash
# the second batch: two more three-camera repetitions, then the one-camera pair (the balanced
# preset) twice, old (6314588, /tmp/oldtree) and new alternately
source /work/main/scripts/env.sh
export ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST
R=/work/main/benchmarks/results/humanoid-io-2026-12-07
run() {  # tree, runs..., out
  local tree=$1 out=$2; shift 2
  echo "$(date -u +%T) $out"; cat /proc/loadavg
  if [ "$tree" = old ]; then
    (cd /tmp/oldtree && ROS_DOMAIN_ID=81 PYTHONPATH=/tmp/oldtree:$PYTHONPATH oxygen-bench humanoid-io --runs "$@" --out $R/$out) > $R/$out.log 2>&1
  else
    (cd /work/main && ROS_DOMAIN_ID=82 oxygen-bench humanoid-io --runs "$@" --out $R/$out) > $R/$out.log 2>&1
  fi
}
for r in 4 5; do
  run old old-r$r 3cam-raw-base-fifo 3cam-raw-js500-cmd200-fifo
  run new new-r$r 3cam-raw-base-fifo 3cam-raw-js500-cmd200-fifo
done
for r in 1 2; do
  run old old-1cam-r$r 1cam-raw-base 1cam-raw-js500-cmd200
  run new new-1cam-r$r 1cam-raw-base 1cam-raw-js500-cmd200
done
echo "$(date -u +%T) done"
