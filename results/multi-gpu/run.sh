#!/usr/bin/env bash
# One campaign on one GPU, then the same campaign spread over every GPU of the machine
# (`certify --gpus all`: one shard process per GPU, run at once, then merged), for a built-in
# Hopper variant and for the torch example submission. From the repository root on a GPU machine
# with several GPUs, the release binary at .carry/nvfp4-oracle:
#   bash results/multi-gpu/run.sh
# Everything goes to $OUT (or /tmp/multi-gpu-out): multi-gpu.log (every command, its output, time
# and exit code) and certs.tar: every certificate and shard log, named as in certs/ here
# (<kernel>_<one|all>_[gpu-shards_]<file>). compare.py, run in this folder with certs/ unpacked,
# checks that the merged certificate equals the one-GPU one in every field
# but timing and the devices, and prints the wall-time table.
set -u
stage=multi-gpu
. "$(dirname "$0")/../stage.sh" multi-gpu
nvidia-smi --query-gpu=index,name,driver_version --format=csv >> "$LOG"
campaign() {  # campaign NAME CASES KERNEL-ARGS...
  local name=$1 cases=$2; shift 2
  run "$name-one-gpu" env CUDA_VISIBLE_DEVICES=0 $B certify "$@" --cases "$cases" --seed 2026 --report-dir "$R/$name/one"
  run "$name-gpus-all" $B certify "$@" --cases "$cases" --seed 2026 --gpus all --report-dir "$R/$name/all"
}
campaign hopper-warp-specialized 2000 --kernel hopper-warp-specialized
campaign example-torch 500 --manifest $S/torch/kernel.toml
# One flat folder, packed: the certificates and the shards' logs.
mkdir -p "$R/flat"
(cd "$R" && find . -path ./flat -prune -o \( -name '*.json' -o -name 'gpu-*.log' \) -print |
  while read -r f; do f=${f#./}; cp "$f" "flat/$(echo "$f" | tr / _)"; done)
tar -C "$R/flat" -cf "$O/certs.tar" .
