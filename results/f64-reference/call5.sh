#!/usr/bin/env bash
# Call 5: the judge, the gather and the download on a stream of the highest priority, and the
# engine's lock held only while a reference is computed (not while one is judged). The GPU
# tests of the judge, of a shared run and of bench's batch; the planted conj_mid_mnk (wrong only
# for M 129-2047, N 4097-8192, K 512-4096: its first failing case, 511 x 4223 x 1008, has more
# than 2^20 outputs, so its reference stays on the device and comes back for the host's judge
# and the shrink); then hopper-baseline's and the torch example's campaigns with 5825347 and
# this build in turn.
. "$(dirname "$0")/common.sh"
( time NVFP4_ORACLE_BIN="$PWD/.carry/nvfp4-oracle" timeout 200 .carry/oracle_test \
    --include-ignored --nocapture --test-threads 1 \
    gpu_reference::an_output_judged_on_the_gpu_is_judged_as_on_the_host \
    gpu::a_batch_made_and_judged_on_the_device_is_the_hosts \
    gpu::a_large_case_on_shared_memory_is_the_case_on_files \
    gpu::a_hostile_library_on_shared_memory_is_caught ) > "$O/oracle-tests.log" 2>&1
echo "exit $?" >> "$O/oracle-tests.log"
mkdir -p "$R/conj"
( time timeout 150 $B certify --submission tests/regimes/conj_mid_mnk.py --seed 20261127 \
    --sanitize 0 --determinism 0 --report-dir "$R/conj" ) > "$O/conj-mid-mnk.log" 2>&1
echo "exit $?" >> "$O/conj-mid-mnk.log"
cat "$R"/conj/*.md >> "$O/conj-mid-mnk.log" 2>/dev/null
campaign kernel:hopper-baseline hopper-baseline 130 5825347 .carry/before/nvfp4-oracle-5825347
campaign kernel:hopper-baseline hopper-baseline 130 judge-stream .carry/nvfp4-oracle
campaign manifest:torch torch 170 5825347 .carry/before/nvfp4-oracle-5825347
campaign manifest:torch torch 170 judge-stream .carry/nvfp4-oracle
rm -f "$O"/torch-default-*.log.gz
