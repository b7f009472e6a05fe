#!/usr/bin/env bash
# Call 2: call 1's build plus the operands' top bytes read a chunk of words at a time and the
# blocked scales made on every core (the same bytes), and a trace line per GPU reference. The
# default campaigns of hopper-baseline and the torch example with this build and 6823350 in
# turn, one H200.
stage=ahead-buffers
. "$(dirname "$0")/../case-overlap/common.sh"
campaign kernel:hopper-baseline hopper-baseline 100 inputs .carry/nvfp4-oracle
campaign kernel:hopper-baseline hopper-baseline 100 6823350 .carry/before/nvfp4-oracle-6823350
campaign manifest:torch torch 120 inputs .carry/nvfp4-oracle
campaign manifest:torch torch 120 6823350 .carry/before/nvfp4-oracle-6823350
cd "$O" && cat at-once-1-*.log > call2-campaigns.log && rm at-once-1-*.log \
  && cat summary.log >> device.log && rm summary.log && mv device.log call2-device.log \
  && tar czf call2-traces.tgz *-default-*.log.gz && rm *-default-*.log.gz
