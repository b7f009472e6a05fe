#!/usr/bin/env bash
# The small-cases step of calls 2 and 4: the torch example's 2,000 small cases alone (no range,
# regime or production cases), traced. Out: $OUT/small-traced.log (the command, the summary,
# the certificate's time rows) and $OUT/small-traced-stderr.log.gz (every trace line).
set -u
args="--manifest examples/submissions/torch/kernel.toml --seed 20261127 --cases 2000 --range-cases 0 --regime-cases 0 --quick --sanitize 0 --determinism 0 --reference gpu"
echo "\$ NVFP4_ORACLE_TRACE=1 certify $args" > "$OUT/small-traced.log"
( time NVFP4_ORACLE_TRACE=1 timeout 120 .carry/nvfp4-oracle certify $args --report-dir /tmp/small ) > "$OUT/small-traced-stderr.log" 2>&1
grep -v "^trace" "$OUT/small-traced-stderr.log" >> "$OUT/small-traced.log"
grep -h "by shape class\|time by phase\|^| time" /tmp/small/*.md >> "$OUT/small-traced.log"
gzip "$OUT/small-traced-stderr.log"
