#!/usr/bin/env bash
# The door on a Hopper GPU, in one device call per stage (each under 10 minutes):
#   bash results/door/door_run.sh check   # build the library examples, layout check against
#                                               # GPU MODE's generate_input, GPU MODE's own CuTe DSL
#                                               # submission, short smoke campaigns
#   bash results/door/door_run.sh certify # every example >= 2,000 cases, broken copies,
#                                               # the library baseline against hopper-baseline
#   bash results/door/door_run.sh bench   # bench: the examples and hopper-baseline, one run
# From the repository root on the GPU machine, with the release binary at .carry/nvfp4-oracle and
# GPU MODE's problems/nvidia/nvfp4_dual_gemm/{reference,submission,task,utils}.py at
# .ref/nvfp4_dual_gemm/ (from gpu-mode/reference-kernels; not committed here). Logs and
# certificates go to $OUT (or /tmp/door-out).
set -u
stage=${1:-check}
CASES=${CASES:-2000}
SEED=${SEED:-2026}
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export PATH=/usr/local/cuda/bin:$PATH
B=$PWD/.carry/nvfp4-oracle
O=${OUT:-/tmp/door-out}
R=/tmp/door/$stage
mkdir -p "$R" "$O"
S=examples/submissions
GOOD="$S/torch/kernel.toml $S/triton/kernel.toml $S/cuda_inline/kernel.toml $S/library/kernel.toml"
BROKEN="$S/torch/broken/kernel.toml $S/triton/broken/kernel.toml $S/cuda_inline/broken/kernel.toml $S/library/broken/kernel.toml"
run() {  # run LOGNAME command...: time it, record the exit code
  local log=$R/$1.log; shift
  echo "\$ $*" > "$log"
  ( time "$@" ) >> "$log" 2>&1
  echo "exit $?" >> "$log"
  tail -n 4 "$log" | grep -E "^\||exit" | sed "s|^|$(basename "$log" .log): |"
}
bash $S/library/build.sh > "$R/build-library.log" 2>&1 || echo "library build failed"
case $stage in
check)
  nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > "$R/gpu.csv"
  python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)" > "$R/versions.log" 2>&1
  run layout python3 scripts/check_gpumode_layout.py --problems-dir .ref
  # GPU MODE's own CuTe DSL submission, unchanged: as given (its imports decide), and with a
  # manifest that declares its architecture.
  run gpumode-cute-dsl $B certify --submission .ref/nvfp4_dual_gemm/submission.py --cases 5 --report-dir "$R/certs"
  printf 'name = "gpumode-cute-dsl"\nsubmission = "submission.py"\narch = "sm_100a"\n' > .ref/nvfp4_dual_gemm/kernel.toml
  run gpumode-cute-dsl-manifest $B certify --manifest .ref/nvfp4_dual_gemm/kernel.toml --cases 5 --report-dir "$R/certs"
  for m in $GOOD; do run "smoke-$(basename "$(dirname "$m")")" $B certify --manifest "$m" --cases 30 --seed $SEED --report-dir "$R/certs"; done
  for m in $BROKEN; do run "smoke-broken-$(basename "$(dirname "$(dirname "$m")")")" $B certify --manifest "$m" --cases 100 --seed $SEED --report-dir "$R/certs"; done
  # The other problems' data tuples, through torch examples.
  for p in gemm gemv group_gemm; do run "problem-$p" $B certify --manifest $S/other_problems/$p/kernel.toml --cases 300 --seed $SEED --report-dir "$R/certs"; done
  ;;
certify)
  for m in $GOOD; do run "certify-$(basename "$(dirname "$m")")" $B certify --manifest "$m" --cases $CASES --seed $SEED --report-dir "$R/certs"; done
  run certify-exact-library $B certify --exact --manifest $S/library/kernel.toml --cases 500 --seed 2027 --report-dir "$R/exact"
  run certify-hopper-baseline $B certify --kernel hopper-baseline --cases $CASES --seed $SEED --report-dir "$R/certs"
  python3 - "$R/certs" > "$R/library-vs-baseline.log" 2>&1 <<'PY'
import json, sys
d = sys.argv[1]
lib = json.load(open(f"{d}/example-library-baseline.json"))
base = json.load(open(f"{d}/hopper-baseline.json"))
keys = ["status", "supported_shapes", "seed"]
cov = ["cases", "by_distribution", "by_shape_class", "fp4_codes_seen", "scale_exponents_seen",
       "nan_scales_seen", "worst_ulps_from_expected"]
same = all(lib[k] == base[k] for k in keys) and all(lib["coverage"][k] == base["coverage"][k] for k in cov)
for k in keys: print(k, lib[k], base[k])
for k in cov: print(k, lib["coverage"][k], base["coverage"][k])
print("verdicts equal:", same)
sys.exit(0 if same else 1)
PY
  echo "library-vs-baseline: exit $? ($(tail -1 "$R/library-vs-baseline.log"))"
  for m in $BROKEN; do run "certify-broken-$(basename "$(dirname "$(dirname "$m")")")" $B certify --manifest "$m" --cases $CASES --seed $SEED --report-dir "$R/broken"; done
  ;;
bench)
  # bench times only certified kernels: certify first (short campaigns: the certificates are
  # keyed by the files' hashes), then time all in one run.
  for m in $GOOD; do $B certify --manifest "$m" --cases 200 --seed $SEED --report-dir "$R/certs" > "$R/pre-$(basename "$(dirname "$m")").log" 2>&1; done
  $B certify --kernel hopper-baseline --cases 200 --seed $SEED --report-dir "$R/certs" > "$R/pre-hopper-baseline.log" 2>&1
  args=""; for m in $GOOD; do args="$args --manifest $m"; done
  run bench $B bench --kernel hopper-baseline $args --reps ${REPS:-50} --report-dir "$R/certs"
  # tests/oracle/door_gpu.rs, from its test binary carried as .carry/oracle_test
  # (`cargo test --release --test oracle --no-run` prints its path).
  if [ -x .carry/oracle_test ]; then run door-gpu-tests env NVFP4_ORACLE_BIN=$B .carry/oracle_test door_gpu:: --include-ignored --nocapture; fi
  ;;
esac
rm -f "$R"/*/*.safetensors
tar czf "$O/door-$stage.tgz" -C /tmp/door "$stage"
