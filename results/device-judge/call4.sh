#!/usr/bin/env bash
# Call 4 (one H200, the build in .carry/build: call 3's, and a shared run's trace splitting its
# staged upload into seconds on the host and seconds waiting for the device): hopper-baseline's
# default campaign traced, to tell a slow host copy from a busy copy engine.
set -u
stage=device-judge
. "$(dirname "$0")/../stage.sh" "$stage"
echo "build: $(cat .carry/build 2>/dev/null)" > "$O/device.log"
NVFP4_ORACLE_TRACE=1 JOBS='kernel:hopper-baseline' AT_ONCE=1 JOB_TIMEOUT=130 bash results/throughput/run.sh
mv "$OUT/hopper-baseline-gpu-0-at-once-1.log.gz" "$OUT/hopper-default.log.gz"
mv "$OUT/at-once-1.log" "$OUT/at-once-1-hopper.log"
