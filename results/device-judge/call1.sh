#!/usr/bin/env bash
# Call 1 (one H200, the build in .carry/build: outputs of at least 2^20 elements judged on the
# GPU against a reference kept there, crates/harness/src/gpu/device_reference.rs): the GPU
# reference's tests (bit for bit with the CPU model; an output judged on the GPU as on the host),
# a shared run, then hopper-baseline's and the torch example's default campaigns traced.
set -u
bash "$(dirname "$0")/tests_and_campaigns.sh" \
    gpu_reference::the_gpu_reference_is_the_cpu_model_bit_for_bit \
    gpu_reference::an_output_judged_on_the_gpu_is_judged_as_on_the_host \
    gpu::a_large_case_on_shared_memory_is_the_case_on_files
