#!/usr/bin/env bash
# Default campaigns with the pairwise shape ranges on a GPU host of several cards, one lane per
# GPU (16 cores each, `taskset`), jobs in a lane one after another. From the repository root on
# the GPU machine, the release binary at .carry/nvfp4-oracle and the tool's test binary
# (`cargo test --release --test oracle --no-run` prints its path) at .carry/oracle_test:
#   LANES='kernel:hopper-baseline kernel:hopper-persistent;manifest:torch;conj:experts_64;conj:mid_mnk' \
#     bash results/coverage/run.sh
# A job: kernel:NAME (a built-in variant), manifest:NAME (examples/submissions/NAME/kernel.toml)
# or conj:NAME (tests/regimes/conj_NAME.py, planted: must be rejected inside its box). Every
# campaign: --seed $SEED (default 20261127) and $ARGS (default --sanitize 0 --determinism 0,
# as the earlier campaign-time tables). Out: $OUT/lane-I.log (each job's command, output, time and exit code,
# then its certificate's Markdown), $OUT/summary.log.
set -u
stage=${STAGE:-coverage}  # the folder under $OUT and /tmp (results/throughput runs it as `throughput`)
. "$(dirname "$0")/../stage.sh" "$stage"
SEED=${SEED:-20261127}
ARGS=${ARGS:---sanitize 0 --determinism 0}
nvidia-smi --query-gpu=index,name,driver_version,clocks.max.sm --format=csv >> "$O/summary.log"
echo "cores: $(nproc); build: $(cat .carry/build 2>/dev/null)" >> "$O/summary.log"
[ -e examples/submissions/library/libnvfp4_dual_gemm.so ] || bash examples/submissions/library/build.sh >> "$O/summary.log" 2>&1
lane() {  # lane INDEX JOBS...
  local i=$1; shift
  local log=$O/lane-$i.log cores="$((i * 16))-$((i * 16 + 15))"
  for job in "$@"; do
    local kind=${job%%:*} name=${job#*:} report=$R/lane-$i/${job//[:\/]/-}
    mkdir -p "$report"
    case $kind in
      kernel) args="--kernel $name" ;;
      manifest) args="--manifest examples/submissions/$name/kernel.toml" ;;
      conj) args="--submission tests/regimes/conj_$name.py" ;;
    esac
    { echo; echo "=== $job (GPU $i, cores $cores)"; echo "\$ certify $args --seed $SEED $ARGS"; } >> "$log"
    local started=$SECONDS
    CUDA_VISIBLE_DEVICES=$i timeout ${JOB_TIMEOUT:-560} taskset -c "$cores" \
      $B certify $args --seed "$SEED" $ARGS --report-dir "$report" >> "$log" 2>&1
    local code=$?
    echo "exit $code ($((SECONDS - started)) s)" >> "$log"
    echo "lane $i $job: exit $code ($((SECONDS - started)) s)" >> "$O/summary.log"
    cat "$report"/*.md >> "$log" 2>/dev/null
  done
}
i=0
IFS=';' read -ra lanes <<< "${LANES:?LANES='jobs of GPU 0;jobs of GPU 1;...'}"
for jobs in "${lanes[@]}"; do
  # shellcheck disable=SC2086
  lane "$i" $jobs &
  i=$((i + 1))
done
wait
cat "$O/summary.log"
