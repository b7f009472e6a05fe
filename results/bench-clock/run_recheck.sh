#!/usr/bin/env bash
# The lone rule's recheck on one H100, from the repository root, the release binary carried
# as .carry/nvfp4-oracle: the library forged 5% low (forge_library.cu) and the honest library
# at 256x4096x7168 and 128x1024x256, one bench each. The forgery's finding must survive the recheck (six lone
# batches in its row); the honest row needs no recheck (three).
set -u
export W=results/bench-clock B=.carry/nvfp4-oracle R=$HOME/bench-recheck DEADLINE=400 BENCH_TIMEOUT=100
export SHAPES=256x4096x7168 SHORT=128x1024x256 LIBFORGES=f5
RUN_LONE_FUNCTIONS_ONLY=1 source results/bench-clock/run_lone.sh
build
forge_lib
honest library
