#!/usr/bin/env bash
# Call 1: the default campaigns of hopper-baseline and the torch example, before (a4435a2: band
# triples up to 2^26 elements, 1,000 range cases) and after (the public models' strata, every
# band triple within the per-case bound, 1,200 range cases), one after another on one GPU, then
# each binary's plan sizes. From the repository root on the GPU machine, binaries carried in
# .carry-conj/. The torch example's campaign before runs only with TORCH_BEFORE=1.
set -u
stage=conjunctions
B=./.carry-conj/nvfp4-oracle
. "$(dirname "$0")/../stage.sh" "$stage"
SEED=20261205
{ nvidia-smi --query-gpu=name,memory.total,clocks.max.sm --format=csv
  echo "cores: $(nproc); after: $(cat .carry-conj/build)"; } > "$O/device.log"
campaign() {  # NAME BINARY TIMEOUT ARGS...
  local name=$1 bin=$2 limit=$3; shift 3
  local report=$R/$name; mkdir -p "$report"
  local started=$SECONDS
  timeout "$limit" "$bin" certify "$@" --seed $SEED --sanitize 0 --determinism 0 \
    --report-dir "$report" > "$R/$name.log" 2>&1
  local code=$?
  { echo "=== $name: certify $* --seed $SEED --sanitize 0 --determinism 0"
    grep -v '^trace:' "$R/$name.log" | tail -30
    echo "exit $code ($((SECONDS - started)) s command to exit)"
    grep -h "by shape class\|time by phase\|^| machine\|^| time\|range case" "$report"/*.md 2>/dev/null
    echo; } >> "$O/campaigns.log"
  echo "$name: exit $code ($((SECONDS - started)) s)" >> "$O/device.log"
}
campaign hopper-before .carry-conj/nvfp4-oracle-a4435a2 ${BEFORE_LIMIT:-90} --kernel hopper-baseline
campaign hopper-after $B ${AFTER_LIMIT:-150} --kernel hopper-baseline
campaign torch-after $B ${TORCH_LIMIT:-120} --manifest examples/submissions/torch/kernel.toml
[ -n "${TORCH_BEFORE:-}" ] && campaign torch-before .carry-conj/nvfp4-oracle-a4435a2 120 \
  --manifest examples/submissions/torch/kernel.toml
cat "$O/device.log"
