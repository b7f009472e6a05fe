#!/usr/bin/env bash
# Call 1: a shared run's buffers made ahead on the input makers' threads, the GPU reference
# reading their inputs' copies. The GPU tests of the shared runs, the staged copies and the GPU
# reference first; then the default campaigns of hopper-baseline and the torch example with
# this build and 6823350 in turn, one H200.
stage=ahead-buffers
. "$(dirname "$0")/../case-overlap/common.sh"
( time NVFP4_ORACLE_BIN="$PWD/.carry/nvfp4-oracle" timeout 200 .carry/oracle_test \
    --include-ignored --nocapture --test-threads 1 \
    gpu::a_large_case_on_shared_memory_is_the_case_on_files \
    gpu::staged_copies_keep_every_byte \
    gpu_inputs::gpu_inputs_equal_the_cpus_byte_for_byte \
    gpu_reference::the_gpu_reference_is_the_cpu_model_bit_for_bit \
    gpu_reference::the_f64_kernel_hands_what_it_cannot_prove_exact_to_the_integer_kernel \
  ) > "$O/call1-oracle-tests.log" 2>&1
echo "exit $?" >> "$O/call1-oracle-tests.log"
campaign kernel:hopper-baseline hopper-baseline 100 ahead .carry/nvfp4-oracle
campaign kernel:hopper-baseline hopper-baseline 100 6823350 .carry/before/nvfp4-oracle-6823350
campaign manifest:torch torch 120 ahead .carry/nvfp4-oracle
campaign manifest:torch torch 120 6823350 .carry/before/nvfp4-oracle-6823350
cd "$O" && cat at-once-1-*.log > call1-campaigns.log && rm at-once-1-*.log \
  && cat summary.log >> device.log && rm summary.log && mv device.log call1-device.log \
  && tar czf call1-traces.tgz *-default-*.log.gz && rm *-default-*.log.gz
