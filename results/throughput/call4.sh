#!/usr/bin/env bash
# Call 4 (build in .carry/build): the torch example's default campaign alone (traced), then four
# at once, one per GPU; then the GPU test of a Python submission's large case on shared memory.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
NVFP4_ORACLE_TRACE=1 JOBS='manifest:torch' AT_ONCE=1 JOB_TIMEOUT=240 bash results/throughput/run.sh
JOBS='manifest:torch' AT_ONCE=4 JOB_TIMEOUT=240 bash results/throughput/run.sh
left=$((580 - SECONDS))
[ $left -gt 30 ] && CUDA_VISIBLE_DEVICES=0 NVFP4_ORACLE_BIN=./.carry/nvfp4-oracle NVFP4_ORACLE_WORKER=./.carry/nvfp4-oracle \
  timeout $left ./.carry/oracle_test external_kernels_gpu::a_python --include-ignored --test-threads 1 > "$OUT/gpu-test.log" 2>&1
echo "gpu test exit $?" >> "$OUT/gpu-test.log"
