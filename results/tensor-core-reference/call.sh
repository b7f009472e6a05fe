#!/usr/bin/env bash
# One device call: the GPU reference's GPU tests (every reference kernel against the CPU model
# bit for bit, the hand-over to the integer kernel), then the three kernels timed at
# 8192 x 8192 x 16384 and held against each other. Carried: .carry/oracle_test (the oracle
# test binary, debug info stripped) and .carry/build (the commit it was built from).
# From the repository root on the GPU machine:  bash results/tensor-core-reference/call.sh N
set -u
O=${OUT:-/tmp/tensor-core-reference-out}
N=${1:-1}
mkdir -p "$O"
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
{
  echo "build: $(cat .carry/build 2>/dev/null)"
  nvidia-smi --query-gpu=name,memory.total,clocks.max.sm,driver_version --format=csv
} > "$O/call$N-device.log" 2>&1
( time timeout 150 .carry/oracle_test --include-ignored --nocapture --test-threads 1 \
    gpu_reference::the_ ) > "$O/call$N-bit-tests.log" 2>&1
echo "exit $?" >> "$O/call$N-bit-tests.log"
( time timeout 180 .carry/oracle_test --include-ignored --nocapture --test-threads 1 \
    gpu_reference_tensor_core:: ) > "$O/call$N-8192.log" 2>&1
echo "exit $?" >> "$O/call$N-8192.log"
tail -5 "$O/call$N-bit-tests.log"
grep -E "^\||GPU reference on|exit|panicked|differs" "$O/call$N-8192.log"
