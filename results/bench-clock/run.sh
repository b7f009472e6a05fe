#!/usr/bin/env bash
# The batch clock on an H100 host of four cards, from the repository root, with this folder and
# the release binary carried as .carry/wt51/ (see README.md here):
#   bash .carry/wt51/run.sh smoke    # one bench of the library and triton examples, a forgery
#   bash .carry/wt51/run.sh full     # honest runs side by side, forgeries, bare stream loops
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
RUNS=${RUNS:-5}
REPS=${REPS:-20}
EXAMPLES="torch triton cuda_inline library"
manifest() { echo "$S/$1/kernel.toml"; }
lane_cores() { echo "$(($1 * 16))-$(($1 * 16 + 15))"; }
# bench_one LOG GPU REPORT ARGS...: one bench on one GPU and its lane's cores, its tables kept.
bench_one() {
  local log=$1 gpu=$2 report=$3; shift 3
  mkdir -p "$report"
  local started=$SECONDS
  { echo; echo "=== gpu $gpu: $B bench $* --report-dir $report"; } >> "$log"
  CUDA_VISIBLE_DEVICES=$gpu taskset -c "$(lane_cores "$gpu")" timeout 400 \
    $B bench "$@" --no-torch --force-untrusted --reps "$REPS" --report-dir "$report" >> "$log" 2>&1
  echo "exit $? ($((SECONDS - started)) s)" >> "$log"
}
forged() {  # forged FORGE FORGE_US: the triton example with its timer forged, as a file
  local f=$R/forged_${1}_${2}.py
  { cat $S/triton/submission.py; sed -e "s/^FORGE = .*/FORGE = $1/" -e "s/^FORGE_US = .*/FORGE_US = $2/" $W/forge_tail.py; } > "$f"
  echo "$f"
}
summary() {  # one line per (run, kernel, shape): the batch figure, latency, trust, findings
  python3 - "$@" <<'PY'
import json, sys, glob
for path in sorted(sys.argv[1:]):
    try:
        report = json.load(open(path))
    except Exception as exc:
        print(f"{path}: unreadable: {exc}"); continue
    findings = report.get("findings", [])
    for b in report.get("batches", []):
        s = b["shape"]; shape = f"{s['m']}x{s['n']}x{s['k']}"
        mine = [f for f in findings if shape in f]
        print(json.dumps({"report": path, "kernel": b["kernel"], "shape": shape,
                          "per_call_us": round(b["per_call_us"], 2),
                          "figures_us": [round(x, 2) for x in b["figures_us"]],
                          "slots": b["slots"], "latency_us": round(b["latency_us"], 2),
                          "latency_trusted": b["latency_trusted"],
                          "kernel_batch_ms": [round(x / 1000, 3) for x in b["kernel_batch_us"]],
                          "baseline_batch_ms": [round(x / 1000, 3) for x in b["baseline_batch_us"]],
                          "not_trusted": sum("not trusted" in f for f in mine),
                          "findings": mine}))
    if not report.get("batches"):
        print(json.dumps({"report": path, "no_batches": True, "findings": findings}))
PY
}
nvidia-smi --query-gpu=index,name,driver_version,clocks.max.sm --format=csv > "$O/host.log"
echo "cores: $(nproc); build: $(cat $W/build 2>/dev/null)" >> "$O/host.log"
bash $S/library/build.sh >> "$O/host.log" 2>&1
case ${1:-smoke} in
smoke)
  bench_one "$O/smoke.log" 0 "$R/smoke-library" --manifest "$(manifest library)" --shapes 256x3072x4096 &
  bench_one "$O/smoke-triton.log" 1 "$R/smoke-triton" --manifest "$(manifest triton)" --shapes "256x3072x4096,$SHORT" &
  bench_one "$O/smoke-forged.log" 2 "$R/smoke-forged" --submission "$(forged 0.9 0)" --shapes "256x3072x4096,$SHORT" &
  wait
  cat "$O/smoke-triton.log" "$O/smoke-forged.log" >> "$O/smoke.log"; rm -f "$O/smoke-triton.log" "$O/smoke-forged.log"
  summary "$R"/smoke-*/bench.json > "$O/smoke.jsonl"
  for d in "$R"/smoke-*; do cat "$d/bench.md" >> "$O/smoke-tables.md" 2>/dev/null; done
  ;;
full)
  # Honest: four lanes at once.
  gpu=0
  for example in $EXAMPLES; do
    ( for run in $(seq 1 "$RUNS"); do
        bench_one "$O/honest.log.$gpu" $gpu "$R/honest-$example-$run" --manifest "$(manifest "$example")" --shapes "$SHAPES"
      done ) &
    gpu=$((gpu + 1))
  done
  wait
  cat "$O"/honest.log.* > "$O/honest.log"; rm -f "$O"/honest.log.*
  summary "$R"/honest-*/bench.json > "$O/honest.jsonl"
  # Forgeries (and the honest control of the same file), round robin over the four GPUs.
  gpu=0
  for forge in ${FORGES:-1:0 0.95:0 1:20 0.97:0 1:50 0.9:0 0.98:0 1:10}; do
    ( bench_one "$O/forged.log.$gpu.$forge" $gpu "$R/forged-${forge/:/-}" --submission "$(forged "${forge%%:*}" "${forge##*:}")" --shapes "$SHAPES,$SHORT" ) &
    gpu=$(((gpu + 1) % 4))
    [ "$gpu" = 0 ] && wait
  done
  wait
  cat "$O"/forged.log.* > "$O/forged.log"; rm -f "$O"/forged.log.*
  summary "$R"/forged-*/bench.json > "$O/forged.jsonl"
  # Bare stream loops, one lane per example.
  gpu=0
  for example in $EXAMPLES; do
    if [ "$example" = library ]; then
      what="--library $S/library/libnvfp4_baseline.so --symbol nvfp4_baseline_dual_gemm"
    else
      what="--submission $S/$example/submission.py"
    fi
    shapes=""; for shape in ${SHAPES//,/ }; do shapes="$shapes --shape $shape"; done
    ( CUDA_VISIBLE_DEVICES=$gpu taskset -c "$(lane_cores $gpu)" timeout 200 python3 $W/bare_stream.py $what --oracle $B $shapes > "$O/bare.jsonl.$gpu" 2> "$O/bare.err.$gpu" ) &
    gpu=$((gpu + 1))
  done
  wait
  cat "$O"/bare.jsonl.* > "$O/bare.jsonl"; cat "$O"/bare.err.* | tail -40 > "$O/bare.err"; rm -f "$O"/bare.jsonl.* "$O"/bare.err.*
  ;;
esac
ls -la "$O"
