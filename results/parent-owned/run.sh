#!/usr/bin/env bash
# The facts a verdict or a time rests on, held by the parent, on a GPU machine where everything
# runs as root; one device call per stage (each under 10 minutes):
#   bash results/parent-owned/run.sh timing     # the persisting-L2 probe; the four examples
#                                                    # and hopper-baseline certified (no
#                                                    # sanitizer) and timed by bench (WITH_BARE=1:
#                                                    # then the bare stage in the same call)
#   bash results/parent-owned/run.sh bare       # the same four timed by a bare CUDA-event
#                                                    # loop (bare_loop.py), every benchmark shape
#   bash results/parent-owned/run.sh agree      # bench of the four examples (uncertified),
#                                                    # then the bare stage, in one call
#   bash results/parent-owned/run.sh flush      # does the parent's flush evict the inputs it
#                                                    # just copied in (flush_probe.py); bench
#                                                    # beside bare loops flushed each way
#   bash results/parent-owned/run.sh library    # the C-ABI library certified, timed on shared
#                                                    # memory by bench, and by the bare loop
#   bash results/parent-owned/run.sh gaps       # the bare loop with the GPU idle GAPS us
#                                                    # before each timed call
#   bash results/parent-owned/run.sh threshold  # forged_sample.py at FORGE = 0.97 ... 0.5,
#                                                    # every benchmark shape: the smallest
#                                                    # forgery the parent's clock finds
#   bash results/parent-owned/run.sh exploits   # the catalogue (EXPLOITS=a,b,... for a part)
#   bash results/parent-owned/run.sh rest       # load_inline's certify time, and the four
#                                                    # exploits no earlier call reached
#   bash results/parent-owned/run.sh inline     # how many times load_inline compiles in one
#                                                    # certify of the cuda_inline example
#   bash results/parent-owned/run.sh variants   # the five Hopper variants with every check,
#                                                    # beside fixed_public_inputs
#   PART=1 PARTS=8 bash results/parent-owned/run.sh catalogue   # an eighth of tests/exploits/
#   bash results/parent-owned/run.sh verdicts   # every verdict-only exploit, SIDE=6 at a time
#   bash results/parent-owned/run.sh regimes    # the planted regime kernels (REGIME=a,b;
#                                                    # SIDE_BY_SIDE=1: one process each)
#   bash results/parent-owned/run.sh certify    # the four examples and the five Hopper
#                                                    # variants certified with every check
# From the repository root on the GPU machine, with the release binary at .carry/nvfp4-oracle and
# the exploit test binary (`cargo test --release --test oracle --no-run` prints its path) at
# .carry/oracle_test. Everything goes to $OUT (or /tmp/parent-owned-out): <stage>.log (every
# command, its output, time and exit code) and the stage's tables.
set -u
stage=${1:-timing}
. "$(dirname "$0")/../stage.sh" parent-owned
D=results/parent-owned
PY="$S/torch/submission.py $S/triton/submission.py $S/cuda_inline/submission.py"
GOOD="$S/torch/kernel.toml $S/triton/kernel.toml $S/cuda_inline/kernel.toml $S/library/kernel.toml"
SHAPES="256x4096x7168 512x4096x7168 256x3072x4096 512x3072x7168"
case $stage in
timing)
  nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv >> "$LOG"
  [ -n "${NO_PROBE:-}" ] || run persisting-l2-probe timeout 120 python3 $D/persisting_l2_probe.py --trials 20
  run build-library bash $S/library/build.sh
  run certify-hopper-baseline timeout 120 $B certify --kernel hopper-baseline --cases 200 --sanitize 0 --report-dir "$R/certs"
  for m in $GOOD; do run "certify-$(basename "$(dirname "$m")")" timeout 240 $B certify --manifest "$m" --cases 200 --sanitize 0 --report-dir "$R/certs"; done
  margs=""; for m in $GOOD; do margs="$margs --manifest $m"; done
  run bench timeout 400 $B bench $margs --reps 50 --no-torch --report-dir "$R/certs"
  cp "$R/certs/bench.md" "$O/bench.md"; cp "$R/certs/bench.json" "$O/bench.json"
  [ -n "${WITH_BARE:-}" ] || exit 0
  ;&
