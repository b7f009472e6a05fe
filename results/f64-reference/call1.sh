#!/usr/bin/env bash
# Call 1: the GPU reference's tests (the f64 kernels and the integer kernel against the CPU
# model bit for bit, the hand-over to the integer kernel, the speed table with both kernels),
# then hopper-baseline's and the torch example's default campaigns traced, the build before
# (d0f162c, carried as .carry/before/nvfp4-oracle-d0f162c) and this one each in turn.
# From the repository root on the GPU machine:  bash results/f64-reference/call1.sh
. "$(dirname "$0")/common.sh"
( time NVFP4_ORACLE_BIN="$PWD/.carry/nvfp4-oracle" timeout 200 .carry/oracle_test \
    --include-ignored --nocapture --test-threads 1 gpu_reference:: ) > "$O/oracle-tests.log" 2>&1
echo "exit $?" >> "$O/oracle-tests.log"
campaign kernel:hopper-baseline hopper-baseline 130 d0f162c .carry/before/nvfp4-oracle-d0f162c
campaign kernel:hopper-baseline hopper-baseline 130 f64 .carry/nvfp4-oracle
campaign manifest:torch torch 170 d0f162c .carry/before/nvfp4-oracle-d0f162c
campaign manifest:torch torch 170 f64 .carry/nvfp4-oracle
cat "$O/summary.log"
