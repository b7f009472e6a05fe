#!/usr/bin/env bash
# Call 3 (one H200, the build in .carry/build: call 2's, and a shared run's input copies made by
# the upload (a second copy of each pinned chunk, Pristine::uploaded) instead of on the device):
# the fills, device copies, a shared run with its out-of-bounds writer, the hostile libraries
# (an input changed is told so), the output judged on the GPU, then the two default campaigns.
set -u
bash "$(dirname "$0")/tests_and_campaigns.sh" \
    gpu::fenced_fills_write_every_byte_they_promise \
    gpu::a_device_copy_sees_one_changed_byte \
    gpu::staged_copies_keep_every_byte \
    gpu::a_large_case_on_shared_memory_is_the_case_on_files \
    gpu::a_batch_made_and_judged_on_the_device_is_the_hosts \
    gpu::a_hostile_library_on_shared_memory_is_caught \
    gpu_reference::an_output_judged_on_the_gpu_is_judged_as_on_the_host
