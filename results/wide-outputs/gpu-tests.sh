#!/usr/bin/env bash
# The GPU tests that go through the staged copies, the GPU reference, shared runs and whole
# campaigns, with this folder's last build (6823350): one H200. Out: gpu-tests.log.
stage=wide-outputs
. "$(dirname "$0")/../case-overlap/common.sh"
( time NVFP4_ORACLE_BIN="$PWD/.carry/nvfp4-oracle" timeout 470 .carry/oracle_test \
    --include-ignored --nocapture --test-threads 1 \
    gpu::a_batch_made_and_judged_on_the_device_is_the_hosts \
    gpu::a_device_copy_sees_one_changed_byte \
    gpu::fenced_fills_write_every_byte_they_promise \
    gpu_inputs::gpu_inputs_equal_the_cpus_byte_for_byte \
    gpu_reference::the_gpu_reference_is_the_cpu_model_bit_for_bit \
    gpu_reference::the_f64_kernel_hands_what_it_cannot_prove_exact_to_the_integer_kernel \
    external_kernels_gpu::a_python_submissions_large_case_on_shared_memory_is_its_case_on_files \
    external_kernels_gpu::python_example_torch_certified_and_its_broken_copy_rejected \
    gpu::hopper_variants_certify_exactly_on_a_hopper_gpu ) > "$O/gpu-tests.log" 2>&1
echo "exit $?" >> "$O/gpu-tests.log"
