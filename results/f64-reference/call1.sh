#!/usr/bin/env bash
# Call 1: the GPU reference's tests (the f64 kernels and the integer kernel against the CPU
# model bit for bit, the hand-over to the integer kernel, the speed table with both kernels),
# then hopper-baseline's and the torch example's default campaigns traced, the build before
# (d0f162c, carried as .carry/before/nvfp4-oracle-d0f162c) and this one each in turn.
# From the repository root on the GPU machine:  bash results/f64-reference/call1.sh
set -u
stage=f64-reference
. "$(dirname "$0")/../stage.sh" "$stage"
echo "build: $(cat .carry/build 2>/dev/null)" > "$O/device.log"
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm --format=csv >> "$O/device.log" 2>&1
( time NVFP4_ORACLE_BIN="$PWD/.carry/nvfp4-oracle" timeout 200 .carry/oracle_test \
    --include-ignored --nocapture --test-threads 1 gpu_reference:: ) > "$O/oracle-tests.log" 2>&1
echo "exit $?" >> "$O/oracle-tests.log"
campaign() {  # campaign JOB NAME TIMEOUT SUFFIX BINARY
  B=$5 NVFP4_ORACLE_TRACE=1 JOBS=$1 AT_ONCE=1 JOB_TIMEOUT=$3 bash results/throughput/run.sh > /dev/null
  mv "$O/$2-gpu-0-at-once-1.log.gz" "$O/$2-default-$4.log.gz"
  mv "$O/at-once-1.log" "$O/at-once-1-$2-$4.log"
}
campaign kernel:hopper-baseline hopper-baseline 130 d0f162c .carry/before/nvfp4-oracle-d0f162c
campaign kernel:hopper-baseline hopper-baseline 130 f64 .carry/nvfp4-oracle
campaign manifest:torch torch 170 d0f162c .carry/before/nvfp4-oracle-d0f162c
campaign manifest:torch torch 170 f64 .carry/nvfp4-oracle
cat "$O/summary.log"
