#!/usr/bin/env bash
# Call 10 (H100 x4 host, build in .carry/build): the torch example's default campaign alone on
# GPU 0, then four at once (one per GPU, no taskset), every lane traced so that a cut run still
# says how far it got.
set -u
NVFP4_ORACLE_TRACE=1 JOBS='manifest:torch' AT_ONCE=1 JOB_TIMEOUT=210 bash results/throughput/run.sh
NVFP4_ORACLE_TRACE=1 JOBS='manifest:torch' AT_ONCE=4 JOB_TIMEOUT=$((575 - SECONDS)) bash results/throughput/run.sh
