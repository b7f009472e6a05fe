#!/usr/bin/env bash
# Call 2 (one H100, build in .carry/build): the torch example's 2,000 small cases alone, traced
# (each batch's files, the worker's answer, the outputs read, the models beside it); then the
# exploits that test the delivery on the caller's stream, with the delivery gate.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
mkdir -p "$OUT"
cat .carry/build > "$OUT/build.txt"
bash results/small-cases/small_traced.sh
list=side_stream,patch_synchronize,patch_synchronize_builtin
( time env EXPLOIT=$list NVFP4_ORACLE_BIN="$PWD/.carry/nvfp4-oracle" timeout 300 .carry/oracle_test exploits::every --include-ignored --nocapture ) > "$OUT/exploits-delivery.log" 2>&1
