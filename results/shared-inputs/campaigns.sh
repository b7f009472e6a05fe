#!/usr/bin/env bash
# The campaigns step of every call here: hopper-baseline's and the torch example's default
# campaigns traced (results/throughput/run.sh), with the binary $B (default .carry/nvfp4-oracle).
# Out: $OUT/hopper-default$1.log.gz, torch-default$1.log.gz and their at-once-1-*$1.log.
set -u
NVFP4_ORACLE_TRACE=1 JOBS='kernel:hopper-baseline' AT_ONCE=1 JOB_TIMEOUT=130 bash results/throughput/run.sh
mv "$OUT/hopper-baseline-gpu-0-at-once-1.log.gz" "$OUT/hopper-default${1:-}.log.gz"
mv "$OUT/at-once-1.log" "$OUT/at-once-1-hopper${1:-}.log"
NVFP4_ORACLE_TRACE=1 JOBS='manifest:torch' AT_ONCE=1 JOB_TIMEOUT=170 bash results/throughput/run.sh
mv "$OUT/torch-gpu-0-at-once-1.log.gz" "$OUT/torch-default${1:-}.log.gz"
mv "$OUT/at-once-1.log" "$OUT/at-once-1-torch${1:-}.log"
