#!/usr/bin/env bash
# Call 2 (one H200, the build in .carry/build: call 1's, and canaries and poison filled by
# copies from pinned patterns, crates/harness/src/gpu/device_fill.rs, no memset kernel): the
# fenced buffers' fills, device copies, a shared run with its out-of-bounds writer and the
# output judged on the GPU (oracle tests), then the two default campaigns traced.
set -u
bash "$(dirname "$0")/tests_and_campaigns.sh" \
    gpu::fenced_fills_write_every_byte_they_promise \
    gpu::a_device_copy_sees_one_changed_byte \
    gpu::staged_copies_keep_every_byte \
    gpu::a_large_case_on_shared_memory_is_the_case_on_files \
    gpu::a_batch_made_and_judged_on_the_device_is_the_hosts \
    gpu_reference::an_output_judged_on_the_gpu_is_judged_as_on_the_host
