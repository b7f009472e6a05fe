#!/usr/bin/env bash
# Call 2 (one H200, the build in .carry/build): the delivery gate alone (the test's setup fixed),
# the oracle's shared-run test with the worker binary named, then hopper-baseline's and the
# torch example's default campaigns traced, each shared run's steps timed.
set -u
stage=shared-inputs
. "$(dirname "$0")/../stage.sh" "$stage"
echo "build: $(cat .carry/build 2>/dev/null)" > "$O/device.log"
timeout 60 python3 results/small-cases/gate_on_gpu.py > "$O/gate-on-gpu.log" 2>&1
echo "exit $?" >> "$O/gate-on-gpu.log"
( time NVFP4_ORACLE_BIN="$PWD/.carry/nvfp4-oracle" timeout 100 .carry/oracle_test --include-ignored \
    --nocapture gpu::a_large_case_on_shared_memory_is_the_case_on_files ) > "$O/oracle-tests.log" 2>&1
echo "exit $?" >> "$O/oracle-tests.log"
bash results/shared-inputs/campaigns.sh