agree)
  # bench's medians of the four examples (no certificates needed for a time: --force-untrusted)
  # and then, in the same call, the bare loops.
  [ "$stage" != agree ] || {
    nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv >> "$LOG"
    bash $S/library/build.sh > /dev/null 2>&1
    margs=""; for m in $GOOD; do margs="$margs --manifest $m"; done
    run bench timeout 400 $B bench $margs --reps 50 --no-torch --force-untrusted --report-dir "$R/bench"
    cp "$R/bench/bench.md" "$O/bench.md"; cp "$R/bench/bench.json" "$O/bench.json"
  }
  ;&
bare)
  [ -e $S/library/libnvfp4_baseline.so ] || run build-library bash $S/library/build.sh
  # One process per kernel, every shape, each in the modes of MODES (bare_loop.py says what
  # they are; default: random bytes, the oracle's inputs, and those with a 200 us idle gap),
  # flushed as FLUSH says (default: by another process, as bench's parent flushes).
  shapes=""; for shape in $SHAPES; do shapes="$shapes --shape $shape"; done
  modes=""; for mode in ${MODES:-random oracle oracle-gap}; do modes="$modes --mode $mode"; done
  flush="--flush ${FLUSH:-other-process}"
  for f in $PY; do run "bare-$(basename "$(dirname "$f")")" timeout 240 python3 $D/bare_loop.py --submission "$f" $shapes $modes $flush --oracle $B --reps 50; done
  run "bare-library" timeout 120 python3 $D/bare_loop.py --library $S/library/libnvfp4_baseline.so --symbol nvfp4_baseline_dual_gemm $shapes $modes $flush --oracle $B --reps 50
  grep -h '^{"kernel"' "$LOG" > "$O/bare.jsonl"
  ;;
flush)
  # Whether the parent's flush evicts the inputs it has just copied in (flush_probe.py), and
  # the bare loops of the library and triton examples flushed each way of FLUSHES (bare_loop.py
  # says what they are), beside bench's median of the same kernels in the same call.
  nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv >> "$LOG"
  run flush-probe timeout 120 python3 $D/flush_probe.py --trials ${TRIALS:-30}
  bash $S/library/build.sh > /dev/null 2>&1
  shapes=""; for shape in $SHAPES; do shapes="$shapes --shape $shape"; done
  run bench timeout 300 $B bench --manifest $S/library/kernel.toml --manifest $S/triton/kernel.toml --reps 50 --no-torch --force-untrusted --report-dir "$R/bench"
  cp "$R/bench/bench.md" "$O/flush-bench.md"
  for how in ${FLUSHES:-kernel other-process}; do
    run "bare-library-flush-$how" timeout 120 python3 $D/bare_loop.py --library $S/library/libnvfp4_baseline.so --symbol nvfp4_baseline_dual_gemm $shapes --mode oracle --oracle $B --flush $how --reps 50
    run "bare-triton-flush-$how" timeout 200 python3 $D/bare_loop.py --submission $S/triton/submission.py $shapes --mode oracle --oracle $B --flush $how --reps 50
  done
  grep -h '^{"kernel"' "$LOG" > "$O/flush-bare.jsonl"
  ;;
library)
  # The C-ABI library timed on shared device memory: certified, then bench (its parent clock a
  # finding now, not a note), then the bare loop flushed by another process, in one call.
  nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv >> "$LOG"
  run build-library bash $S/library/build.sh
  run certify-library timeout 240 $B certify --manifest $S/library/kernel.toml --cases 200 --sanitize 0 --report-dir "$R/certs"
  run bench timeout 200 $B bench --manifest $S/library/kernel.toml --reps 50 --no-torch --report-dir "$R/certs"
  cp "$R/certs/bench.md" "$O/bench-library.md"; cp "$R/certs/bench.json" "$O/bench-library.json"
  shapes=""; for shape in $SHAPES; do shapes="$shapes --shape $shape"; done
  run bare-library timeout 120 python3 $D/bare_loop.py --library $S/library/libnvfp4_baseline.so --symbol nvfp4_baseline_dual_gemm $shapes --mode oracle --flush other-process --oracle $B --reps 50
  grep -h '^{"kernel"' "$LOG" > "$O/bare-library.jsonl"
  ;;
gaps)
  # Whether the GPU's idle time between calls moves the bare loop's median (bench's loop
  # idles the GPU between calls for its requests): the library and triton examples, the
  # oracle's inputs, with and without an idle gap of GAPS microseconds before each timed call.
  bash $S/library/build.sh > /dev/null 2>&1
  shapes=""; for shape in $SHAPES; do shapes="$shapes --shape $shape"; done
  for gap in ${GAPS:-2000 20000}; do
    run "bare-library-gap-$gap" timeout 120 python3 $D/bare_loop.py --library $S/library/libnvfp4_baseline.so --symbol nvfp4_baseline_dual_gemm $shapes --mode oracle --mode oracle-gap --gap-us $gap --oracle $B --reps 50
    run "bare-triton-gap-$gap" timeout 120 python3 $D/bare_loop.py --submission $S/triton/submission.py $shapes --mode oracle --mode oracle-gap --gap-us $gap --oracle $B --reps 50
  done
  grep -h '^{"kernel"' "$LOG" > "$O/gaps.jsonl"
  ;;
