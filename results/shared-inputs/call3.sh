#!/usr/bin/env bash
# Call 3 (one H200, the build in .carry/build: shared runs on a stream of the highest priority):
# the delivery gate alone (its side stream made before the gate closes),
# then hopper-baseline's and the
# torch example's default campaigns traced, each shared run's steps timed.
set -u
stage=shared-inputs
. "$(dirname "$0")/../stage.sh" "$stage"
echo "build: $(cat .carry/build 2>/dev/null)" > "$O/device.log"
timeout 60 python3 results/small-cases/gate_on_gpu.py > "$O/gate-on-gpu.log" 2>&1
echo "exit $?" >> "$O/gate-on-gpu.log"
bash results/shared-inputs/campaigns.sh
