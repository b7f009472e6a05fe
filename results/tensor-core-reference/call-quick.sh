#!/usr/bin/env bash
# A short device call (about two minutes on the GPU): the GPU reference's bit-for-bit test
# against the CPU model (every edge shape, distribution, problem and K order, the tensor-core,
# f64 and integer kernels), then the tensor-core kernel against the f64 kernel at
# 8192 x 8192 x 16384 in one K order, then the hand-over to the integer kernel. Carried:
# .carry/oracle_test (the oracle test binary, debug info stripped), .carry/build (its commit).
# From the repository root on the GPU machine:  bash results/tensor-core-reference/call-quick.sh N
set -u
O=${OUT:-/tmp/tensor-core-reference-out}
N=${1:-1}
mkdir -p "$O"
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
{
  echo "build: $(cat .carry/build 2>/dev/null)"
  nvidia-smi --query-gpu=name,memory.total,clocks.max.sm,driver_version --format=csv
} > "$O/call$N-device.log" 2>&1
t() {  # NAME LIMIT FILTER: one test, its output and exit code in $O/callN-NAME.log
  ( time timeout "$2" .carry/oracle_test --include-ignored --nocapture --test-threads 1 --exact "$3" ) \
    > "$O/call$N-$1.log" 2>&1
  echo "exit $?" >> "$O/call$N-$1.log"
  echo "== $1"; grep -E "^\||GPU reference on|elements|exit|panicked|differs|^real" "$O/call$N-$1.log" | cut -c1-300
}
t bits 75 gpu_reference::the_gpu_reference_is_the_cpu_model_bit_for_bit
t 8192 60 gpu_reference_tensor_core::tensor_core_reference_against_f64_at_8192_one_order
t hand-over 25 gpu_reference::the_f64_kernel_hands_what_it_cannot_prove_exact_to_the_integer_kernel
cat "$O/call$N-device.log"