diag)
  # Where an honest call's request time goes: bench on the Python examples without certificates
  # (their clocks table), the probe again, and the bare loops.
  run persisting-l2-probe timeout 120 python3 $D/persisting_l2_probe.py --trials 30
  run bench timeout 300 $B bench --submission $S/torch/submission.py --submission $S/cuda_inline/submission.py --submission $S/triton/submission.py --reps 30 --no-torch --force-untrusted --report-dir "$R/diag"
  cp "$R/diag/bench.md" "$O/bench-diag.md"; cp "$R/diag/bench.json" "$O/bench-diag.json"
  ;;
threshold)
  nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv >> "$LOG"
  for forge in ${FORGES:-0.93 0.87 0.8 0.7 0.5}; do
    f=$R/forged_$(echo $forge | tr . _).py
    sed "s/^FORGE = .*/FORGE = $forge/" tests/exploits/forged_sample.py > "$f"
    run "bench-forge-$forge" timeout 100 $B bench --submission "$f" --reps 30 --no-torch --force-untrusted --report-dir "$R/forge-$forge"
    cp "$R/forge-$forge/bench.md" "$O/bench-forge-$forge.md"
  done
  ;;
exploits)
  list=${EXPLOITS:-lazy_judged_outputs,calibrated_baseline,after_end_baseline,delivery_by_word,forged_sample}
  run exploits env EXPLOIT="$list" NVFP4_ORACLE_BIN=$B timeout ${EXPLOIT_TIMEOUT:-560} .carry/oracle_test exploits:: --include-ignored --nocapture
  ;;
rest)
  # The exploits no earlier call reached, and load_inline's certify time after the cache fix:
  # cuda_inline certified alone first (its time is the figure), then the exploits in three
  # processes side by side (their outcomes are verdicts, not times, but for the two bench-honest
  # ones, whose bench compares them with the control in the same run).
  nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv >> "$LOG"
  run certify-cuda_inline timeout 300 $B certify --manifest $S/cuda_inline/kernel.toml --cases 200 --sanitize 0 --report-dir "$R/certs"
  for group in fixed_public_inputs sanitizer_log_rewrite inherited_descriptors,shared_cache_channel; do
    ( LOG=$O/rest-${group%%,*}.log; run "exploits-$group" env EXPLOIT="$group" NVFP4_ORACLE_BIN=$B timeout ${EXPLOIT_TIMEOUT:-420} .carry/oracle_test exploits:: --include-ignored --nocapture ) &
    sleep 20
  done
  wait
  ;;
inline)
  # How many times load_inline's compiler runs in one certify: seconds in which nvcc or cicc was
  # running (sampled every half second from outside the sandbox), grouped into episodes.
  ( while sleep 0.5; do pgrep -x "nvcc|cicc|ptxas" >/dev/null && date +%s; done ) > "$R/nvcc-seconds" &
  sampler=$!
  run certify-cuda_inline timeout 300 $B certify --manifest $S/cuda_inline/kernel.toml --cases 200 --sanitize 0 --report-dir "$R/certs"
  kill $sampler
  sort -un "$R/nvcc-seconds" | awk 'NR == 1 || $1 > last + 2 { episodes++; start[episodes] = $1 } { last = $1; end[episodes] = $1 }
    END { printf "compiler episodes: %d\n", episodes; for (i = 1; i <= episodes; i++) printf "  %d s long\n", end[i] - start[i] + 1 }' | tee -a "$LOG"
  ;;
