#!/usr/bin/env bash
# Call 1 (one H200, the build in .carry/build): the delivery gate alone on the GPU; the GPU
# generator's keyed sums against the host's and a shared run with inputs made on the GPU
# (oracle tests); then the two default campaigns traced (campaigns.sh; this call ran the torch
# example's first).
set -u
stage=shared-inputs
. "$(dirname "$0")/../stage.sh" "$stage"
nvidia-smi --query-gpu=index,name,driver_version --format=csv > "$O/device.log"
echo "build: $(cat .carry/build 2>/dev/null)" >> "$O/device.log"
timeout 60 python3 results/small-cases/gate_on_gpu.py > "$O/gate-on-gpu.log" 2>&1
echo "exit $?" >> "$O/gate-on-gpu.log"
( time timeout 150 .carry/oracle_test --include-ignored --nocapture --test-threads 1 \
    gpu_inputs::device_keyed_sums_are_the_hosts gpu_inputs::gpu_inputs_equal_the_cpus \
    gpu::a_large_case_on_shared_memory_is_the_case_on_files ) > "$O/oracle-tests.log" 2>&1
echo "exit $?" >> "$O/oracle-tests.log"
bash results/shared-inputs/campaigns.sh
