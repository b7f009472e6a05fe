#!/usr/bin/env bash
# On a host of 4 GPUs, in one call: the torch example's default campaign alone and four at once
# (one per GPU), with 1419f6a (before this work) and with this build (1884f5d) in turn. Out:
# at-once-1.log and at-once-4.log (each run's command, time and certificate rows, in order),
# summary.log.
. "$(dirname "$0")/common.sh"
for build in .carry/before/nvfp4-oracle-1419f6a .carry/nvfp4-oracle; do
  echo "binary: $build" >> "$O/summary.log"
  B=$build JOBS=manifest:torch AT_ONCE=1 JOB_TIMEOUT=200 bash results/throughput/run.sh > /dev/null
  B=$build JOBS=manifest:torch AT_ONCE=4 JOB_TIMEOUT=200 bash results/throughput/run.sh > /dev/null
done
