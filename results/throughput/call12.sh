#!/usr/bin/env bash
# Call 12 (one H100, build in .carry/build): the torch example's default campaign and
# hopper-baseline's, traced, then the triton example's timer forged to report 20 us less
# (results/bench-clock/forge_tail.py) at the benchmark shapes.
set -u
NVFP4_ORACLE_TRACE=1 JOBS='manifest:torch' AT_ONCE=1 JOB_TIMEOUT=170 bash results/throughput/run.sh
mv "$OUT/torch-gpu-0-at-once-1.log.gz" "$OUT/torch-default.log.gz"
mv "$OUT/at-once-1.log" "$OUT/at-once-1-torch.log"
NVFP4_ORACLE_TRACE=1 JOBS='kernel:hopper-baseline' AT_ONCE=1 JOB_TIMEOUT=130 bash results/throughput/run.sh
mv "$OUT/at-once-1.log" "$OUT/at-once-1-hopper.log"
export W=results/bench-clock B=.carry/nvfp4-oracle R=$HOME/bench-x1 DEADLINE=$((SECONDS + 60)) BENCH_TIMEOUT=90
RUN_LONE_FUNCTIONS_ONLY=1 source results/bench-clock/run_lone.sh
PYFORGES=1:20 forge_py triton "$SHAPES"
