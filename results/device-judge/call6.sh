#!/usr/bin/env bash
# Call 6 (one H200): the build before this work (ce28cd2, carried as
# .carry/before/nvfp4-oracle-ce28cd2) and the committed one (.carry/nvfp4-oracle) in one call:
# both default campaigns of each, the before build's first.
set -u
stage=device-judge
. "$(dirname "$0")/../stage.sh" "$stage"
echo "build: $(cat .carry/build 2>/dev/null)" > "$O/device.log"
B=.carry/before/nvfp4-oracle-ce28cd2 bash results/shared-inputs/campaigns.sh -ce28cd2
bash results/shared-inputs/campaigns.sh -committed
