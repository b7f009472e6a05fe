#!/usr/bin/env bash
# The CuTe DSL example (examples/submissions/cute_dsl: its GEMMs in CuTe DSL, warp mma.sync on
# sm_90a) certified and timed on the H100, the torch example beside it in the same bench run.
#
# CuTe DSL is not on the GPU machine: its wheels (nvidia-cutlass-dsl 4.8.1 and its libs-base,
# libs-core and libs-cu13, for Python 3.12) are installed into the submission's own folder,
# pkgs/, which its manifest's python_path puts on the worker's PYTHONPATH with the package's
# dsl_packages folder (the wheel's .pth file is not read from PYTHONPATH). The first run here
# (logs/run.log) predates python_path and exported PYTHONPATH instead. The libs-cu13 wheel (92 MB) is
# over one device call's 64 MiB, so it travels in two halves (.cute1/, .cute2/, made with
# `split -b 46000000`), kept in /tmp between two calls, and the small wheels in .cute3/:
#   bash results/cute-dsl/run.sh stash        # call 1 (carry .cute1), call 2 (carry .cute2)
#   bash results/cute-dsl/run.sh run          # call 3 (carry .cute3 and .carry)
set -u
stage=${1:-run}
if [ "$stage" = stash ]; then
  mkdir -p /tmp/cute-wheel && cp .cute1/* .cute2/* /tmp/cute-wheel/ 2>/dev/null
  ls -la /tmp/cute-wheel
  exit 0
fi
. "$(dirname "$0")/../stage.sh" cute-dsl
PKGS=$S/cute_dsl/pkgs  # relative: the logs keep no path of the machine
cat /tmp/cute-wheel/cu13part.* > .cute3/nvidia_cutlass_dsl_libs_cu13-4.8.1-cp312-cp312-manylinux_2_28_x86_64.whl
md5sum .cute3/*.whl >> "$LOG"
run install python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target "$PKGS" .cute3/*.whl
# The oracle's workers get the packages from the manifest's python_path; the direct checks
# here name them on PYTHONPATH themselves.
PP=$PKGS:$PKGS/nvidia_cutlass_dsl/dsl_packages
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv >> "$LOG"
run import-check env PYTHONPATH=$PP python3 -c "import cutlass, cutlass.cute; print('CuTe DSL', cutlass.__file__)"
[ -e .cute3/test_cute.py ] && run quick-check env PYTHONPATH=$PP timeout 150 python3 .cute3/test_cute.py
run certify-cute_dsl timeout 300 $B certify --manifest $S/cute_dsl/kernel.toml --report-dir "$R/certs"
if [ -z "${SKIP_BENCH:-}" ]; then  # SKIP_BENCH=1: certify and the GPU test only
run certify-torch timeout 200 $B certify --manifest $S/torch/kernel.toml --cases 200 --sanitize 0 --report-dir "$R/certs"
run bench timeout 240 $B bench --manifest $S/cute_dsl/kernel.toml --manifest $S/torch/kernel.toml --reps 30 --no-torch --report-dir "$R/certs"
fi
[ -e .carry/oracle_test ] && run door-gpu-test env NVFP4_ORACLE_BIN=$B timeout 200 .carry/oracle_test external_kernels_gpu::the_cute_dsl_example --include-ignored --nocapture
cp "$R"/certs/*.md "$O/" 2>/dev/null
cp "$R"/certs/*.json "$O/" 2>/dev/null
