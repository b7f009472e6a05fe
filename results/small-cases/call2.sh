#!/usr/bin/env bash
# Call 2 (one H100, build in .carry/build): the torch example's 2,000 small cases alone, traced
# (each batch's files, the worker's answer, the outputs read, the models beside it); then the
# exploits that test the delivery on the caller's stream, with the delivery gate.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
mkdir -p "$OUT"
cat .carry/build > "$OUT/build.txt"
args="--manifest examples/submissions/torch/kernel.toml --seed 20261127 --cases 2000 --range-cases 0 --regime-cases 0 --quick --sanitize 0 --determinism 0 --reference gpu"
echo "\$ NVFP4_ORACLE_TRACE=1 certify $args" > "$OUT/small-traced.log"
( time NVFP4_ORACLE_TRACE=1 timeout 120 .carry/nvfp4-oracle certify $args --report-dir /tmp/small ) > "$OUT/small-traced-stderr.log" 2>&1
grep -v "^trace" "$OUT/small-traced-stderr.log" >> "$OUT/small-traced.log"
grep -h "by shape class\|time by phase\|^| time" /tmp/small/*.md >> "$OUT/small-traced.log"
gzip "$OUT/small-traced-stderr.log"
list=side_stream,patch_synchronize,patch_synchronize_builtin
( time env EXPLOIT=$list NVFP4_ORACLE_BIN="$PWD/.carry/nvfp4-oracle" timeout 300 .carry/oracle_test exploits::every --include-ignored --nocapture ) > "$OUT/exploits-delivery.log" 2>&1
