#!/usr/bin/env bash
# One device call: build the probe kernel, run every input family, write outputs under $OUT.
# Usage (device tool): bash kernels/probe/run_device.sh
set -u
export PYTHONUNBUFFERED=1
D=$(dirname "$0")
LOG=$OUT/log.txt
{
  nvidia-smi --query-gpu=name,driver_version --format=csv
  /usr/local/cuda/bin/nvcc --version | tail -2
  /usr/local/cuda/bin/nvcc -cubin -gencode=arch=compute_90a,code=sm_90a -O3 \
      -o /tmp/mma_f16_f32.cubin "$D/mma_f16_f32.cu" || exit 1
  /usr/local/cuda/bin/cuobjdump -sass /tmp/mma_f16_f32.cubin | grep -E "HMMA|MMA" | head
  time python3 "$D/probe_mma.py" device --cubin /tmp/mma_f16_f32.cubin --out "$OUT"
  ls -la "$OUT"
} > "$LOG" 2>&1
echo "exit $?" >> "$LOG"
cat "$LOG"
