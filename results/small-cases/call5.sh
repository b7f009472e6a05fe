#!/usr/bin/env bash
# Call 5 (one H100, the build to be committed, in .carry/build): the joined canary check on the
# GPU, two delivery exploits with the gate made before the import, then the torch example's
# default campaign traced.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
mkdir -p "$OUT"
timeout 60 python3 results/small-cases/check_after_on_gpu.py > "$OUT/check-after-on-gpu.log" 2>&1
echo "exit $?" >> "$OUT/check-after-on-gpu.log"
( time env EXPLOIT=side_stream,patch_synchronize NVFP4_ORACLE_BIN="$PWD/.carry/nvfp4-oracle" timeout 110 .carry/oracle_test exploits::every --include-ignored --nocapture ) > "$OUT/exploits-delivery.log" 2>&1
NVFP4_ORACLE_TRACE=1 JOBS='manifest:torch' AT_ONCE=1 JOB_TIMEOUT=165 bash results/throughput/run.sh
mv "$OUT/torch-gpu-0-at-once-1.log.gz" "$OUT/torch-default.log.gz"
mv "$OUT/at-once-1.log" "$OUT/at-once-1-torch.log"
