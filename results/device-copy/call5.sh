#!/usr/bin/env bash
# Call 5: three more of the exact campaigns on Hopper (one test per kernel since this work),
# with call 4's build, one H200.
stage=device-copy
. "$(dirname "$0")/../case-overlap/common.sh"
for test in hopper_warp_specialized_certifies_exactly_on_a_hopper_gpu \
    hopper_cluster_pair_certifies_exactly_on_a_hopper_gpu \
    hopper_splitk_pair_certifies_exactly_on_a_hopper_gpu; do
  ( time NVFP4_ORACLE_WORKER="$PWD/.carry/nvfp4-oracle" timeout 165 .carry/oracle_test \
      --include-ignored --nocapture --exact "gpu::$test" ) >> "$O/call5-exact-tests.log" 2>&1
  echo "$test: exit $?" >> "$O/call5-exact-tests.log"
done
mv "$O/device.log" "$O/call5-device.log"
