#!/bin/bash
cd /work/main && source scripts/env.sh
D=benchmarks/results/humanoid-io-2026-12-07-b
cat /proc/loadavg
oxygen-bench humanoid-io --runs 1cam-raw-js50-cmd200 1cam-raw-js500-cmd200 --alternate 24 --seconds 10 --warmup 2 --out $D/alt-1cam-joints-only
cat /proc/loadavg
