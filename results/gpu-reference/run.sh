#!/usr/bin/env bash
# The GPU reference (crates/harness/kernels/harness/exact_reference_kernel.cu) on a GPU machine, one device call per
# stage (each under 10 minutes):
#   bash results/gpu-reference/run.sh compare    # every element of every edge shape, problem,
#                                                # distribution and K order against the CPU model;
#                                                # the speed table beside the CPU model's
#   bash results/gpu-reference/run.sh campaign   # certify of hopper-baseline with the reference
#                                                # on the GPU and on the CPU, same seed: the
#                                                # campaign's time and where it goes
#                                                # (KERNELS="a b" for others, WHERE=gpu for the
#                                                # GPU reference alone, MANIFESTS="x/kernel.toml"
#                                                # for examples, TRACE=1 for each case's phases
#                                                # in the log: where the time goes; CASES=200
#                                                # for --cases 200, the stage's default before
#                                                # the default campaign grew: the tool's own
#                                                # default now)
# From the repository root, with the release binary at .carry/nvfp4-oracle and the test binary
# (`cargo test --release --test oracle --no-run` prints its path) at .carry/oracle_test.
# Everything goes to $OUT (or /tmp/gpu-reference-out): <stage>.log.
set -u
stage=${1:-compare}
. "$(dirname "$0")/../stage.sh" gpu-reference
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv >> "$LOG"
echo "cores: $(nproc)" >> "$LOG"
case $stage in
compare)
  run bit-for-bit timeout 400 ./.carry/oracle_test gpu_reference:: --include-ignored --nocapture --test-threads 1 --skip speed_table
  run speed-table timeout 300 ./.carry/oracle_test gpu_reference::gpu_reference_speed_table --include-ignored --nocapture
  ;;
campaign)
  SEED=${SEED:-20261126}
  for kernel in ${KERNELS:-hopper-baseline}; do
    for where in ${WHERE:-gpu cpu}; do
      run "certify-$kernel-$where" env ${TRACE:+NVFP4_ORACLE_TRACE=1} timeout 280 $B certify --kernel "$kernel" --seed "$SEED" ${CASES:+--cases $CASES} --sanitize 0 --determinism 0 --reference $where --report-dir "$R/$where"
      cp "$R/$where/$kernel.md" "$O/$kernel-$where.md" 2>/dev/null
    done
  done
  for manifest in ${MANIFESTS:-}; do
    name=$(basename "$(dirname "$manifest")")
    run "certify-$name-gpu" env ${TRACE:+NVFP4_ORACLE_TRACE=1} timeout 280 $B certify --manifest "$manifest" --seed "$SEED" ${CASES:+--cases $CASES} --sanitize 0 --determinism 0 --reference gpu --report-dir "$R/$name"
    cp "$R/$name"/*.md "$O/" 2>/dev/null
  done
  ;;
esac
