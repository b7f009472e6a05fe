#!/usr/bin/env python3
"""torchao's emulated block-scaled matmuls judged by the oracle on a GPU: `torch.mm` on two
`MXTensor`s made by `MXTensor.to_mx` with `KernelPreference.EMULATED` (torchao's default off
Blackwell: each operand dequantized to its original dtype, then a plain matmul), for MXFP4,
MXFP8 e4m3 and e5m2 and MXFP8 x MXFP4, from f32 and from bf16 data; and the NVFP4 weight-only
linear (`F.linear` of bf16 activations with an `NVFP4Tensor` weight, no per-tensor scale: the
weight dequantized to bf16). Each output goes through `nvfp4_oracle.assert_gemm` with the
operands' own codes and scales. From the repository root, with torchao and the package installed:

    python3 results/field/torchao_emulated.py

Every case runs with torch's default `allow_bf16_reduced_precision_reduction` (True: cuBLAS may
reduce split-K partials in bf16), and those from bf16 data once more with it off. Prints one line per case and a summary;
exits 1 if any case failed.
"""
import sys

import torch
import torch.nn.functional as F
import torchao
from torchao.prototype.mx_formats.config import ScaleCalculationMode
from torchao.prototype.mx_formats.mx_tensor import MXTensor
from torchao.prototype.mx_formats.nvfp4_tensor import NVFP4Tensor

import nvfp4_oracle as oracle

ELEMENTS = {"mxfp4": torch.float4_e2m1fn_x2, "mxfp8-e4m3": torch.float8_e4m3fn,
            "mxfp8-e5m2": torch.float8_e5m2}
MX_PAIRINGS = [("mxfp4", "mxfp4"), ("mxfp8-e4m3", "mxfp8-e4m3"), ("mxfp8-e5m2", "mxfp8-e5m2"),
               ("mxfp8-e4m3", "mxfp4")]
SHAPES = [(128, 128, 256), (64, 96, 512), (256, 512, 4096), (16, 2048, 7168)]
# Magnitudes of the data: everyday, tiny (scales near 2^-127, elements near bf16's subnormals),
# large (scales near 2^54: products near 2^112, sums still inside f32), and a heavy tail (a few
# outliers per row).
DATA = ["normal", "tiny", "large", "outliers"]
OUT_DTYPE = {torch.float32: "fp32", torch.bfloat16: "bf16"}


def data(kind, rows, k, dtype, generator):
    x = torch.randn((rows, k), generator=generator)
    if kind == "tiny":
        x = x * 2.0**-120
    elif kind == "large":
        x = x * 2.0**56
    elif kind == "outliers":
        x = x * torch.where(torch.rand((rows, k), generator=generator) < 0.01, 1e4, 1.0)
    return x.to(dtype).cuda()


def codes(tensor, rows, k, packed):
    return tensor.qdata.view(torch.uint8).reshape(rows, k // 2 if packed else k)


def scales(tensor, rows, k, block):
    return tensor.scale.view(torch.uint8).reshape(rows, k // block)


def mx_case(a_format, b_format, shape, kind, dtype, generator):
    m, n, k = shape
    a_hp = data(kind, m, k, dtype, generator)
    w_hp = data(kind, n, k, dtype, generator)
    a = MXTensor.to_mx(a_hp, ELEMENTS[a_format], 32, ScaleCalculationMode.FLOOR)
    w = MXTensor.to_mx(w_hp, ELEMENTS[b_format], 32, ScaleCalculationMode.FLOOR)
    out = torch.mm(a, w.t())
    torch.cuda.synchronize()
    return oracle.assert_gemm(
        out, codes(a, m, k, a_format == "mxfp4"), codes(w, n, k, b_format == "mxfp4"),
        scales(a, m, k, 32), scales(w, n, k, 32), a_format=a_format, b_format=b_format,
        out_dtype=OUT_DTYPE[dtype])


def nvfp4_weight_only_case(shape, kind, generator):
    m, n, k = shape
    x = data(kind, m, k, torch.bfloat16, generator)
    w = NVFP4Tensor.to_nvfp4(data(kind, n, k, torch.bfloat16, generator))
    out = F.linear(x, w)
    torch.cuda.synchronize()
    return oracle.assert_gemm(
        out, x, w.qdata.view(torch.uint8).reshape(n, k // 2), None,
        w.scale.view(torch.uint8).reshape(n, k // 16), a_format="bf16", b_format="nvfp4",
        out_dtype="bf16")


def judge(name, run):
    try:
        reference = run()
        print(f"pass  {name} ({reference.unjudged} unjudged)", flush=True)
        return True
    except AssertionError as failure:
        lines = str(failure).splitlines()
        print(f"FAIL  {name}: " + "\n      ".join(lines[:6]), flush=True)
        return False


def main():
    print(f"torch {torch.__version__}, torchao {torchao.__version__}, "
          f"{torch.cuda.get_device_name()}", flush=True)
    failed = 0
    for reduced in (True, False):
        torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = reduced
        print(f"-- allow_bf16_reduced_precision_reduction = {reduced}", flush=True)
        for seed, shape in enumerate(SHAPES):
            for kind in DATA:
                generator = torch.Generator().manual_seed(seed * 16 + DATA.index(kind))
                shape_name = "x".join(map(str, shape))
                for a_format, b_format in MX_PAIRINGS:
                    for dtype in (torch.float32, torch.bfloat16)[0 if reduced else 1:]:
                        name = (f"mm {a_format} x {b_format} from {OUT_DTYPE[dtype]} "
                                f"{shape_name} {kind}")
                        failed += not judge(name, lambda: mx_case(a_format, b_format, shape,
                                                                  kind, dtype, generator))
                name = f"linear bf16 x nvfp4 weight-only {shape_name} {kind}"
                failed += not judge(name, lambda: nvfp4_weight_only_case(shape, kind, generator))
    print(f"{failed} case(s) not passed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
