#!/usr/bin/env bash
# Call 7 (one H200, the build in .carry/build: the committed code with its two import circles
# broken, `check` moved to gpu/mod.rs and DeviceReference to exact_reference.rs, nothing else):
# the output judged on the GPU, the fills, and a shared run with its out-of-bounds writer.
set -u
stage=device-judge
. "$(dirname "$0")/../stage.sh" "$stage"
echo "build: $(cat .carry/build 2>/dev/null)" > "$O/device.log"
( time NVFP4_ORACLE_BIN="$PWD/.carry/nvfp4-oracle" timeout 100 .carry/oracle_test \
    --include-ignored --nocapture --test-threads 1 \
    gpu_reference::an_output_judged_on_the_gpu_is_judged_as_on_the_host \
    gpu::fenced_fills_write_every_byte_they_promise \
    gpu::a_large_case_on_shared_memory_is_the_case_on_files ) > "$O/oracle-tests.log" 2>&1
echo "exit $?" >> "$O/oracle-tests.log"
