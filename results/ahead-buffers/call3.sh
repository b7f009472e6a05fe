#!/usr/bin/env bash
# Call 3: build 0ccb9eb (call 2's plus the cross-check's CPU model computed beside the GPU
# reference). The default campaigns of hopper-baseline and the torch example with 6823350 and
# this build in turn (6823350 first: the machine's first campaign pays its cold start); then
# broken variants rejected through buffers made ahead, and the hostile library on shared
# memory, one H200.
stage=ahead-buffers
. "$(dirname "$0")/../case-overlap/common.sh"
campaign kernel:hopper-baseline hopper-baseline 100 6823350 .carry/before/nvfp4-oracle-6823350
campaign kernel:hopper-baseline hopper-baseline 100 0ccb9eb .carry/nvfp4-oracle
campaign manifest:torch torch 120 6823350 .carry/before/nvfp4-oracle-6823350
campaign manifest:torch torch 120 0ccb9eb .carry/nvfp4-oracle
for broken in hopper-test-oob-write hopper-test-missing-tile; do
  run "$broken" timeout 120 $B certify --kernel $broken --seed 20261127 --sanitize 0 \
    --determinism 0 --report-dir "$R/broken-$broken"
done
( time NVFP4_ORACLE_BIN="$PWD/.carry/nvfp4-oracle" timeout 150 .carry/oracle_test \
    --include-ignored --nocapture --test-threads 1 gpu::a_hostile_library_on_shared_memory_is_caught \
  ) > "$O/call3-oracle-tests.log" 2>&1
echo "exit $?" >> "$O/call3-oracle-tests.log"
cd "$O" && cat at-once-1-*.log > call3-campaigns.log && rm at-once-1-*.log \
  && cat summary.log >> device.log && rm summary.log && mv device.log call3-device.log \
  && mv ahead-buffers.log call3-broken.log \
  && tar czf call3-traces.tgz *-default-*.log.gz && rm *-default-*.log.gz
