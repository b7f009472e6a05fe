#!/usr/bin/env bash
# One device call (one H100 or H200, torch there): the thirteen planted wrong-problem kernels of
# tests/oracle/planted_wrong_problems.rs, each in a default campaign (--sanitize 0
# --determinism 0, a seed each), one after another: verdict, minimal case, wrong problem,
# region, seconds from the first failing case to the end of its failure's work. About 13 x 30-120 s:
# split it with PLANTED=NAME,NAME across calls. Carried in .carry/: oracle_test (the oracle test
# binary, stripped), nvfp4-oracle (the release tool, stripped), build (their commit).
#   bash results/wrong-problems-gpu/call.sh
set -u
O=${OUT:-/tmp/wrong-problems-gpu-out}
mkdir -p "$O"
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export PATH=/usr/local/cuda/bin:$PATH
{ echo "build: $(cat .carry/build 2>/dev/null)"
  nvidia-smi --query-gpu=name,memory.total,clocks.max.sm,driver_version --format=csv; } > "$O/device.log" 2>&1
( time NVFP4_ORACLE_BIN=$PWD/.carry/nvfp4-oracle timeout ${LIMIT:-570} .carry/oracle_test \
    --include-ignored --nocapture --test-threads 1 \
    planted_wrong_problems::planted_wrong_problems_are_rejected_shrunk_and_named_on_a_gpu ) \
    > "$O/planted.log" 2>&1
echo "exit $?" >> "$O/planted.log"
grep -E "^\||exit|panicked|not as expected|^real" "$O/planted.log" | cut -c1-400
cat "$O/device.log"
