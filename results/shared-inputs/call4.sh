#!/usr/bin/env bash
# Call 4 (one H200): whether a small transfer in the parent waits behind another thread's large
# pageable copy (pageable_contention.py), then the build before this folder's changes (e53a863,
# .carry/before/nvfp4-oracle-e53a863: inputs uploaded) on hopper-baseline's and the torch
# example's default campaigns traced, on the same machine kind as calls 1-3.
set -u
stage=shared-inputs
. "$(dirname "$0")/../stage.sh" "$stage"
timeout 60 python3 results/shared-inputs/pageable_contention.py > "$O/pageable-contention.log" 2>&1
echo "exit $?" >> "$O/pageable-contention.log"
export B=./.carry/before/nvfp4-oracle-e53a863
bash results/shared-inputs/campaigns.sh -e53a863
