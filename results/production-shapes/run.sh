#!/usr/bin/env bash
# Certificates at the shapes kernels run at, on the H100, one device call per stage (each under
# 10 minutes):
#   bash results/production-shapes/run.sh campaign  # hopper-baseline over 2,000 random
#                                                        # cases with every production-size case
#                                                        # (default flags), then the other four
#                                                        # Hopper variants over 200
#   bash results/production-shapes/run.sh baseline  # hopper-baseline over 2,000 alone
#   bash results/production-shapes/run.sh examples  # the four examples certified; a torch
#                                                        # submission that leaves its work on a
#                                                        # side stream rejected by certify
# From the repository root on the GPU machine, with the release binary at .carry/nvfp4-oracle.
# Everything goes to $OUT (or /tmp/production-out): <stage>.log (every command, its output, time
# and exit code), certificates-<stage>.md (the certificates' Markdown) and coverage-<stage>.md
# (each certificate's time and its cases and seconds by shape class: the campaign's time with
# and without the production-size cases).
set -u
stage=${1:-campaign}
. "$(dirname "$0")/../stage.sh" production
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv >> "$LOG"
nproc >> "$LOG"
case $stage in
campaign)
  run certify-hopper-baseline-2000 timeout 280 $B certify --kernel hopper-baseline --cases 2000 --seed 2026 --report-dir "$R/certs"
  for k in hopper-persistent hopper-warp-specialized hopper-cluster-pair hopper-splitk-pair; do
    run "certify-$k" timeout 120 $B certify --kernel $k --cases 200 --seed 2026 --sanitize 0 --report-dir "$R/certs"
  done
  ;;
baseline)
  run certify-hopper-baseline-2000 timeout 280 $B certify --kernel hopper-baseline --cases 2000 --seed 2026 --report-dir "$R/certs"
  ;;
examples)
  run build-library bash $S/library/build.sh
  for e in torch triton cuda_inline library; do
    run "certify-$e" timeout 150 $B certify --manifest $S/$e/kernel.toml --cases 200 --seed 2026 --sanitize 0 --report-dir "$R/certs"
  done
  run certify-side-stream timeout 120 $B certify --submission tests/exploits/side_stream.py --cases 200 --seed 2026 --report-dir "$R/side"
  ;;
esac
cat "$R"/certs/*.md > "$O/certificates-$stage.md" 2>/dev/null
grep -h "^# Certificate\|^| status\|^| cases run\|^| time\|^| by shape class\|^| production-size" "$R"/certs/*.md > "$O/coverage-$stage.md" 2>/dev/null
