#!/bin/bash
# pinned (inference_cpus / control_cpus, the fake robot on the control side), alternating
cd /work/main && source scripts/env.sh
D=benchmarks/results/humanoid-io-2026-12-07-b
cat /proc/loadavg
oxygen-bench humanoid-io --runs 3cam-raw-base-fifo-pinned 3cam-raw-js500-cmd200-fifo-pinned --alternate 4 --seconds 40 --out $D/alt-3cam-pinned-r1
cat /proc/loadavg
oxygen-bench humanoid-io --runs 1cam-raw-base-fifo-pinned 1cam-raw-js500-cmd200-fifo-pinned --alternate 4 --seconds 40 --out $D/alt-1cam-pinned-r1
cat /proc/loadavg
