#!/usr/bin/env bash
# Call 7 (one H100, build in .carry/build): the torch example's campaign without range cases, then
# its default campaign, both traced (after the batch references' lock fix); then bench of
# cuda_inline at one shape under the lone rule for libraries only.
set -u
NVFP4_ORACLE_TRACE=1 JOBS='manifest:torch' AT_ONCE=1 JOB_TIMEOUT=150 \
  ARGS='--sanitize 0 --determinism 0 --range-cases 0' bash results/throughput/run.sh
mv "$OUT/torch-gpu-0-at-once-1.log.gz" "$OUT/torch-no-range.log.gz"
NVFP4_ORACLE_TRACE=1 JOBS='manifest:torch' AT_ONCE=1 JOB_TIMEOUT=$((470 - SECONDS)) bash results/throughput/run.sh
DEADLINE=$((560 - SECONDS)) BENCH_TIMEOUT=100 SHAPES=256x3072x4096 SHORT=128x1024x256 EXAMPLES=cuda_inline \
  bash results/bench-clock/run_lone.sh honest:cuda_inline
