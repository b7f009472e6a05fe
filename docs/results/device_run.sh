#!/usr/bin/env bash
# One device call: certify the baseline (>= 2000 cases), the broken test kernels, then bench.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
B=.carry/nvfp4-oracle
R=$OUT/results
mkdir -p $R
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $R/variants.md
{ $B variants; } >> $R/variants.md 2>&1
( time $B certify --kernel hopper-baseline --cases 2000 --seed 2026 --report-dir $R ) > $R/certify-hopper-baseline.log 2>&1
echo "certify exit $?" >> $R/certify-hopper-baseline.log
( time $B certify --kernel 'hopper-test-*' --cases 20 --seed 2026 --report-dir $OUT/tests ) > $R/certify-test-kernels.log 2>&1
echo "certify exit $?" >> $R/certify-test-kernels.log
cat $OUT/tests/*.md >> $R/certify-test-kernels.log
$B bench --reps 50 --report-dir $R > $R/bench.log 2>&1
echo "bench exit $?" >> $R/bench.log
rm -f $R/*.safetensors
ls -la $R
