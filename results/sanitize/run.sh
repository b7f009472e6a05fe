#!/usr/bin/env bash
# compute-sanitizer and the determinism check in certification, on a Hopper GPU:
#   bash results/sanitize/run.sh
# From the repository root on the GPU machine, release binary at .carry/nvfp4-oracle. Each
# certify runs with the default checks (--sanitize 2 --determinism 2); logs and certificates go
# to $OUT/sanitize, the certificates and the sanitizer's own logs (certs/sanitizer-logs/) packed
# in $OUT/sanitize-logs.tgz.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export PATH=/usr/local/cuda/bin:$PATH
B=$PWD/.carry/nvfp4-oracle
O=${OUT:-/tmp/sanitize-out}/sanitize
mkdir -p "$O/certs"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader > "$O/gpu.txt"
compute-sanitizer --version > "$O/compute-sanitizer-version.txt" 2>&1
run() {  # run NAME args...: time it, keep the log, print the summary line
  local log=$O/$1.log; shift
  echo "\$ nvfp4-oracle $*" > "$log"
  local t0=$(date +%s%N)
  timeout 300 "$B" "$@" --report-dir "$O/certs" >> "$log" 2>&1
  local rc=$?
  echo "exit $rc, $(( ($(date +%s%N) - t0) / 1000000 )) ms" >> "$log"
  echo "$(basename "$log" .log): $(grep -E '^\| (hopper|example)' "$log" | tail -1 | cut -c1-220) [$(tail -1 "$log")]"
}
# The test kernels: bugs their outputs do not show, each to be caught by one check.
for k in hopper-test-race hopper-test-uninit-shared hopper-test-oob-read; do
  run "$k" certify --kernel "$k" --cases ${TEST_CASES:-20} --seed 2026
done
# The five Hopper variants, default certification (200 cases and both checks).
for k in ${VARIANTS:-hopper-baseline hopper-warp-specialized hopper-persistent hopper-cluster-pair hopper-splitk-pair}; do
  run "$k" certify --kernel "$k" --seed 2026
done
# External kernels through the same checks: the torch submission (python under the tools) and
# the library (the C ABI in the Rust worker).
bash examples/submissions/library/build.sh > "$O/build-library.log" 2>&1 || echo "library build failed"
for m in ${EXAMPLES:-torch library}; do
  run "example-$m" certify --manifest examples/submissions/$m/kernel.toml --cases 50 --seed 2026
done
tar czf "$O/../sanitize-logs.tgz" -C "$O/certs" .
