#!/usr/bin/env bash
# Call 2: the random small cases' references made while the kernel starts (a Python
# submission's two worker starts), on top of call 1; the trace now times the workers' starts.
# The torch example's default campaign with this build and f3258e6 in turn, then
# hopper-baseline's with this build.
stage=wide-outputs
. "$(dirname "$0")/../case-overlap/common.sh"
campaign manifest:torch torch 170 ahead .carry/nvfp4-oracle
campaign manifest:torch torch 170 f3258e6 .carry/before/nvfp4-oracle-f3258e6
campaign kernel:hopper-baseline hopper-baseline 130 ahead .carry/nvfp4-oracle
cd "$O" && cat at-once-1-*.log > campaigns.log && rm at-once-1-*.log && cat summary.log >> device.log \
  && rm summary.log && tar czf traces.tgz *-default-*.log.gz && rm *-default-*.log.gz
