#!/usr/bin/env bash
# Call 6: a shared run's comparisons answer in one flag of device memory of its own, not ten
# from the stream's pool (whose reuse of memory the GPU reference freed made the checks wait
# for that reference). The default campaigns of hopper-baseline and the torch example with
# 0ccb9eb and this build in turn, then the GPU tests of the comparisons and shared runs with
# this build, one H200.
stage=ahead-buffers
. "$(dirname "$0")/../case-overlap/common.sh"
campaign kernel:hopper-baseline hopper-baseline 100 0ccb9eb .carry/before/nvfp4-oracle-0ccb9eb
campaign kernel:hopper-baseline hopper-baseline 100 flag .carry/nvfp4-oracle
campaign manifest:torch torch 120 0ccb9eb .carry/before/nvfp4-oracle-0ccb9eb
campaign manifest:torch torch 120 flag .carry/nvfp4-oracle
( time NVFP4_ORACLE_BIN="$PWD/.carry/nvfp4-oracle" timeout 100 .carry/oracle_test \
    --include-ignored --nocapture --test-threads 1 \
    gpu::a_device_copy_sees_one_changed_byte \
    gpu::a_large_case_on_shared_memory_is_the_case_on_files \
    gpu::a_hostile_library_on_shared_memory_is_caught \
  ) > "$O/call6-oracle-tests.log" 2>&1
echo "exit $?" >> "$O/call6-oracle-tests.log"
cd "$O" && cat at-once-1-*.log > call6-campaigns.log && rm at-once-1-*.log \
  && cat summary.log >> device.log && rm summary.log && mv device.log call6-device.log \
  && tar czf call6-traces.tgz *-default-*.log.gz && rm *-default-*.log.gz
