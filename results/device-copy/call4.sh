#!/usr/bin/env bash
# Call 4: call 3's build plus the comparisons' flags in device memory of their own (not the
# stream's pool, whose reuse of the GPU reference's freed memory made them wait for its
# kernel). The default campaigns of hopper-baseline and the torch example with 1ddcadb and this
# build in turn; the GPU tests of shared runs and device copies with this build; then two of the
# exact campaigns on Hopper, now one test per kernel, one H200.
stage=device-copy
. "$(dirname "$0")/../case-overlap/common.sh"
campaign kernel:hopper-baseline hopper-baseline 100 1ddcadb .carry/before/nvfp4-oracle-1ddcadb
campaign kernel:hopper-baseline hopper-baseline 100 flags .carry/nvfp4-oracle
campaign manifest:torch torch 120 1ddcadb .carry/before/nvfp4-oracle-1ddcadb
campaign manifest:torch torch 120 flags .carry/nvfp4-oracle
( time NVFP4_ORACLE_BIN="$PWD/.carry/nvfp4-oracle" timeout 100 .carry/oracle_test \
    --include-ignored --nocapture --test-threads 1 \
    gpu::a_large_case_on_shared_memory_is_the_case_on_files \
    gpu::a_hostile_library_on_shared_memory_is_caught \
    gpu::an_output_kept_on_the_device_is_the_output_read_back \
    gpu::a_device_copy_sees_one_changed_byte \
  ) > "$O/call4-oracle-tests.log" 2>&1
echo "exit $?" >> "$O/call4-oracle-tests.log"
for test in hopper_baseline_certifies_exactly_on_a_hopper_gpu \
    hopper_reversed_k_is_caught_by_the_replay_on_a_hopper_gpu; do
  ( time NVFP4_ORACLE_WORKER="$PWD/.carry/nvfp4-oracle" timeout 150 .carry/oracle_test \
      --include-ignored --nocapture --exact "gpu::$test" ) >> "$O/call4-exact-tests.log" 2>&1
  echo "$test: exit $?" >> "$O/call4-exact-tests.log"
done
cd "$O" && cat at-once-1-*.log > call4-campaigns.log && rm at-once-1-*.log \
  && cat summary.log >> device.log && rm summary.log && mv device.log call4-device.log \
  && tar czf call4-traces.tgz *-default-*.log.gz && rm *-default-*.log.gz
