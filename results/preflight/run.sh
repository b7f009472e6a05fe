#!/usr/bin/env bash
# Preflight of CuTe DSL submissions compiled for sm_100a on a machine without a GPU:
# submission_nvfp4_mma.py (the compile-only test kernel cute_nvfp4_mma.py as a GPU MODE
# submission) as one CTA, as a CTA pair, with a tile the MMA refuses, past the shared-memory
# limit, with MXFP4's scales, with warp roles, with scale layouts for 32 under NVFP4's MMA, as a
# CTA pair launched without a cluster and with an M tile of 128 over a CTA pair; then GPU MODE's own NVFP4 dual-GEMM submission where GPUMODE
# names a copy of it (gpu-mode/reference-kernels, problems/nvidia/nvfp4_dual_gemm/submission.py;
# never committed), and that submission with a deeper pipeline against it as the baseline. CuTe DSL from PyPI (nvidia-cutlass-dsl 4.8.1, no torch), ptxas from PyPI
# (nvidia-cuda-nvcc-cu12). From the repository root, with a release build (B names another
# binary, e.g. B=./target-check/release/nvfp4-oracle):
#   VENV=/tmp/cute GPUMODE=/path/to/submission.py bash results/preflight/run.sh > results/preflight/run.log 2>&1
set -u
here=results/preflight
venv=${VENV:-/tmp/cute}
[ -x "$venv/bin/python" ] || { python3 -m venv "$venv" && "$venv/bin/pip" install --quiet nvidia-cutlass-dsl==4.8.1 numpy; }
[ -n "${NVFP4_ORACLE_PTXAS:-}" ] || [ -x target/nvcc/nvidia/cuda_nvcc/bin/ptxas ] && export NVFP4_ORACLE_PTXAS=${NVFP4_ORACLE_PTXAS:-target/nvcc/nvidia/cuda_nvcc/bin/ptxas}
export NVFP4_ORACLE_PYTHON=$venv/bin/python
B=${B:-./target/release/nvfp4-oracle}
for case in "one CTA, 128x128:CG=1 MMA_M=128 MMA_N=128" "a CTA pair, 256x128:CG=2 MMA_M=256 MMA_N=128" \
            "an invalid tile, M=64 on one CTA:CG=1 MMA_M=64 MMA_N=128" \
            "past the shared-memory limit:CG=1 MMA_M=128 MMA_N=128 SMEM_BYTES=240000" \
            "MXFP4 scales where NVFP4 is meant:CG=1 MMA_M=128 MMA_N=128 SCALES=mx" \
            "warp roles, two warpgroups:CG=1 MMA_M=128 MMA_N=128 WS=1" \
            "scales laid out per 32 under NVFP4's block16 MMA:CG=1 MMA_M=128 MMA_N=128 SF_LAYOUT_VEC=32" \
            "a CTA pair launched without a cluster:CG=2 MMA_M=256 MMA_N=128 CLUSTER=none" \
            "an M tile of 128 over a CTA pair, N 64:CG=2 MMA_M=128 MMA_N=64"; do
  name=${case%%:*}; vars=${case#*:}
  echo "=== $name ($vars)"
  echo "\$ $vars $B preflight --submission $here/submission_nvfp4_mma.py"
  env $vars $B preflight --submission $here/submission_nvfp4_mma.py 2>&1 | sed "s|$PWD/||g"
  echo "preflight exit ${PIPESTATUS[0]}"
done
if [ -n "${GPUMODE:-}" ]; then
  echo "=== GPU MODE's NVFP4 dual-GEMM submission"
  echo "\$ $B preflight --submission submission.py --json gpumode-dual-gemm.json"
  $B preflight --submission "$GPUMODE" --json $here/gpumode-dual-gemm.json 2>&1 | sed "s|$GPUMODE|submission.py|g"
  echo "preflight exit ${PIPESTATUS[0]}"
  sed -i "s|$GPUMODE|submission.py|g" $here/gpumode-dual-gemm.json
  # A pipeline-depth change of the kind that cost the kernel authors 24-46%: three A/B stages in
  # shared memory instead of one, read against the preflight above.
  staged=$(mktemp -d)
  sed 's/^num_ab_stage = 1/num_ab_stage = 3/' "$GPUMODE" > "$staged/submission.py"
  echo "=== the same with num_ab_stage = 3, against the first as the baseline"
  echo "\$ $B preflight --submission submission.py --baseline gpumode-dual-gemm.json"
  $B preflight --submission "$staged/submission.py" --baseline $here/gpumode-dual-gemm.json 2>&1 | sed "s|$staged/||g; s|$PWD/||g"
  echo "preflight exit ${PIPESTATUS[0]}"
  rm -rf "$staged"
fi
