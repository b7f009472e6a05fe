#!/usr/bin/env bash
# Call 2: a large case's output judged where the kernel left it (the parent's private copy on
# the GPU, read back only where it fails) and staged copies on four threads, on top of call 1.
# The GPU tests of kept outputs, shared runs and the device judge; the planted conj_mid_mnk
# (wrong only for M 129-2047, N 4097-8192, K 512-4096: its first failing case has 2.2 M
# outputs, judged on the device, read back for the host's judge and the shrink); then the two
# default campaigns with this build and 1419f6a in turn. Every log is gathered into a few files.
. "$(dirname "$0")/common.sh"
( time NVFP4_ORACLE_BIN="$PWD/.carry/nvfp4-oracle" timeout 200 .carry/oracle_test \
    --include-ignored --nocapture --test-threads 1 \
    gpu::an_output_kept_on_the_device_is_the_output_read_back \
    gpu::a_large_case_on_shared_memory_is_the_case_on_files \
    gpu::a_hostile_library_on_shared_memory_is_caught \
    gpu_reference::an_output_judged_on_the_gpu_is_judged_as_on_the_host ) > "$O/oracle-tests.log" 2>&1
echo "exit $?" >> "$O/oracle-tests.log"
mkdir -p "$R/conj"
( time NVFP4_ORACLE_TRACE=1 timeout 150 $B certify --submission tests/regimes/conj_mid_mnk.py \
    --seed 20261127 --sanitize 0 --determinism 0 --report-dir "$R/conj" ) > "$R/conj.log" 2>&1
echo "exit $?" >> "$R/conj.log"
{ grep -v '^trace:' "$R/conj.log"; grep '^trace:.*FAILED\|^trace:.*shared run 511x4223' "$R/conj.log" | head -5
  cat "$R"/conj/*.md; } > "$O/conj-mid-mnk.log" 2>/dev/null
campaign kernel:hopper-baseline hopper-baseline 130 kept-output .carry/nvfp4-oracle
campaign kernel:hopper-baseline hopper-baseline 130 1419f6a .carry/before/nvfp4-oracle-1419f6a
campaign manifest:torch torch 170 kept-output .carry/nvfp4-oracle
campaign manifest:torch torch 170 1419f6a .carry/before/nvfp4-oracle-1419f6a
cd "$O" && cat at-once-1-*.log > campaigns.log && rm at-once-1-*.log && cat summary.log >> device.log \
  && rm summary.log && tar czf traces.tgz *-default-*.log.gz && rm *-default-*.log.gz
