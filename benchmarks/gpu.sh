#!/usr/bin/env bash
# oxygen-bench on a lent GPU (H200): pi05 preset, bf16, CUDA, attention backend auto.
# Installs nothing (the machine has torch, transformers, numpy; no network, no ROS).
# Run from the repository root:  bash benchmarks/gpu.sh      (results in $OUT, else benchmarks/results/)
# Small grid (k in {1,5,8,10}: k=8 gives batch 4 for the memory row; N=30, S=10, few frames) sized to finish in well under 8 minutes.
set -euo pipefail
cd "$(dirname "$0")/.."
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
OUT_DIR="${OUT:-benchmarks/results}/cuda-$(date +%Y-%m-%d)"
mkdir -p "$OUT_DIR"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv > "$OUT_DIR/nvidia-smi.txt" 2>&1 || true
python - <<'PY' || { echo "gpu.sh: python deps missing (need torch with CUDA, numpy; matplotlib/tqdm/psutil optional below)"; exit 1; }
import torch, numpy
assert torch.cuda.is_available(), "no CUDA device"
print("torch", torch.__version__, "on", torch.cuda.get_device_name(0))
PY
# tqdm, psutil and matplotlib may be absent on the lent machine: fall back to tiny stand-ins.
SHIM=""
if ! python -c "import tqdm, psutil" 2>/dev/null; then
  SHIM="$(mktemp -d)"
  python -c "import tqdm" 2>/dev/null || cat > "$SHIM/tqdm.py" <<'PY'
class tqdm:
    def __init__(self, iterable=None, total=None, **kw): self.it, self.n = iterable, 0
    def __iter__(self): return iter(self.it)
    def __enter__(self): return self
    def __exit__(self, *a): return False
    def update(self, n=1): self.n += n
    def set_postfix_str(self, s): print(s, flush=True)
PY
  python -c "import psutil" 2>/dev/null || cat > "$SHIM/psutil.py" <<'PY'
import os, resource
class _Mem:
    def __init__(self): self.rss = int(open("/proc/self/statm").read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
class Process:
    def memory_info(self): return _Mem()
PY
  export PYTHONPATH="$SHIM:$PYTHONPATH"
fi
PLOTS=""
python -c "import matplotlib" 2>/dev/null || PLOTS="--no-plots"
timeout 460 python -m oxygen_ros.bench.cli --preset pi05 --device cuda --dtype bfloat16 \
  --attention-backend auto --threads 8 --k 1,5,8,10 --N 30 --S 10 --frames 5 \
  --patterns per_frame,bursty --pattern-modes oxygen,isolated --pattern-frames 12 \
  --pattern-setting 5,30,10 --fluct-frames 119 --fluct-setting 5,30,10 --memory-setting 20,10 \
  --memory-probes off --out "$OUT_DIR" --json $PLOTS 2>&1 | tee "$OUT_DIR/log.txt"
echo "gpu.sh: done -> $OUT_DIR"
