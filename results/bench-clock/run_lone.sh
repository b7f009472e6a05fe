#!/usr/bin/env bash
# The lone-call reference of bench's latency column on one H100 (an x1 host, 16 cores), from the
# repository root, with this folder, the stripped release binary and its build's
# submission worker carried as .carry/h51/ (README.md here):
#   bash .carry/h51/run_lone.sh STAGE...     # stages in order; DEADLINE (s) stops starting benches
# Stages:
#   build        the example library (build.sh) and forge_library.cu as three libraries:
#                control (FORGE_FRAC=0, FORGE_US=0), f5 (5%), u20 (20 us)
#   busy         three CPU busy loads for the rest of the call (the issue's "on one GPU, three
#                busy loads on the CPU instead" of three other benches)
#   honest[:EX,..]   the examples (EXAMPLES), one bench each, one after another (RUNS times):
#                    the benchmark shapes, and SHORT for the library and cuda_inline
#   forge-lib[:V,..] the library forgeries (LIBFORGES: f5, u20, control) at the benchmark
#                    shapes and SHORT
#   forge-short[:F]  forge_tail.py appended to cuda_inline, at SHORT; forge-long[:F] to triton,
#                    at the benchmark shapes: its timer rebound to report FORGE times the truth
#                    less FORGE_US (F: FORGE:FORGE_US,..., default PYFORGES)
# Every bench: --no-torch --force-untrusted --reps REPS; its whole log appended to a log under
# $OUT at once, one JSON line per (kernel, shape) to $OUT/results.jsonl.
set -u
W=${W:-.carry/h51}
B=${B:-$W/nvfp4-oracle}
O=${OUT:-/tmp/bench-lone-out}
R=${R:-/tmp/bench-lone}
S=examples/submissions
mkdir -p "$O" "$R/lib"
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export PATH=/usr/local/cuda/bin:$PATH
export PYTHONUNBUFFERED=1
SHAPES=${SHAPES:-256x4096x7168,512x4096x7168,256x3072x4096,512x3072x7168}
SHORT=${SHORT:-128x1024x256,128x1024x512}
RUNS=${RUNS:-1}
REPS=${REPS:-20}
DEADLINE=${DEADLINE:-540}
EXAMPLES=${EXAMPLES:-library cuda_inline triton torch}
PYFORGES=${PYFORGES:-0.95:0 1:20}
LIBFORGES=${LIBFORGES:-f5 u20 control}
SYMBOL=nvfp4_baseline_dual_gemm

