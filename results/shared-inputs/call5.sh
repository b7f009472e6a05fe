#!/usr/bin/env bash
# Call 5 (one H200, the build in .carry/build: the GPU reference's and shared runs' copies
# through pinned memory, crates/harness/src/gpu/staging.rs; the inputs uploaded, not made on the
# GPU): the staged copies, the GPU reference and a shared run (oracle tests), then
# hopper-baseline's and the torch example's default campaigns traced.
set -u
stage=shared-inputs
. "$(dirname "$0")/../stage.sh" "$stage"
echo "build: $(cat .carry/build 2>/dev/null)" > "$O/device.log"
( time NVFP4_ORACLE_BIN="$PWD/.carry/nvfp4-oracle" timeout 120 .carry/oracle_test --include-ignored \
    --nocapture --test-threads 1 gpu::staged_copies_keep_every_byte \
    gpu_reference::the_gpu_reference_is_the_cpu_model_bit_for_bit \
    gpu::a_large_case_on_shared_memory_is_the_case_on_files ) > "$O/oracle-tests.log" 2>&1
echo "exit $?" >> "$O/oracle-tests.log"
bash results/shared-inputs/campaigns.sh
