#!/usr/bin/env bash
# Call 9 (one H100, build in .carry/build): the device-copy checks' GPU tests (the comparison
# itself; a large case on shared memory equal to its case on files with an out-of-bounds write
# caught; the hostile libraries; a Python submission's large case with answer_into_input.py
# caught), then the torch example's default campaign traced and hopper-baseline's.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export PATH=/usr/local/cuda/bin:$PATH
( time NVFP4_ORACLE_BIN=$PWD/.carry/nvfp4-oracle timeout 150 .carry/oracle_test \
    gpu::a_ external_kernels_gpu::a_python --include-ignored --nocapture ) > "$OUT/gpu-tests.log" 2>&1
echo "gpu tests exit $?" > "$OUT/summary.log"
grep -E "^test |test result" "$OUT/gpu-tests.log"
NVFP4_ORACLE_TRACE=1 JOBS='manifest:torch' AT_ONCE=1 JOB_TIMEOUT=220 bash results/throughput/run.sh
mv "$OUT/torch-gpu-0-at-once-1.log.gz" "$OUT/torch-default.log.gz"
mv "$OUT/at-once-1.log" "$OUT/at-once-1-torch.log"
NVFP4_ORACLE_TRACE=1 JOBS='kernel:hopper-baseline' AT_ONCE=1 JOB_TIMEOUT=$((570 - SECONDS)) bash results/throughput/run.sh
mv "$OUT/at-once-1.log" "$OUT/at-once-1-hopper.log"