# bench_one LOG PHASE REPORT ARGS...: one bench; its log appended to LOG whole, one summary line
# per shape appended to results.jsonl at once. Skipped past DEADLINE seconds.
bench_one() {
  local log=$1 phase=$2 report=$3; shift 3
  if [ "$SECONDS" -ge "$DEADLINE" ]; then
    echo "{\"phase\": \"$phase\", \"skipped\": \"deadline at $SECONDS s\"}" >> "$O/results.jsonl"
    return
  fi
  mkdir -p "$report"
  local started=$SECONDS
  { echo; echo "=== $phase (at $started s): $B bench $* --report-dir $report"
    timeout "${BENCH_TIMEOUT:-200}" $B bench "$@" --no-torch --force-untrusted --reps "$REPS" \
      --report-dir "$report" 2>&1
    echo "exit $? ($((SECONDS - started)) s)"; } > "$report.log"
  cat "$report.log" >> "$log"
  summary "$phase" "$report/bench.json" >> "$O/results.jsonl"
}
summary() {  # summary PHASE BENCH.json: one line per (kernel, shape)
  python3 - "$@" <<'PY'
import json, sys
phase, path = sys.argv[1], sys.argv[2]
try:
    report = json.load(open(path))
except Exception as exc:
    print(json.dumps({"phase": phase, "report": path, "unreadable": str(exc)})); sys.exit()
findings = report.get("findings", [])
r2 = lambda x: None if x is None else round(x, 2)
for b in report.get("batches", []):
    s = b["shape"]; shape = f"{s['m']}x{s['n']}x{s['k']}"
    mine = [f for f in findings if f" {shape}:" in f]
    print(json.dumps({"phase": phase, "kernel": b["kernel"], "shape": shape,
                      "per_call_us": r2(b["per_call_us"]),
                      "figures_us": [r2(x) for x in b["figures_us"]], "slots": b["slots"],
                      "latency_us": r2(b["latency_us"]), "lone_us": r2(b.get("lone_us")),
                      "lone_figures_us": [r2(x) for x in b.get("lone_figures_us", [])],
                      "lone_events_us_median": r2(b.get("lone_events_us_median")),
                      "latency_trusted": b["latency_trusted"],
                      "kernel_batch_ms": [round(x / 1000, 3) for x in b["kernel_batch_us"]],
                      "baseline_batch_ms": [round(x / 1000, 3) for x in b["baseline_batch_us"]],
                      "lone_batch_ms": [round(x / 1000, 3) for x in b.get("lone_kernel_batch_us", [])],
                      "lone_baseline_ms": [round(x / 1000, 3) for x in b.get("lone_baseline_batch_us", [])],
                      "not_trusted": sum("not trusted" in f for f in mine), "findings": mine}))
if not report.get("batches"):
    print(json.dumps({"phase": phase, "report": path, "no_batches": True, "findings": findings}))
PY
}
forged_py() {  # forged_py EXAMPLE FORGE FORGE_US: the example with its timer forged, as a file
  local f=$R/forged_${1}_${2}_${3}.py
  { cat "$S/$1/submission.py"; sed -e "s/^FORGE = .*/FORGE = $2/" -e "s/^FORGE_US = .*/FORGE_US = $3/" $W/forge_tail.py; } > "$f"
  echo "$f"
}
build() {
  { nvidia-smi --query-gpu=index,name,driver_version,clocks.max.sm,clocks.sm --format=csv
    echo "cores: $(nproc); build: $(cat $W/build 2>/dev/null)"; } >> "$O/host.log"
  local started=$SECONDS
  bash $S/library/build.sh >> "$O/host.log" 2>&1 &
  local repo; repo=$(pwd)
  for v in control:0:0 f5:0.05:0 u20:0:20; do
    IFS=: read -r name frac us <<< "$v"
    nvcc -O3 -arch=sm_90a -shared -Xcompiler -fPIC -I"$repo" -I"$repo/crates/harness" \
      -DFORGE_FRAC="$frac" -DFORGE_US="$us" -o "$R/lib/libforge_$name.so" $W/forge_library.cu \
      >> "$O/host.log" 2>&1 && echo "built libforge_$name.so" >> "$O/host.log" &
  done
  wait
  echo "build: $((SECONDS - started)) s" >> "$O/host.log"
}
busy() {
  for i in 1 2 3; do python3 -c 'while True: pass' & echo $! >> "$R/busy.pids"; done
  echo "busy loads: $(cat "$R/busy.pids" | tr '\n' ' ')" >> "$O/host.log"
}
honest() {  # honest [EXAMPLES]
  local examples=${1:-$EXAMPLES}
  for run in $(seq 1 "$RUNS"); do
    for example in ${examples//,/ }; do
      local shapes=$SHAPES
      case $example in library|cuda_inline) shapes="$SHAPES,$SHORT" ;; esac
      bench_one "$O/honest.log" "honest-$run" "$R/honest-$example-$run" \
        --manifest "$S/$example/kernel.toml" --shapes "$shapes"
    done
  done
}
forge_lib() {  # forge_lib [VARIANTS]
  local variants=${1:-$LIBFORGES}
  for v in ${variants//,/ }; do
    bench_one "$O/forged.log" "forged-lib-$v" "$R/forged-lib-$v" \
      --library "$R/lib/libforge_$v.so" --symbol $SYMBOL --shapes "$SHAPES,$SHORT"
  done
}
forge_py() {  # forge_py EXAMPLE SHAPES [FORGES]
  local example=$1 shapes=$2 forges=${3:-$PYFORGES}
  for forge in ${forges//,/ }; do
    local f=${forge%%:*} us=${forge##*:}
    bench_one "$O/forged.log" "forged-$example-$forge" "$R/forged-$example-$f-$us" \
      --submission "$(forged_py "$example" "$f" "$us")" --shapes "$shapes"
  done
}
# Sourced by run_x4.sh for its functions alone.
[ "${RUN_LONE_FUNCTIONS_ONLY:-}" = 1 ] && return 0
for stage in "$@"; do
  arg=${stage#*:}; [ "$arg" = "$stage" ] && arg=""
  case ${stage%%:*} in
  build) build ;;
  busy) busy ;;
  honest) honest "$arg" ;;
  forge-lib) forge_lib "$arg" ;;
  forge-short) forge_py cuda_inline "$SHORT" "$arg" ;;
  forge-long) forge_py triton "$SHAPES" "$arg" ;;
  *) echo "unknown stage $stage" ;;
  esac
done
[ -f "$R/busy.pids" ] && kill $(cat "$R/busy.pids") 2>/dev/null
echo "done at $SECONDS s" >> "$O/host.log"
ls -la "$O"
