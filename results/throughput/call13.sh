#!/usr/bin/env bash
# Call 13 (one H100, build in .carry/build): where a Python submission's small case goes in
# the worker (results/small-cases/profile_worker.py), then the torch example's and
# hopper-baseline's default campaigns traced, every trace line timed from the first.
set -u
mkdir -p "$OUT"
for s in torch triton; do
  timeout 60 python3 results/small-cases/profile_worker.py examples/submissions/$s/submission.py 300 \
    > "$OUT/profile-$s.log" 2>&1
done
NVFP4_ORACLE_TRACE=1 JOBS='manifest:torch' AT_ONCE=1 JOB_TIMEOUT=170 bash results/throughput/run.sh
mv "$OUT/torch-gpu-0-at-once-1.log.gz" "$OUT/torch-default.log.gz"
mv "$OUT/at-once-1.log" "$OUT/at-once-1-torch.log"
NVFP4_ORACLE_TRACE=1 JOBS='kernel:hopper-baseline' AT_ONCE=1 JOB_TIMEOUT=130 bash results/throughput/run.sh
mv "$OUT/at-once-1.log" "$OUT/at-once-1-hopper.log"
