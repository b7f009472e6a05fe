#!/usr/bin/env bash
# Preflight on real sm_100a code, on a machine without a GPU: cute_nvfp4_mma.py compiled by CuTe
# DSL (PyPI nvidia-cutlass-dsl 4.8.1, no torch) as one CTA, as a CTA pair and with a tile the MMA
# refuses, then read by `nvfp4-oracle preflight` with ptxas (PyPI nvidia-cuda-nvcc-cu12).
# From the repository root, with a release build:
#   VENV=/tmp/cute bash docs/results/preflight/run.sh > docs/results/preflight/run.log 2>&1
set -u
here=docs/results/preflight
venv=${VENV:-/tmp/cute}
[ -x "$venv/bin/python" ] || { python3 -m venv "$venv" && "$venv/bin/pip" install --quiet nvidia-cutlass-dsl==4.8.1 numpy; }
[ -n "${NVFP4_ORACLE_PTXAS:-}" ] || [ -x target/nvcc/nvidia/cuda_nvcc/bin/ptxas ] && export NVFP4_ORACLE_PTXAS=${NVFP4_ORACLE_PTXAS:-target/nvcc/nvidia/cuda_nvcc/bin/ptxas}
out=$(mktemp -d)
export CUTE_DSL_ARCH=sm_100a
# The kernel's tile and scales come from the environment, which CuTe DSL's compile cache does not
# key on: without this, a later case would get an earlier case's code.
export CUTE_DSL_NO_CACHE=1
B=./target/release/nvfp4-oracle
for case in "one CTA, 128x128:CG=1 MMA_M=128 MMA_N=128" "a CTA pair, 256x128:CG=2 MMA_M=256 MMA_N=128" \
            "an invalid tile, M=64 on one CTA:CG=1 MMA_M=64 MMA_N=128" \
            "past the shared-memory limit:CG=1 MMA_M=128 MMA_N=128 SMEM_BYTES=240000" \
            "MXFP4 scales where NVFP4 is meant:CG=1 MMA_M=128 MMA_N=128 SCALES=mx"; do
  name=${case%%:*}; vars=${case#*:}
  dir="$out/$(echo "$name" | tr -c 'a-z0-9' '-')"
  echo "=== $name ($vars)"
  env $vars "$venv/bin/python" "$here/compile_cute.py" "$dir"; echo "compile exit $?"
  ptx=$(ls "$dir"/*.ptx 2>/dev/null | head -1)
  [ -n "$ptx" ] || continue
  smem=$(echo "$vars" | sed -n 's/.*SMEM_BYTES=\([0-9]*\).*/\1/p')
  $B preflight --ptx "$ptx" --dynamic-smem "${smem:-65536}" | sed "s|$out/||g"; echo "preflight exit ${PIPESTATUS[0]}"
done
rm -rf "$out"
