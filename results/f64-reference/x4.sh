#!/usr/bin/env bash
# On an x4 host (4 x H200): the torch example's default campaign four at once (one per GPU,
# each process taking its share of the host's cores by itself), then alone on GPU 0, with the
# build in .carry/nvfp4-oracle. Out: $OUT/at-once-4.log, at-once-1.log, summary.log.
set -u
JOBS='manifest:torch' AT_ONCE=4 JOB_TIMEOUT=200 bash results/throughput/run.sh > /dev/null
JOBS='manifest:torch' AT_ONCE=1 JOB_TIMEOUT=150 bash results/throughput/run.sh > /dev/null
cat "$OUT/summary.log"
