#!/usr/bin/env bash
# Call 3: uploads through the pinned halves packed one after another in a half (waiting for a
# half only when entering it), on top of calls 1 and 2 (792cb3c). The GPU tests of staged
# copies (now many uploads on two streams), shared runs, kept outputs, the hostile library and
# the device judge; then the two default campaigns, this build and 792cb3c in turn.
stage=wide-outputs
. "$(dirname "$0")/../case-overlap/common.sh"
( time NVFP4_ORACLE_BIN="$PWD/.carry/nvfp4-oracle" timeout 240 .carry/oracle_test \
    --include-ignored --nocapture --test-threads 1 \
    gpu::staged_copies_keep_every_byte \
    gpu::a_large_case_on_shared_memory_is_the_case_on_files \
    gpu::an_output_kept_on_the_device_is_the_output_read_back \
    gpu::a_hostile_library_on_shared_memory_is_caught \
    gpu_reference::an_output_judged_on_the_gpu_is_judged_as_on_the_host ) > "$O/oracle-tests.log" 2>&1
echo "exit $?" >> "$O/oracle-tests.log"
campaign kernel:hopper-baseline hopper-baseline 130 packed .carry/nvfp4-oracle
campaign kernel:hopper-baseline hopper-baseline 130 792cb3c .carry/before/nvfp4-oracle-792cb3c
campaign manifest:torch torch 170 packed .carry/nvfp4-oracle
campaign manifest:torch torch 170 792cb3c .carry/before/nvfp4-oracle-792cb3c
cd "$O" && cat at-once-1-*.log > campaigns.log && rm at-once-1-*.log && cat summary.log >> device.log \
  && rm summary.log && tar czf traces.tgz *-default-*.log.gz && rm *-default-*.log.gz
