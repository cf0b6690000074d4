#!/bin/bash
cd /work/main && source scripts/env.sh
D=benchmarks/results/humanoid-io-2026-12-07-b
cat /proc/loadavg
oxygen-bench humanoid-io --runs 3cam-raw-base-fifo 3cam-raw-js500-cmd200-fifo --alternate 4 --seconds 40 --out $D/alt-3cam-r2
cat /proc/loadavg
