#!/usr/bin/env bash
# Default campaigns alone and several at once on one GPU host, each process given one GPU by
# CUDA_VISIBLE_DEVICES and nothing else: no taskset, so each takes its share of the host's
# cores by itself (crates/harness/src/cores.rs). From the repository root on the GPU machine,
# the release binary at .carry/nvfp4-oracle:
#   JOBS='manifest:torch kernel:hopper-baseline' AT_ONCE=1 bash results/throughput/run.sh
#   JOBS='manifest:torch' AT_ONCE=4 bash results/throughput/run.sh
# Each job (kernel:NAME, a built-in variant; manifest:NAME, examples/submissions/NAME/kernel.toml)
# runs AT_ONCE times at the same time on GPUs 0..AT_ONCE-1, jobs one after another, with
# --seed $SEED and $ARGS. Out: $OUT/at-once-N.log (each run's command, stderr, time, exit code
# and the certificate's time rows), $OUT/summary.log.
set -u
stage=throughput
. "$(dirname "$0")/../stage.sh" "$stage"
SEED=${SEED:-20261127}
ARGS=${ARGS:---sanitize 0 --determinism 0}
AT_ONCE=${AT_ONCE:-1}
{ nvidia-smi --query-gpu=index,name,driver_version,clocks.max.sm --format=csv
  echo "cores: $(nproc); build: $(cat .carry/build 2>/dev/null)"; } >> "$O/summary.log"
for job in ${JOBS:?JOBS='manifest:torch kernel:hopper-baseline'}; do
  kind=${job%%:*} name=${job#*:}
  case $kind in
    kernel) args="--kernel $name" ;;
    manifest) args="--manifest examples/submissions/$name/kernel.toml" ;;
  esac
  for ((gpu = 0; gpu < AT_ONCE; gpu++)); do
    (
      report=$R/at-once-$AT_ONCE/$name-gpu-$gpu log=$R/$name-gpu-$gpu.log
      mkdir -p "$report"
      started=$SECONDS
      CUDA_VISIBLE_DEVICES=$gpu timeout ${JOB_TIMEOUT:-560} \
        $B certify $args --seed "$SEED" $ARGS --report-dir "$report" > "$log" 2>&1
      code=$?
      {
        echo; echo "=== $job on GPU $gpu, $AT_ONCE at once"
        echo "\$ CUDA_VISIBLE_DEVICES=$gpu certify $args --seed $SEED $ARGS"
        grep -v '^trace:' "$log"
        echo "exit $code ($((SECONDS - started)) s)"
        grep -h "by shape class\|time by phase\|^| machine\|^| time" "$report"/*.md 2>/dev/null
      } >> "$O/at-once-$AT_ONCE.log"
      echo "$job GPU $gpu ($AT_ONCE at once): exit $code ($((SECONDS - started)) s)" >> "$O/summary.log"
      # With NVFP4_ORACLE_TRACE=1 the whole log (every case's phases) comes back compressed.
      [ -n "${NVFP4_ORACLE_TRACE:-}" ] && gzip -c "$log" > "$O/$name-gpu-$gpu-at-once-$AT_ONCE.log.gz"
    ) &
  done
  wait
done
cat "$O/summary.log"
