#!/usr/bin/env bash
# On the H100 (sm_90): GPU MODE's Blackwell dual-GEMM submission given to certify with no --arch
# is "unable to run here" (exit 4) and pointed to preflight; the torch example still certifies
# (the worker's new check lets it through). From the repository root, the release binary at
# .carry/nvfp4-oracle and a copy of GPU MODE's submission at .carry/gpumode/submission.py
# (gpu-mode/reference-kernels, problems/nvidia/nvfp4_dual_gemm/submission.py; never committed):
#   bash results/preflight/h100.sh    # writes $OUT/h100.log
set -u
stage=h100
. "$(dirname "$0")/../stage.sh" preflight
nvidia-smi --query-gpu=name,driver_version --format=csv >> "$LOG"
run certify-gpumode-blackwell $B certify --submission .carry/gpumode/submission.py --cases 20 --seed 1 --report-dir "$R/certs"
grep -h "needs sm_\|preflight" "$R"/certs/*.md >> "$LOG" 2>/dev/null
run certify-torch-example $B certify --manifest $S/torch/kernel.toml --quick --cases 20 --seed 2026 --sanitize 0 --report-dir "$R/certs"
