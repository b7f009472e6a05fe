#!/usr/bin/env bash
# Call 3: the f64 kernels with fewer instructions (compare-and-select maxima, the zero terms'
# alignment without a branch), built two ways: .carry/oracle_test as committed (no occupancy
# hint) and .carry/oracle_test_lb2 with __launch_bounds__(256, 2) (128 registers, two CTAs an
# SM). Each: the bit-for-bit test and the speed table; ncu's instruction and occupancy figures
# for the first contiguous f64 launch.
set -u
export PATH=/usr/local/cuda/bin:$PATH LD_LIBRARY_PATH=/usr/local/cuda/lib64
for t in oracle_test oracle_test_lb2; do
  ( time timeout 150 .carry/$t --include-ignored --nocapture --test-threads 1 \
      gpu_reference::the_gpu_reference_is_the_cpu_model_bit_for_bit \
      gpu_reference::gpu_reference_speed_table \
      gpu_reference::the_f64_kernel_hands ) > "$OUT/$t-tests.log" 2>&1
  echo "exit $?" >> "$OUT/$t-tests.log"
  timeout 100 ncu --kernel-name regex:f64_contiguous --launch-count 1 --kill yes \
    --section SpeedOfLight --section Occupancy --section SchedulerStats --section WarpStateStats \
    .carry/$t --include-ignored --exact gpu_reference::gpu_reference_speed_table > "$OUT/$t-ncu.log" 2>&1
done
