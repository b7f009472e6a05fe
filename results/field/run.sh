#!/usr/bin/env bash
# The field's kernels and quantizers on the lent H100, in one call. Built here first:
#   cargo build --release && mkdir -p .carry && cp target/release/nvfp4-oracle .carry/ && strip .carry/nvfp4-oracle
#   target/python-venv/bin/maturin build --release --strip --locked -m python/Cargo.toml -o target/wheels
#   python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
#       --platform manylinux_2_28_x86_64 -d .whl torchao==0.18.0
# then, on the GPU machine with .carry, .whl and target/wheels carried, from the repository root:
#   bash results/field/run.sh
# Writes under $OUT: env.txt, dot_scaled.log (+ dot_scaled_failed.tar with the failing cases'
# files, if any), torchao_emulated.log, pytest.log. The conformance vectors and the minimal
# reproducers are made by vectors_run.sh beside it.
set -u
OUT=${OUT:-/tmp/field-out}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target /tmp/site .whl/*.whl target/wheels/*.whl || exit 1
export PYTHONPATH=/tmp/site
{
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  python3 -c 'import torch, triton, torchao, numpy; print("torch", torch.__version__, "triton", triton.__version__, "torchao", torchao.__version__, "numpy", numpy.__version__)'
  python3 --version
} > "$OUT/env.txt" 2>&1

timeout 240 python3 results/field/dot_scaled.py --oracle .carry/nvfp4-oracle --out /tmp/dot-scaled \
  > "$OUT/dot_scaled.log" 2>&1
echo "exit $?" >> "$OUT/dot_scaled.log"
if ls /tmp/dot-scaled/*.safetensors > /dev/null 2>&1; then
  tar -cf "$OUT/dot_scaled_failed.tar" -C /tmp/dot-scaled .
fi

timeout 330 python3 results/field/torchao_emulated.py > "$OUT/torchao_emulated.log" 2>&1
echo "exit $?" >> "$OUT/torchao_emulated.log"

timeout 120 python3 -m pytest -v -rs -p no:cacheprovider python/tests/test_torch.py \
  python/tests/test_gemm.py python/tests/test_strategies.py examples/pytest/test_nvfp4_gemm_vllm_style.py \
  > "$OUT/pytest.log" 2>&1
echo "exit $?" >> "$OUT/pytest.log"
