#!/usr/bin/env bash
# The batch clock on an H100 host of four cards, from the repository root, with this folder and
# the release binary carried as .carry/wt51/ (see README.md here):
#   bash .carry/wt51/run.sh all      # smoke (one bench of the library and triton examples, one
#                                    # forgery; stops if no batch was timed), honest, forgeries
# Honest: the four examples at the benchmark shapes, one lane per GPU (its own 16 cores), RUNS
# benches each, one after another, the four lanes at once (three other benches on the host
# beside each). Forgeries: the triton example with its timer rebound (forge_tail.py) to report
# FORGE times the truth less FORGE_US, at the benchmark shapes and SHORT, round robin over the
# GPUs. Bare: bare_stream.py per example, one lane per GPU.
set -u
W=.carry/wt51
B=$W/nvfp4-oracle
O=${OUT:-/tmp/bench-clock-out}
R=/tmp/bench-clock
S=examples/submissions
mkdir -p "$O" "$R"
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export PATH=/usr/local/cuda/bin:$PATH
export PYTHONUNBUFFERED=1
SHAPES=${SHAPES:-256x4096x7168,512x4096x7168,256x3072x4096,512x3072x7168}
SHORT=${SHORT:-128x1024x1024,256x1024x1024}
RUNS=${RUNS:-3}
REPS=${REPS:-20}
EXAMPLES="torch triton cuda_inline library"
manifest() { echo "$S/$1/kernel.toml"; }
lane_cores() { echo "$(($1 * 16))-$(($1 * 16 + 15))"; }
# bench_one LOG PHASE GPU REPORT ARGS...: one bench on one GPU and its lane's cores; its log
# appended to LOG whole, one summary line per shape appended to results.jsonl at once.
bench_one() {
  local log=$1 phase=$2 gpu=$3 report=$4; shift 4
  mkdir -p "$report"
  local started=$SECONDS
  { echo; echo "=== $phase gpu $gpu: $B bench $* --report-dir $report"
    CUDA_VISIBLE_DEVICES=$gpu taskset -c "$(lane_cores "$gpu")" timeout ${BENCH_TIMEOUT:-240} \
      $B bench "$@" --no-torch --force-untrusted --reps "$REPS" --report-dir "$report" 2>&1
    echo "exit $? ($((SECONDS - started)) s)"; } > "$report.log"
  cat "$report.log" >> "$log"
  summary "$phase" "$report/bench.json" >> "$O/results.jsonl"
}
forged() {  # forged FORGE FORGE_US: the triton example with its timer forged, as a file
  local f=$R/forged_${1}_${2}.py
  { cat $S/triton/submission.py; sed -e "s/^FORGE = .*/FORGE = $1/" -e "s/^FORGE_US = .*/FORGE_US = $2/" $W/forge_tail.py; } > "$f"
  echo "$f"
}
summary() {  # summary PHASE BENCH.json: one line per (kernel, shape): the batch figure, latency, trust, findings
  python3 - "$@" <<'PY'
import json, sys
phase, path = sys.argv[1], sys.argv[2]
try:
    report = json.load(open(path))
except Exception as exc:
    print(json.dumps({"phase": phase, "report": path, "unreadable": str(exc)})); sys.exit()
findings = report.get("findings", [])
for b in report.get("batches", []):
    s = b["shape"]; shape = f"{s['m']}x{s['n']}x{s['k']}"
    mine = [f for f in findings if f" {shape}" in f]
    print(json.dumps({"phase": phase, "report": path, "kernel": b["kernel"], "shape": shape,
                      "per_call_us": round(b["per_call_us"], 2),
                      "figures_us": [round(x, 2) for x in b["figures_us"]],
                      "slots": b["slots"], "latency_us": round(b["latency_us"], 2),
                      "latency_trusted": b["latency_trusted"],
                      "kernel_batch_ms": [round(x / 1000, 3) for x in b["kernel_batch_us"]],
                      "baseline_batch_ms": [round(x / 1000, 3) for x in b["baseline_batch_us"]],
                      "not_trusted": sum("not trusted" in f for f in mine), "findings": mine}))
if not report.get("batches"):
    print(json.dumps({"phase": phase, "report": path, "no_batches": True, "findings": findings}))
PY
}
nvidia-smi --query-gpu=index,name,driver_version,clocks.max.sm --format=csv > "$O/host.log"
echo "cores: $(nproc); build: $(cat $W/build 2>/dev/null)" >> "$O/host.log"
bash $S/library/build.sh >> "$O/host.log" 2>&1
smoke() {
  bench_one "$O/smoke.log" smoke 0 "$R/smoke-library" --manifest "$(manifest library)" --shapes 256x3072x4096 &
  bench_one "$O/smoke.log" smoke 1 "$R/smoke-triton" --manifest "$(manifest triton)" --shapes "256x3072x4096,$SHORT" &
  bench_one "$O/smoke.log" smoke 2 "$R/smoke-forged" --submission "$(forged 0.9 0)" --shapes "256x3072x4096,$SHORT" &
  wait
  for d in library triton forged; do cat "$R/smoke-$d/bench.md" >> "$O/tables.md" 2>/dev/null; done
}
honest() {  # one lane per example, RUNS benches then the bare stream loop, four lanes at once
  local gpu=0
  for example in $EXAMPLES; do
    ( for run in $(seq 1 "$RUNS"); do
        bench_one "$O/honest.log" honest $gpu "$R/honest-$example-$run" --manifest "$(manifest "$example")" --shapes "$SHAPES"
      done
      cat "$R/honest-$example-1/bench.md" >> "$O/tables.md" 2>/dev/null
      if [ "$example" = library ]; then
        what="--library $S/library/libnvfp4_baseline.so --symbol nvfp4_baseline_dual_gemm"
      else
        what="--submission $S/$example/submission.py"
      fi
      shapes=""; for shape in ${SHAPES//,/ }; do shapes="$shapes --shape $shape"; done
      CUDA_VISIBLE_DEVICES=$gpu taskset -c "$(lane_cores $gpu)" timeout 150 python3 $W/bare_stream.py $what --oracle $B $shapes >> "$O/bare.jsonl" 2> "$R/bare-$example.err"
      { echo "=== bare $example: exit $?"; tail -5 "$R/bare-$example.err"; } >> "$O/host.log" ) &
    gpu=$((gpu + 1))
  done
  wait
}
forgeries() {  # the forged triton example (and its honest control), one per GPU at a time
  local gpu=0
  for forge in ${FORGES:-1:0 0.95:0 1:20 0.97:0}; do
    bench_one "$O/forged.log" "forged-$forge" $gpu "$R/forged-${forge/:/-}" --submission "$(forged "${forge%%:*}" "${forge##*:}")" --shapes "$SHAPES,$SHORT" &
    gpu=$(((gpu + 1) % 4))
    [ "$gpu" = 0 ] && wait
  done
  wait
}
case ${1:-smoke} in
smoke) smoke ;;
honest) honest ;;
forgeries) forgeries ;;
all)
  smoke
  # Stop early (and save the device time) when the smoke benches produced no batch.
  grep -q '"per_call_us"' "$O/results.jsonl" || { echo "smoke: no batch timed; stopping"; exit 3; }
  honest
  forgeries
  ;;
esac
ls -la "$O"
