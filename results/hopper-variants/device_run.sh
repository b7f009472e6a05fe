#!/usr/bin/env bash
# One device call: certify every Hopper variant (>= 2000 cases, interval check), replay each
# declared schedule at zero tolerance (--exact), the deliberately broken test kernels, then bench.
# Run from the repository root on the GPU machine, with the release binary at .carry/.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
B=.carry/nvfp4-oracle
R=/tmp/results; E=/tmp/exact; T=/tmp/tests
mkdir -p $R $E $T
V="hopper-baseline hopper-persistent hopper-warp-specialized hopper-cluster-pair hopper-splitk-pair hopper-test-persistent-7-ctas"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $R/variants.md
$B variants >> $R/variants.md 2>&1
for v in $V; do
  ( time $B certify --kernel $v --cases 2000 --seed 2026 --report-dir $R ) > $R/certify-$v.log 2>&1
  echo "certify exit $?" >> $R/certify-$v.log
done
for v in $V hopper-test-reversed-k; do
  ( time $B certify --exact --kernel $v --cases 500 --seed 2027 --report-dir $E ) > $E/certify-exact-$v.log 2>&1
  echo "certify --exact exit $?" >> $E/certify-exact-$v.log
done
( time $B certify --kernel 'hopper-test-oob-write' --kernel 'hopper-test-missing-tile' --kernel 'hopper-test-spin' --cases 20 --seed 2026 --report-dir $T ) > $T/certify-test-kernels.log 2>&1
echo "certify exit $?" >> $T/certify-test-kernels.log
$B bench --reps 50 --report-dir $R > $R/bench.log 2>&1
echo "bench exit $?" >> $R/bench.log
# The GPU tests (tests/oracle/gpu.rs), from a test binary built with the release binary and carried as
# .carry/oracle_test (`cargo test --release --test oracle --no-run` prints its path).
if [ -x .carry/oracle_test ]; then
  NVFP4_ORACLE_WORKER=.carry/nvfp4-oracle .carry/oracle_test gpu:: --include-ignored > $R/gpu-tests.log 2>&1
  echo "gpu tests exit $?" >> $R/gpu-tests.log
fi
rm -f $R/*.safetensors $E/*.safetensors $T/*.safetensors
tar czf $OUT/results.tgz -C /tmp results exact tests
cat $R/certify-*.log $E/certify-exact-*.log $T/certify-test-kernels.log | grep -E "^\| hopper|exit|real" ; tail -30 $R/bench.log; tail -3 $R/gpu-tests.log
