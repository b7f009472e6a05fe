#!/usr/bin/env bash
# The worker sandbox and the per-call timing on a GPU machine where everything runs as root, one
# device call per stage (each under 10 minutes):
#   bash results/sandbox/run.sh sandbox    # the probe; the hostile fake worker test; the
#                                               # examples certified (compute-sanitizer and the
#                                               # determinism check run inside the sandbox) and
#                                               # timed; an edited certificate refused by bench
#   bash results/sandbox/run.sh fenced     # guard pages and the caller's stream: the
#                                               # examples, the library and a Hopper variant
#   bash results/sandbox/run.sh boundary   # the Hopper variants, examples and library
#                                               # certified and timed in one bench run
#   bash results/sandbox/run.sh production # certified with the production shapes
#   bash results/sandbox/run.sh exploits   # the new exploits and the timing ones
#                                               # (EXPLOITS=a,b,... to choose)
#   bash results/sandbox/run.sh filter     # after a change to the seccomp filter: the
#                                               # probe, the hostile fake worker, the examples,
#                                               # the library and a Hopper variant certified
#                                               # --quick with compute-sanitizer in the sandbox
#   bash results/sandbox/run.sh delivery   # the library (timed on files) and the timing
#                                               # exploits, after the timed inputs moved into
#                                               # shared device memory
#   bash results/sandbox/run.sh grouped    # the grouped GEMM example (its Python door
#                                               # repaired) certified --quick and timed
#   bash results/sandbox/run.sh medians    # the Python examples timed by an older
#                                               # binary and by this one, alternately, on one
#                                               # machine (OLD=dir holding that binary as
#                                               # nvfp4-oracle and its examples/ tree)
# From the repository root on the GPU machine, with the release binary at .carry/nvfp4-oracle and
# the tool's test binary (`cargo test --release --test oracle --no-run` prints its path)
# at .carry/oracle_test. Everything goes to $OUT (or /tmp/sandbox-out):
# <stage>.log (every command, its output, time and exit code), and for the sandbox stage
# certificates.md and bench.md.
set -u
stage=${1:-sandbox}
. "$(dirname "$0")/../stage.sh" sandbox
GOOD="$S/torch/kernel.toml $S/triton/kernel.toml $S/cuda_inline/kernel.toml $S/library/kernel.toml"
case $stage in
sandbox)
  nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv >> "$LOG"
  { id; uname -r; } >> "$LOG"
  run probe $B sandbox --probe -- true
  # Absolute: the test may start the launcher from another directory.
  run hostile-fake-worker env NVFP4_ORACLE_BIN=$PWD/.carry/nvfp4-oracle .carry/oracle_test external_kernels::checks::a_sandboxed --nocapture
  run build-library bash $S/library/build.sh
  for m in $GOOD; do run "certify-$(basename "$(dirname "$m")")" $B certify --manifest "$m" --cases 200 --seed 2026 --report-dir "$R/certs"; done
  run certify-hopper-baseline $B certify --kernel hopper-baseline --cases 200 --seed 2026 --report-dir "$R/certs"
  args=""; for m in $GOOD; do args="$args --manifest $m"; done
  run bench $B bench --kernel hopper-baseline $args --reps 50 --report-dir "$R/certs"
  cp "$R/certs/bench.md" "$O/bench.md"
  cat "$R"/certs/*.md > "$O/certificates.md"
  # A certificate edited after certify (its seed) is not trusted by bench.
  sed -i 's/"seed": 2026/"seed": 2027/' "$R/certs/example-torch.json"
  run bench-edited-certificate $B bench --manifest $S/torch/kernel.toml --reps 5 --no-torch --report-dir "$R/certs"
  ;;
fenced)
  # Tensors that end at unmapped memory, the inputs delivered on the caller's stream, the
  # output read there: the examples, the C-ABI library and a Hopper variant still certify
  # (compute-sanitizer included), and the kernels that read past an input or leave their work
  # on a side stream do not.
  nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv >> "$LOG"
  run build-library bash $S/library/build.sh
  for m in $GOOD; do run "certify-$(basename "$(dirname "$m")")" $B certify --manifest "$m" --cases 200 --seed 2026 --report-dir "$R/certs"; done
  run certify-hopper-baseline $B certify --kernel hopper-baseline --cases 200 --seed 2026 --report-dir "$R/certs"
  run certify-oob-read-no-sanitizer $B certify --kernel hopper-test-oob-read --cases 50 --seed 2026 --sanitize 0 --report-dir "$R/certs"
  cat "$R"/certs/*.md > "$O/certificates.md"
  ;;
boundary)
  # What the boundary costs: the five Hopper variants, the four examples and the C-ABI library
  # certified (compute-sanitizer left to the fenced stage) and timed in one bench run, to set
  # beside results/hopper-variants/bench.md and results/sandbox/h100/bench.md.
  nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv >> "$LOG"
  run build-library bash $S/library/build.sh
  HOPPER="hopper-baseline hopper-persistent hopper-warp-specialized hopper-cluster-pair hopper-splitk-pair"
  kargs=""; for k in $HOPPER; do kargs="$kargs --kernel $k"; done
  run certify-hopper $B certify $kargs --cases 200 --seed 2026 --sanitize 0 --report-dir "$R/certs"
  for m in $GOOD; do run "certify-$(basename "$(dirname "$m")")" $B certify --manifest "$m" --cases 200 --seed 2026 --sanitize 0 --report-dir "$R/certs"; done
  margs=""; for m in $GOOD; do margs="$margs --manifest $m"; done
  run bench $B bench $kargs $margs --reps 50 --report-dir "$R/certs"
  cp "$R/certs/bench.md" "$O/bench.md"
  ;;
production)
  # Every campaign now runs the production shapes (benchmark and competition test shapes, whole,
  # every distribution): the Hopper variants and the examples certified with them, each
  # campaign's time in its certificate (set beside the boundary stage's, which ran without).
  nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv >> "$LOG"
  run build-library bash $S/library/build.sh
  for k in hopper-baseline hopper-persistent hopper-warp-specialized hopper-cluster-pair hopper-splitk-pair; do
    run "certify-$k" $B certify --kernel $k --cases 200 --seed 2026 --sanitize 0 --report-dir "$R/certs"
  done
  for m in $GOOD; do run "certify-$(basename "$(dirname "$m")")" $B certify --manifest "$m" --cases 200 --seed 2026 --sanitize 0 --report-dir "$R/certs"; done
  grep -h "^| cases run\|^| time\|^| by shape class\|^# Certificate" "$R"/certs/*.md > "$O/coverage.md"
  ;;
filter)
  nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv >> "$LOG"
  { id; uname -r; } >> "$LOG"
  run probe $B sandbox --probe -- true
  run hostile-fake-worker env NVFP4_ORACLE_BIN=$PWD/.carry/nvfp4-oracle .carry/oracle_test external_kernels::checks::a_sandboxed --nocapture
  run build-library bash $S/library/build.sh
  for m in $GOOD; do run "certify-$(basename "$(dirname "$m")")" $B certify --manifest "$m" --quick --cases 50 --seed 2026 --report-dir "$R/certs"; done
  run certify-hopper-baseline $B certify --kernel hopper-baseline --quick --cases 50 --seed 2026 --report-dir "$R/certs"
  grep -h "^# Certificate\|^| status\|compute-sanitizer\|^| isolation\|Worker isolation" "$R"/certs/*.md > "$O/summary.md"
  ;;
medians)
  # What the boundary costs the Python examples, as ratios taken on one machine: bench (torch
  # comparison off, certification not required) by the binary before the boundary's timing
  # changes and by this one, twice each, alternating.
  nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv >> "$LOG"
  OLD=${OLD:-.carry/old}
  # First, that this binary still certifies a Python example and says how its timed calls got
  # their inputs (shared device memory, or files and why).
  run certify-torch-quick $B certify --manifest $S/torch/kernel.toml --quick --cases 20 --seed 2026 --sanitize 0 --report-dir "$R/check"
  run bench-check $B bench --manifest $S/torch/kernel.toml --shapes 256x3072x4096 --reps 10 --no-torch --force-untrusted --report-dir "$R/check"
  grep -h "Timed inputs\|^| example" "$R/check/bench.md" >> "$LOG"
  for round in 1 2; do
    for who in old new; do
      if [ $who = old ]; then bin=$OLD/nvfp4-oracle; ex=$OLD/examples/submissions; else bin=$B; ex=$S; fi
      margs=""; for e in torch triton cuda_inline; do margs="$margs --manifest $ex/$e/kernel.toml"; done
      run "bench-$who-$round" $bin bench $margs --reps 50 --no-torch --force-untrusted --report-dir "$R/$who-$round"
      cp "$R/$who-$round/bench.md" "$O/bench-$who-$round.md"
    done
  done
  ;;
delivery)
  # After the timed inputs moved into device memory shared with the worker: the C-ABI library
  # (its worker maps none and gets files) certified --quick and timed, then the timing
  # exploits (EXPLOITS=a,b,... to choose).
  nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv >> "$LOG"
  run build-library bash $S/library/build.sh
  run certify-library $B certify --manifest $S/library/kernel.toml --quick --cases 20 --seed 2026 --sanitize 0 --report-dir "$R/certs"
  run bench-library $B bench --manifest $S/library/kernel.toml --shapes 256x3072x4096 --reps 10 --no-torch --force-untrusted --report-dir "$R/certs"
  cp "$R/certs/bench.md" "$O/bench-library.md"
  list=${EXPLOITS:-read_ahead,batch_and_skip,precompute_thread,patch_elapsed_native,patch_event}
  run exploits env EXPLOIT="$list" NVFP4_ORACLE_BIN=$B timeout 420 .carry/oracle_test exploits:: --include-ignored --nocapture
  ;;
grouped)
  nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv >> "$LOG"
  G=$S/other_problems/group_gemm/kernel.toml
  run certify-group-gemm $B certify --manifest $G --cases 30 --seed 2026 --report-dir "$R/certs"
  run bench-group-gemm $B bench --manifest $G --reps 5 --spot-checks 2 --no-torch --report-dir "$R/certs"
  cp "$R/certs/bench.md" "$O/bench-group-gemm.md"
  cat "$R"/certs/example-*.md > "$O/certificates.md"
  ;;
exploits)
  list=${EXPLOITS:-parent_memory,certificate_forgery,read_ahead,batch_and_skip,ptrace_parent}
  run exploits env EXPLOIT="$list" NVFP4_ORACLE_BIN=$B .carry/oracle_test exploits:: --include-ignored --nocapture
  ;;
esac
