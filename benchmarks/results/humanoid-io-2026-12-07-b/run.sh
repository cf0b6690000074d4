#!/bin/bash
# the alternating measurement, three cameras (FIFO) then one camera
cd /work/main && source scripts/env.sh
D=benchmarks/results/humanoid-io-2026-12-07-b
cat /proc/loadavg
oxygen-bench humanoid-io --runs 3cam-raw-base-fifo 3cam-raw-js500-cmd200-fifo --alternate 4 --seconds 40 --out $D/alt-3cam-r1
cat /proc/loadavg
oxygen-bench humanoid-io --runs 1cam-raw-base 1cam-raw-js500-cmd200 --alternate 4 --seconds 40 --out $D/alt-1cam-r1
cat /proc/loadavg
