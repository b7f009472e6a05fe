#!/usr/bin/env bash
# On the lent H100, from the repository root, with .carry, .whl, target/wheels (see run.sh) and
# .mmasim (MMA-Sim's `mmasim` package and a COMMIT file, see results/blackwell-mmasim/)
# carried: the minimal dot_scaled reproducers (repro.log), torchao's quantizer vectors (MX FLOOR
# and RCEIL, FP8 per tensor) and MMA-Sim's kind::mxf8f6f4 vectors, all in $OUT/vectors.tar, to be
# copied to golden/conformance/.
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl target/wheels/*.whl || exit 1
export PYTHONPATH=/tmp/site
(cd results/field && timeout 120 python3 dot_scaled_repro.py > $OUT/repro.log 2>&1; echo "exit $?" >> $OUT/repro.log)
v=/tmp/v; mkdir -p $v
{
python3 scripts/gen_mx_quant_vectors.py --elem e2m1 --out $v/mxfp4_quant.safetensors
for e in e4m3 e5m2; do python3 scripts/gen_mx_quant_vectors.py --elem $e --out $v/mxfp8_${e}_quant.safetensors; done
for e in e2m1 e4m3 e5m2; do python3 scripts/gen_mx_quant_vectors.py --elem $e --scaling rceil --out $v/mx_${e}_rceil_quant.safetensors; done
python3 scripts/gen_fp8_quant_vectors.py --out $v/fp8_tensor_quant.safetensors
} > $OUT/vectors.log 2>&1
{
timeout 120 python3 scripts/gen_blackwell_mxf8f6f4_vectors.py --mmasim .mmasim --out /tmp/small.safetensors --count 300 --jobs 16 --verify-full 2 && \
timeout 360 python3 scripts/gen_blackwell_mxf8f6f4_vectors.py --mmasim .mmasim --out $v/blackwell_mmasim_mxf8f6f4.safetensors --count 40000 --seed 2026 --jobs 16 --verify-full 16
echo "exit $?"
} > $OUT/mxf8f6f4.log 2>&1
tar -cf $OUT/vectors.tar -C $v .
tail -3 $OUT/*.log
