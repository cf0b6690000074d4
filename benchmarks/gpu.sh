#!/usr/bin/env bash
# oxygen-bench on a lent GPU (H200): pi05 preset, bf16, CUDA, attention backend auto.
# Installs nothing (the machine has torch, transformers, numpy; no network, no ROS).
# Run from the repository root:  bash benchmarks/gpu.sh      (results in $OUT, else benchmarks/results/)
# Small grid (k in {1,5,8,10}: k=8 gives batch 4 for the memory row; N=30, S=10, few frames) sized to finish in well under 8 minutes.
#
# GPU_SH_DRY_RUN=1 runs the same script on this CPU with the tiny preset, the CUDA path's
# attention backend (reference), the psutil stand-in and no plots, so the script is
# exercised end to end (flags, fall-backs, report) before device time is spent on it
# (test/bench/test_gpu_script.py).
set -euo pipefail
cd "$(dirname "$0")/.."
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
DRY="${GPU_SH_DRY_RUN:-0}"
if [ "$DRY" = 1 ]; then
  TARGET=(--preset tiny --device cpu --dtype float32 --attention-backend reference --threads 2)
  OUT_DIR="${OUT:-benchmarks/results}/cuda-dry-run-$(date +%Y-%m-%d)"
  LIMIT=300
else
  TARGET=(--preset pi05 --device cuda --dtype bfloat16 --attention-backend auto --threads 8)
  OUT_DIR="${OUT:-benchmarks/results}/cuda-$(date +%Y-%m-%d)"
  LIMIT=460
fi
mkdir -p "$OUT_DIR"
if [ "$DRY" != 1 ]; then
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv > "$OUT_DIR/nvidia-smi.txt" 2>&1 || true
  python - <<'PY' || { echo "gpu.sh: python deps missing (need torch with CUDA, numpy, transformers; matplotlib/psutil optional below)"; exit 1; }
import torch, numpy, transformers, tqdm
assert torch.cuda.is_available(), "no CUDA device"
print("torch", torch.__version__, "on", torch.cuda.get_device_name(0))
PY
fi
# psutil and matplotlib may be absent on the lent machine: a stand-in for psutil, no plots.
# (tqdm is always there: transformers depends on it and imports tqdm.auto.)
SHIM=""
if [ "$DRY" = 1 ] || ! python -c "import psutil" 2>/dev/null; then
  SHIM="$(mktemp -d)"
  trap 'rm -rf "$SHIM"' EXIT
  cat > "$SHIM/psutil.py" <<'PY'
import os
class _Mem:
    def __init__(self): self.rss = int(open("/proc/self/statm").read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
class Process:
    def memory_info(self): return _Mem()
PY
  export PYTHONPATH="$SHIM:$PYTHONPATH"
fi
PLOTS=""
{ [ "$DRY" != 1 ] && python -c "import matplotlib" 2>/dev/null; } || PLOTS="--no-plots"
timeout "$LIMIT" python -m oxygen_ros.bench.cli "${TARGET[@]}" --k 1,5,8,10 --N 30 --S 10 --frames 5 \
  --patterns per_frame,bursty --pattern-modes oxygen,isolated --pattern-frames 12 \
  --pattern-setting 5,30,10 --fluct-frames 119 --fluct-setting 5,30,10 --memory-setting 20,10 \
  --memory-probes off --out "$OUT_DIR" --json $PLOTS 2>&1 | tee "$OUT_DIR/log.txt"
echo "gpu.sh: done -> $OUT_DIR"
