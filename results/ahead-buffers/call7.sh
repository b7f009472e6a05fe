#!/usr/bin/env bash
# Call 7: the shared run's checks after the worker's answer timed step by step in the trace
# (the output's canaries, whose read first waits for the output's device copy; the inputs; the
# output again). hopper-baseline's default campaign, one H200.
stage=ahead-buffers
. "$(dirname "$0")/../case-overlap/common.sh"
campaign kernel:hopper-baseline hopper-baseline 100 checks .carry/nvfp4-oracle
cd "$O" && mv at-once-1-*.log call7-campaigns.log && cat summary.log >> device.log \
  && rm summary.log && mv device.log call7-device.log \
  && tar czf call7-traces.tgz *-default-*.log.gz && rm *-default-*.log.gz
