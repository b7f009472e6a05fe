#!/usr/bin/env bash
# Call 5 (one H100): the torch example's and hopper-baseline's default campaigns, each alone and
# traced (every case's class and phases), with this build's batched small cases.
set -u
NVFP4_ORACLE_TRACE=1 JOBS='manifest:torch' AT_ONCE=1 JOB_TIMEOUT=390 bash results/throughput/run.sh
NVFP4_ORACLE_TRACE=1 JOBS='kernel:hopper-baseline' AT_ONCE=1 JOB_TIMEOUT=$((585 - SECONDS)) bash results/throughput/run.sh
