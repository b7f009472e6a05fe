#!/usr/bin/env bash
# Call 8 (one H100; .carry/before/nvfp4-oracle is build 21311fe, .carry/nvfp4-oracle this build):
# the torch example's campaign without range cases, before and after the Python worker's
# mapping pool and one-read checks, in one call; then this build's default campaign traced
# (a large case's steps on shared memory traced); then the Python examples' GPU test.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
for build in before after; do
  b=./.carry/nvfp4-oracle; [ $build = before ] && b=./.carry/before/nvfp4-oracle
  B=$b NVFP4_ORACLE_TRACE=1 JOBS='manifest:torch' AT_ONCE=1 JOB_TIMEOUT=120 \
    ARGS='--sanitize 0 --determinism 0 --range-cases 0' bash results/throughput/run.sh
  mv "$OUT/torch-gpu-0-at-once-1.log.gz" "$OUT/torch-no-range-$build.log.gz"
  mv "$OUT/at-once-1.log" "$OUT/at-once-1-no-range-$build.log"
done
NVFP4_ORACLE_TRACE=1 JOBS='manifest:torch' AT_ONCE=1 JOB_TIMEOUT=250 bash results/throughput/run.sh
mv "$OUT/torch-gpu-0-at-once-1.log.gz" "$OUT/torch-default-after.log.gz"
( time NVFP4_ORACLE_BIN=$PWD/.carry/nvfp4-oracle timeout $((585 - SECONDS)) .carry/oracle_test \
    external_kernels_gpu::python_examples --include-ignored --nocapture ) > "$OUT/gpu-test-python-examples.log" 2>&1
echo "gpu test exit $?" >> "$OUT/summary.log"
tail -3 "$OUT/gpu-test-python-examples.log"
