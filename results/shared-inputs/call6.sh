#!/usr/bin/env bash
# Call 6 (one H200, the build in .carry/build: call 5's, each staged chunk copied on the host by
# up to four threads): the staged copies (oracle test), then hopper-baseline's and the torch
# example's default campaigns traced.
set -u
stage=shared-inputs
. "$(dirname "$0")/../stage.sh" "$stage"
echo "build: $(cat .carry/build 2>/dev/null)" > "$O/device.log"
( time timeout 60 .carry/oracle_test --include-ignored --nocapture gpu::staged_copies_keep_every_byte ) \
  > "$O/oracle-tests.log" 2>&1
echo "exit $?" >> "$O/oracle-tests.log"
bash results/shared-inputs/campaigns.sh