variants)
  # The five Hopper variants certified with every check (one process), and beside it the one
  # exploit that ran out of time in `rest` (fixed_public_inputs: a verdict, not a time).
  nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv >> "$LOG"
  HOPPER="hopper-baseline hopper-persistent hopper-warp-specialized hopper-cluster-pair hopper-splitk-pair"
  kargs=""; for k in $HOPPER; do kargs="$kargs --kernel $k"; done
  ( run certify-hopper timeout 540 $B certify $kargs --report-dir "$R/certs"; cat "$R"/certs/*.md > "$O/hopper-certificates.md" ) &
  ( LOG=$O/variants-fixed_public_inputs.log; run exploits-fixed_public_inputs env EXPLOIT=fixed_public_inputs NVFP4_ORACLE_BIN=$B timeout 520 .carry/oracle_test exploits:: --include-ignored --nocapture ) &
  wait
  ;;
catalogue)
  # The whole exploit catalogue over several calls: PART=k of PARTS=n (default 8: five or six
  # files a part, about 1.5-7 minutes of certify each; files in name order).
  # Verdict-only exploits (certify-*, certificate-forgery) run four processes side by side;
  # the timed ones (bench-*) one at a time after them, alone on the GPU.
  files=$(ls tests/exploits/*.py | sort | awk -v k="${PART:-1}" -v n="${PARTS:-8}" '(NR - 1) % n == k - 1')
  verdicts=""; timed=""
  for f in $files; do
    name=$(basename "$f" .py)
    case $(grep -o 'EXPECTED: [a-z-]*' "$f" | cut -d' ' -f2) in
      bench-*) timed="$timed $name" ;;
      *) verdicts="$verdicts $name" ;;
    esac
  done
  printf '%s\n' $verdicts | xargs -P 4 -I{} bash -c 'stage=catalogue; . results/stage.sh parent-owned; LOG=$O/catalogue-{}.log; run "exploit-{}" env EXPLOIT={} NVFP4_ORACLE_BIN=$B timeout 540 .carry/oracle_test exploits:: --include-ignored --nocapture'
  for name in $timed; do
    LOG=$O/catalogue-$name.log run "exploit-$name" env EXPLOIT=$name NVFP4_ORACLE_BIN=$B timeout 300 .carry/oracle_test exploits:: --include-ignored --nocapture
  done
  grep -h '^| ' "$O"/catalogue-*.log | grep -v '^| exploit' > "$O/catalogue-part-${PART:-1}.md"
  ;;
verdicts)
  # Every exploit whose outcome is a verdict (certify-*, certificate-forgery), SIDE processes
  # side by side (default 6), those named in SKIP left out; whatever finishes within the call
  # is logged, one log per exploit.
  names=""
  for f in $(ls tests/exploits/*.py | sort); do
    name=$(basename "$f" .py)
    case ",${SKIP:-}," in *",$name,"*) continue ;; esac
    case $(grep -o 'EXPECTED: [a-z-]*' "$f" | cut -d' ' -f2) in bench-*) ;; *) names="$names $name" ;; esac
  done
  printf '%s\n' $names | xargs -P ${SIDE:-6} -I{} bash -c 'stage=verdicts; . results/stage.sh parent-owned; LOG=$O/verdict-{}.log; run "exploit-{}" env EXPLOIT={} NVFP4_ORACLE_BIN=$B timeout ${EXPLOIT_TIMEOUT:-540} .carry/oracle_test exploits:: --include-ignored --nocapture'
  ;;
regimes)
  # The planted regime kernels (tests/regimes/), each certified by a default campaign
  # (REGIME=a,b for a part).
  # SIDE_BY_SIDE=1: one process per listed regime, each with its own log (verdicts, not times).
  nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv >> "$LOG"
  if [ -n "${SIDE_BY_SIDE:-}" ]; then
    for regime in $(echo "${REGIME:?SIDE_BY_SIDE needs REGIME=a,b}" | tr , ' '); do
      ( LOG=$O/regimes-$regime.log; run "regimes-$regime" env REGIME="$regime" NVFP4_ORACLE_BIN=$B timeout ${REGIME_TIMEOUT:-540} .carry/oracle_test regimes:: --include-ignored --nocapture ) &
    done
    wait
  else
    run regimes env REGIME="${REGIME:-}" NVFP4_ORACLE_BIN=$B timeout 560 .carry/oracle_test regimes:: --include-ignored --nocapture
  fi
  ;;
certify)
  nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv >> "$LOG"
  run build-library bash $S/library/build.sh
  HOPPER="hopper-baseline hopper-persistent hopper-warp-specialized hopper-cluster-pair hopper-splitk-pair"
  kargs=""; for k in $HOPPER; do kargs="$kargs --kernel $k"; done
  run certify-hopper $B certify $kargs --report-dir "$R/certs"
  for m in $GOOD; do run "certify-$(basename "$(dirname "$m")")" $B certify --manifest "$m" --report-dir "$R/certs"; done
  cat "$R"/certs/*.md > "$O/certificates.md"
  ;;
esac
