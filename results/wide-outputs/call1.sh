#!/usr/bin/env bash
# Call 1: a case whose output is large and whose inputs are small (K = 16 to 64, say) runs on
# shared memory as a case of large inputs does, not on files; and the trace's clock starts
# with the process. The GPU test of shared runs against files (now with such a wide case too)
# and of kept outputs; then the two default campaigns, this build and f3258e6 in turn.
stage=wide-outputs
. "$(dirname "$0")/../case-overlap/common.sh"
( time NVFP4_ORACLE_BIN="$PWD/.carry/nvfp4-oracle" timeout 200 .carry/oracle_test \
    --include-ignored --nocapture --test-threads 1 \
    gpu::a_large_case_on_shared_memory_is_the_case_on_files \
    gpu::an_output_kept_on_the_device_is_the_output_read_back ) > "$O/oracle-tests.log" 2>&1
echo "exit $?" >> "$O/oracle-tests.log"
campaign kernel:hopper-baseline hopper-baseline 130 wide .carry/nvfp4-oracle
campaign kernel:hopper-baseline hopper-baseline 130 f3258e6 .carry/before/nvfp4-oracle-f3258e6
campaign manifest:torch torch 170 wide .carry/nvfp4-oracle
campaign manifest:torch torch 170 f3258e6 .carry/before/nvfp4-oracle-f3258e6
cd "$O" && cat at-once-1-*.log > campaigns.log && rm at-once-1-*.log && cat summary.log >> device.log \
  && rm summary.log && tar czf traces.tgz *-default-*.log.gz && rm *-default-*.log.gz
