#!/usr/bin/env bash
# Diagnosis on a Hopper GPU: the GPU test kernels and the examples' deliberately broken copies
# through the campaign, shape and data shrinking, diagnosis and localization:
#   bash results/diagnosis-gpu/run.sh
# From the repository root on the GPU machine, release binary at .carry/nvfp4-oracle. The
# table (scripts/diagnosis_table.py) and the certificates go to $OUT/diagnosis-gpu.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export PATH=/usr/local/cuda/bin:$PATH
B=$PWD/.carry/nvfp4-oracle
O=${OUT:-/tmp/diagnosis-out}/diagnosis-gpu
mkdir -p "$O/certs"
S=examples/submissions
bash $S/library/build.sh > "$O/build-library.log" 2>&1 || echo "library build failed"
# compute-sanitizer and the determinism check are left out here (--sanitize 0 --determinism 0): this run is about
# wrong outputs.
timeout 300 $B certify --kernel 'hopper-test-*' --cases 50 --seed 2026 --sanitize 0 --determinism 0 \
  --report-dir "$O/certs" > "$O/test-kernels.log" 2>&1; echo "test kernels: exit $?"
for m in torch triton cuda_inline library; do
  timeout 200 $B certify --manifest $S/$m/broken/kernel.toml --cases 200 --seed 2026 --sanitize 0 --determinism 0 \
    --report-dir "$O/certs" > "$O/broken-$m.log" 2>&1; echo "broken $m: exit $?"
done
python3 scripts/diagnosis_table.py "$O/certs" > "$O/table.md"
rm -f "$O"/certs/*.safetensors
cat "$O/table.md" | cut -c1-250
tar czf "$O/../diagnosis-gpu.tgz" -C "$O" .
