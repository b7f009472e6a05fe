#!/usr/bin/env bash
# Call 6 (one H100, the merged build in .carry/build): the torch example's campaign without range
# cases, traced (its small classes in batches of 16 per worker request); then the Python
# worker's lone-call loop of bench on the GPU (cuda_inline, honest and forged 5%), run_lone.sh.
set -u
NVFP4_ORACLE_TRACE=1 JOBS='manifest:torch' AT_ONCE=1 JOB_TIMEOUT=220 \
  ARGS='--sanitize 0 --determinism 0 --range-cases 0' bash results/throughput/run.sh
DEADLINE=$((470 - SECONDS)) BENCH_TIMEOUT=150 SHAPES=256x3072x4096 SHORT=128x1024x256 \
  bash results/bench-clock/run_lone.sh honest:cuda_inline forge-short:0.95:0
