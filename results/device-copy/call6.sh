#!/usr/bin/env bash
# Call 6: the persistent variant's exact campaign on Hopper, with call 4's build, one H200.
stage=device-copy
. "$(dirname "$0")/../case-overlap/common.sh"
test=hopper_persistent_certifies_exactly_on_a_hopper_gpu
( time NVFP4_ORACLE_WORKER="$PWD/.carry/nvfp4-oracle" timeout 170 .carry/oracle_test \
    --include-ignored --nocapture --exact "gpu::$test" ) >> "$O/call6-exact-tests.log" 2>&1
echo "$test: exit $?" >> "$O/call6-exact-tests.log"
mv "$O/device.log" "$O/call6-device.log"
