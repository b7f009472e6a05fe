#!/usr/bin/env bash
# The GPU tests through shared runs, outputs kept and judged on the device, and a Python
# submission's whole campaign (its broken copy rejected), with build 0ccb9eb: one H200.
stage=ahead-buffers
. "$(dirname "$0")/../case-overlap/common.sh"
( time NVFP4_ORACLE_BIN="$PWD/.carry/nvfp4-oracle" timeout 540 .carry/oracle_test \
    --include-ignored --nocapture --test-threads 1 \
    gpu::an_output_kept_on_the_device_is_the_output_read_back \
    gpu::a_batch_made_and_judged_on_the_device_is_the_hosts \
    gpu_reference::an_output_judged_on_the_gpu_is_judged_as_on_the_host \
    external_kernels_gpu::a_python_submissions_large_case_on_shared_memory_is_its_case_on_files \
    external_kernels_gpu::python_example_torch_certified_and_its_broken_copy_rejected \
  ) > "$O/gpu-tests.log" 2>&1
echo "exit $?" >> "$O/gpu-tests.log"
mv "$O/device.log" "$O/gpu-tests-device.log"
