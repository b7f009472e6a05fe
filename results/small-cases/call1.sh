#!/usr/bin/env bash
# Call 1 (one H100, build in .carry/build): a small case's cost in the worker before and after
# the delivery gate and the joined canary check (the previous worker at .carry/old_worker);
# the torch example's 2,000 small cases alone with the reference on the GPU and on the CPU;
# then the exploit catalogue's certify part with the new worker.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
mkdir -p "$OUT"
cat .carry/build > "$OUT/build.txt"
for w in old new; do
  dir=crates/harness/src/worker; [ $w = old ] && dir=.carry/old_worker
  WORKER_DIR=$dir timeout 90 python3 results/small-cases/profile_worker.py \
    examples/submissions/torch/submission.py 400 > "$OUT/profile-torch-$w.log" 2>&1
done
for ref in gpu cpu; do
  args="--manifest examples/submissions/torch/kernel.toml --seed 20261127 --cases 2000 --range-cases 0 --regime-cases 0 --quick --sanitize 0 --determinism 0 --reference $ref"
  echo "\$ certify $args" > "$OUT/small-$ref.log"
  ( time timeout 120 .carry/nvfp4-oracle certify $args --report-dir /tmp/small-$ref ) >> "$OUT/small-$ref.log" 2>&1
  grep -h "by shape class\|time by phase\|^| time" /tmp/small-$ref/*.md >> "$OUT/small-$ref.log"
done
timeout 280 bash results/exploits/run.sh certify
