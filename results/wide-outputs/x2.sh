#!/usr/bin/env bash
# On a host of 2 GPUs (no 4-GPU host was lent): the torch example's default campaign alone
# (GPU 0) and two at once (one per GPU), then hopper-baseline's the same way, this build
# (1 to 3 of this folder's README). Out: at-once-1.log, at-once-2.log, summary.log, traces.tgz.
stage=wide-outputs
. "$(dirname "$0")/../case-overlap/common.sh"
for job in manifest:torch kernel:hopper-baseline; do
  NVFP4_ORACLE_TRACE=1 JOBS=$job AT_ONCE=1 JOB_TIMEOUT=170 bash results/throughput/run.sh > /dev/null
  NVFP4_ORACLE_TRACE=1 JOBS=$job AT_ONCE=2 JOB_TIMEOUT=200 bash results/throughput/run.sh > /dev/null
done
cd "$O" && tar czf traces.tgz *-at-once-*.log.gz && rm *-at-once-*.log.gz
