#!/usr/bin/env bash
# Call 2: the planted kernels of tests/planted/conjunctions/, each wrong only inside one
# conjunction of three ranges at deployment size, in default campaigns (a fresh seed each),
# all at once on one GPU (each campaign stops at its first failure, then shrinks within 90 s).
set -u
stage=conjunctions
B=./.carry-conj/nvfp4-oracle
. "$(dirname "$0")/../stage.sh" "$stage"
{ nvidia-smi --query-gpu=name,memory.total,clocks.max.sm --format=csv
  echo "cores: $(nproc); build: $(cat .carry-conj/build)"; } > "$O/planted.log"
seed=20261205
for dir in ${ONLY:-tests/planted/conjunctions/*/}; do  # ONLY=DIR/: one of them alone
  name=$(basename "$dir"); seed=$((seed + 1))
  (
    report=$R/planted-$name; mkdir -p "$report"; started=$SECONDS
    timeout ${LIMIT:-560} $B certify --manifest "$dir/kernel.toml" --seed $seed --sanitize 0 \
      --determinism 0 --report-dir "$report" > "$R/planted-$name.log" 2>&1
    code=$?
    { echo "=== $name: certify --manifest $dir/kernel.toml --seed $seed --sanitize 0 --determinism 0"
      grep -v '^trace:' "$R/planted-$name.log" | tail -40
      echo "exit $code ($((SECONDS - started)) s)"; echo
      cat "$report"/*.md 2>/dev/null | head -120; } > "$O/planted-$name.log"
    echo "$name: exit $code ($((SECONDS - started)) s)" >> "$O/planted.log"
  ) &
done
wait
cat "$O/planted.log"
