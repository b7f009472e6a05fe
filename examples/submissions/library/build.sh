#!/usr/bin/env bash
# Builds the example library, its broken copy and the hostile libraries of the exploit
# catalogue (tests/exploits/library/) with nvcc (on a Hopper machine with the CUDA
# toolkit), next to their manifests. Run from anywhere; paths are resolved from the repository.
set -euo pipefail
repo="$(cd "$(dirname "$0")/../../.." && pwd)"
here="$repo/examples/submissions/library"
nvcc=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
for target in "$here/libnvfp4_baseline.so:$here/baseline_abi.cu" \
              "$here/broken/libnvfp4_baseline_broken.so:$here/broken/baseline_abi.cu" \
              "$repo/tests/exploits/library/libnvfp4_hostile.so:$repo/tests/exploits/library/hostile_abi.cu"; do
  "$nvcc" -O3 -arch=sm_90a -shared -Xcompiler -fPIC -I"$repo" -I"$repo/crates/harness" -o "${target%%:*}" "${target#*:}"
  echo "built ${target%%:*}"
done
