#!/usr/bin/env bash
# The step every call here shares: the oracle's GPU tests named in "$@" (the carried test
# binary .carry/oracle_test, with the carried oracle as its workers' binary), then
# hopper-baseline's and the torch example's default campaigns traced
# (results/shared-inputs/campaigns.sh). Out: $OUT/device.log, oracle-tests.log and the
# campaigns' logs.
set -u
stage=device-judge
. "$(dirname "$0")/../stage.sh" "$stage"
echo "build: $(cat .carry/build 2>/dev/null)" > "$O/device.log"
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm --format=csv >> "$O/device.log" 2>&1
( time NVFP4_ORACLE_BIN="$PWD/.carry/nvfp4-oracle" timeout 180 .carry/oracle_test \
    --include-ignored --nocapture --test-threads 1 "$@" ) > "$O/oracle-tests.log" 2>&1
echo "exit $?" >> "$O/oracle-tests.log"
bash results/shared-inputs/campaigns.sh
