#!/usr/bin/env bash
# One H100 (x1 host), from the repository root, with .carry/nvfp4-oracle (this build),
# .carry/before/nvfp4-oracle (the build before batches were made and judged on the GPU) and
# .carry/oracle_test (this build's test binary): the GPU tests of the device path, then each
# example benched at the four benchmark shapes by the build before and by this one, traced.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export PATH=/usr/local/cuda/bin:$PATH
export PYTHONUNBUFFERED=1
O=${OUT:?run on the device machine, which sets OUT}; mkdir -p "$O"
R=${R:-$HOME/bench-device}  # the reports (the logs name it $R)
nvidia-smi --query-gpu=index,name,driver_version,clocks.max.sm --format=csv > "$O/host.log"
echo "cores: $(nproc); build: $(cat .carry/build)" >> "$O/host.log"
( time timeout 150 .carry/oracle_test gpu::a_batch_made gpu_reference::the_gpu_reference_is \
    --include-ignored --nocapture --test-threads 1 ) > "$O/gpu-tests.log" 2>&1
echo "gpu tests exit $?" >> "$O/host.log"
bash examples/submissions/library/build.sh >> "$O/host.log" 2>&1
SHAPES=${SHAPES:-256x4096x7168,512x4096x7168,256x3072x4096,512x3072x7168}
bench() {  # bench LABEL BINARY EXAMPLE
  local started=$SECONDS
  { echo "=== $1: $2 bench --manifest examples/submissions/$3/kernel.toml --shapes $SHAPES"
    NVFP4_ORACLE_TRACE=1 timeout ${BENCH_TIMEOUT:-200} $2 bench --manifest examples/submissions/$3/kernel.toml \
      --shapes "$SHAPES" --no-torch --force-untrusted --reps 20 --report-dir "$R/$1" 2>&1
    echo "exit $? ($((SECONDS - started)) s)"; } > "$O/$1.log"
  cp "$R/$1/bench.md" "$O/$1.md" 2>/dev/null
  cp "$R/$1/bench.json" "$O/$1.json" 2>/dev/null
  tail -1 "$O/$1.log"
}
for job in ${JOBS:-after-torch:.carry/nvfp4-oracle:torch before-torch:.carry/before/nvfp4-oracle:torch after-library:.carry/nvfp4-oracle:library}; do
  IFS=: read -r label binary example <<< "$job"
  echo "$label: $(bench "$label" "$binary" "$example")" | tee -a "$O/host.log"
done
