#!/usr/bin/env bash
# Call 3: the shared runs' lane on a stream of the highest priority (the output's device copy
# and the comparisons after a worker's answer no longer wait for the GPU reference's kernel).
# The default campaigns of hopper-baseline and the torch example with 1ddcadb and this build in
# turn (1ddcadb first: the call's first campaign pays the machine's cold start); then the GPU
# tests of shared runs and device copies with this build, one H200.
stage=device-copy
. "$(dirname "$0")/../case-overlap/common.sh"
campaign kernel:hopper-baseline hopper-baseline 100 1ddcadb .carry/before/nvfp4-oracle-1ddcadb
campaign kernel:hopper-baseline hopper-baseline 100 urgent .carry/nvfp4-oracle
campaign manifest:torch torch 120 1ddcadb .carry/before/nvfp4-oracle-1ddcadb
campaign manifest:torch torch 120 urgent .carry/nvfp4-oracle
( time NVFP4_ORACLE_BIN="$PWD/.carry/nvfp4-oracle" timeout 200 .carry/oracle_test \
    --include-ignored --nocapture --test-threads 1 \
    gpu::a_large_case_on_shared_memory_is_the_case_on_files \
    gpu::a_hostile_library_on_shared_memory_is_caught \
    gpu::an_output_kept_on_the_device_is_the_output_read_back \
    gpu::a_device_copy_sees_one_changed_byte \
  ) > "$O/call3-oracle-tests.log" 2>&1
echo "exit $?" >> "$O/call3-oracle-tests.log"
cd "$O" && cat at-once-1-*.log > call3-campaigns.log && rm at-once-1-*.log \
  && cat summary.log >> device.log && rm summary.log && mv device.log call3-device.log \
  && tar czf call3-traces.tgz *-default-*.log.gz && rm *-default-*.log.gz
