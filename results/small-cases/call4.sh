#!/usr/bin/env bash
# Call 4 (one H100; a build, since reverted, in which cases of at most 2^29 products had their
# reference computed by the CPU model on the campaign's cores less two, beside the worker,
# instead of on the GPU): the torch example's 2,000 small cases alone (traced), then the torch
# example's and hopper-baseline's default campaigns traced. Every figure was worse: README.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
mkdir -p "$OUT"
bash results/small-cases/small_traced.sh
NVFP4_ORACLE_TRACE=1 JOBS='manifest:torch' AT_ONCE=1 JOB_TIMEOUT=170 bash results/throughput/run.sh
mv "$OUT/torch-gpu-0-at-once-1.log.gz" "$OUT/torch-default.log.gz"
mv "$OUT/at-once-1.log" "$OUT/at-once-1-torch.log"
NVFP4_ORACLE_TRACE=1 JOBS='kernel:hopper-baseline' AT_ONCE=1 JOB_TIMEOUT=130 bash results/throughput/run.sh
mv "$OUT/at-once-1.log" "$OUT/at-once-1-hopper.log"
