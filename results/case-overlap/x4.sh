#!/usr/bin/env bash
# On a host of 4 GPUs: the GPU tests of kept outputs (GPU 0), then the torch example's default
# campaign alone and four at once (one per GPU), then hopper-baseline's the same way, this
# build. Out: at-once-1.log, at-once-4.log, summary.log, oracle-tests.log, traces.tgz.
. "$(dirname "$0")/common.sh"
( time CUDA_VISIBLE_DEVICES=0 NVFP4_ORACLE_BIN="$PWD/.carry/nvfp4-oracle" timeout 200 .carry/oracle_test \
    --include-ignored --nocapture --test-threads 1 \
    gpu::an_output_kept_on_the_device_is_the_output_read_back \
    gpu::a_large_case_on_shared_memory_is_the_case_on_files ) > "$O/oracle-tests.log" 2>&1
echo "exit $?" >> "$O/oracle-tests.log"
for job in manifest:torch kernel:hopper-baseline; do
  NVFP4_ORACLE_TRACE=1 JOBS=$job AT_ONCE=1 JOB_TIMEOUT=170 bash results/throughput/run.sh > /dev/null
  NVFP4_ORACLE_TRACE=1 JOBS=$job AT_ONCE=4 JOB_TIMEOUT=200 bash results/throughput/run.sh > /dev/null
done
cd "$O" && tar czf traces.tgz *-at-once-*.log.gz && rm *-at-once-*.log.gz
