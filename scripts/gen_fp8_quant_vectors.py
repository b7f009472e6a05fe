#!/usr/bin/env python3
"""Generate FP8 e4m3 per-tensor quantization conformance vectors from torchao's float8 recipe
(`torchao.float8.float8_utils`): the scale is `s = f32(448 / max(amax, 1e-12))`, computed in f64,
the data `saturate(x * s)` cast to e4m3 with round-to-nearest-even, and the GEMM's scale the f32
reciprocal `1 / s` (what torchao hands `torch._scaled_mm`). Each row of the input matrix is
quantized as its own tensor, so one file holds rows of many magnitudes. The rows are those of
scripts/gen_mx_quant_vectors.py.

Output (default golden/conformance/fp8_tensor_quant.safetensors), for input dtype D in
{f32, bf16}:

  D_input    [ROWS, 128] D    the input rows
  D_data     [ROWS, 128] U8   e4m3 codes
  D_scale    [ROWS]      F32  s for each row (row-tensor)
  D_inverse  [ROWS]      F32  1 / s, the scale the GEMM applies

On the device machine, with the torchao 0.18.0 wheel installed in /tmp/site:
  PYTHONPATH=/tmp/site python3 scripts/gen_fp8_quant_vectors.py --out $OUT/fp8_tensor_quant.safetensors
"""

import argparse

import torch
import torchao
from safetensors.torch import save_file
from torchao.float8.float8_utils import amax_to_scale, to_fp8_saturated

from gen_mx_quant_vectors import rows


def quantize_row(x):
    amax = x.abs().max()
    scale = amax_to_scale(amax, torch.float8_e4m3fn)
    data = to_fp8_saturated(x.to(torch.float32) * scale, torch.float8_e4m3fn)
    return data.view(torch.uint8), scale, scale.reciprocal()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default="golden/conformance/fp8_tensor_quant.safetensors")
    args = parser.parse_args()
    x32 = rows()
    tensors = {}
    for name, x in [("f32", x32), ("bf16", x32.to(torch.bfloat16))]:
        quantized = [quantize_row(row) for row in x]
        tensors[f"{name}_input"] = x.contiguous()
        tensors[f"{name}_data"] = torch.stack([q[0] for q in quantized]).contiguous()
        tensors[f"{name}_scale"] = torch.stack([q[1] for q in quantized]).float().contiguous()
        tensors[f"{name}_inverse"] = torch.stack([q[2] for q in quantized]).float().contiguous()
    save_file(tensors, args.out, metadata={
        "generator": "scripts/gen_fp8_quant_vectors.py",
        "torch_version": torch.__version__,
        "torchao_version": torchao.__version__,
        "rows": str(x32.shape[0]),
    })
    print(f"{args.out}: {x32.shape[0]} rows of {x32.shape[1]}")


if __name__ == "__main__":
    main()
