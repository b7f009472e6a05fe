#!/usr/bin/env python3
"""Generate MX quantization conformance vectors from torchao's `to_mx`. `--elem` picks the element
format: e2m1 (MXFP4, the default), e4m3 or e5m2 (MXFP8: data is one byte per element,
[ROWS, 128]). `--scaling` picks the scale rule:

  floor  torchao's default: 2^(floor(log2(amax)) - emax), amax's exponent read from its f32
         bits, emax 2 for e2m1, 8 for e4m3, 15 for e5m2
  rceil  cuBLAS's and TransformerEngine's rule as torchao computes it off Blackwell (eager):
         2^ceil(log2(amax / max_pos)) with torch's f32 log2, the data multiplied by the
         reciprocal (1.0 where the scale byte is 0)

Runs wherever torch and torchao (0.18.0, the version these vectors were made with) import. It
quantizes on the CPU, and on CUDA too when a GPU is there (stored under a `cuda_` prefix).

Output (default golden/conformance/mxfp4_quant.safetensors), for input dtype D in {f32, bf16}:

  D_input   [ROWS, 128] D    input matrix (rows of several magnitudes, zeros, infinities,
                              f32 subnormals, values on the rounding boundaries)
  D_data    [ROWS, 64]  U8   packed e2m1 codes as torchao returns them
  D_scale   [ROWS, 4]   U8   UE8M0 scale bytes, one per 32 elements
  cuda_D_data, cuda_D_scale  the same on CUDA

NaN inputs are left out: torchao gives them a NaN scale (0xFF) and element codes from integer
arithmetic on NaN's bits, which the oracle refuses instead of modelling.

On the device machine, with the torchao 0.18.0 wheel carried in .carry/whl/:
  pip install --no-index --no-deps --target /tmp/site .carry/whl/*.whl
  PYTHONPATH=/tmp/site python3 scripts/gen_mx_quant_vectors.py --out $OUT/mxfp4_quant.safetensors
"""

import argparse
import struct

import torch
import torchao
from safetensors.torch import save_file
from torchao.prototype.mx_formats.config import ScaleCalculationMode
from torchao.prototype.mx_formats.mx_tensor import to_mx

K = 128
BLOCK = 32


def rows():
    g = torch.Generator().manual_seed(0x4D58)
    out = []
    # Random rows of many magnitudes: normal, and log-uniform over 2^-140..2^120 per element.
    for scale in [1.0, 1e-3, 1e3, 2.0**-120, 2.0**100]:
        for _ in range(6):
            out.append(torch.randn(K, generator=g) * scale)
    for _ in range(16):
        e = torch.rand(K, generator=g) * 260 - 140
        s = torch.where(torch.rand(K, generator=g) < 0.5, -1.0, 1.0)
        out.append((s * torch.exp2(e)).float())
    # The e2m1 grid scaled by powers of two, and the midpoints between its values (ties).
    grid = torch.tensor([0, 0.5, 1, 1.5, 2, 3, 4, 6], dtype=torch.float32)
    mids = torch.tensor([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, 6.5], dtype=torch.float32)
    for p in [-3, 0, 5]:
        out.append(torch.cat([grid, mids, -grid, -mids] * 4) * 2.0**p)
    # A block's amax just below and at a power of two (the floor of its log2 changes there).
    for amax in [4.0, torch.nextafter(torch.tensor(4.0), torch.tensor(0.0)).item(), 7.9, 8.0]:
        row = torch.rand(K, generator=g) * amax
        row[::BLOCK] = amax
        out.append(row)
    # Zeros (a whole block), f32 subnormals, the largest finite values, infinities.
    special = torch.zeros(K)
    special[BLOCK:2 * BLOCK] = torch.tensor(1e-40) * torch.arange(1, BLOCK + 1)
    special[2 * BLOCK:3 * BLOCK] = torch.finfo(torch.float32).max / torch.arange(1, BLOCK + 1)
    special[3 * BLOCK] = float("inf")
    special[3 * BLOCK + 1] = 3.0
    special[3 * BLOCK + 2] = float("-inf")
    out.append(special)
    # RCEIL's boundaries: blocks whose amax is 0, 1, 2 and 64 f32 ulps above max_pos * 2^p of
    # each element format, where log2(amax / max_pos) is within an f32 ulp of an integer.
    for max_pos in [6.0, 448.0, 57344.0]:
        for p in [-100, -20, 0, 20, 100]:
            base = max_pos * 2.0**p
            row = torch.rand(K, generator=g) * base
            for block, ulps in enumerate([0, 1, 2, 64]):
                (bits,) = struct.unpack("<I", struct.pack("<f", base))
                (row[block * BLOCK],) = struct.unpack("<f", struct.pack("<I", bits + ulps))
            out.append(row)
    return torch.stack(out).contiguous()


ELEMENTS = {"e2m1": (torch.float4_e2m1fn_x2, K // 2), "e4m3": (torch.float8_e4m3fn, K),
            "e5m2": (torch.float8_e5m2, K)}


SCALING = {"floor": ScaleCalculationMode.FLOOR, "rceil": ScaleCalculationMode.RCEIL}


def quantize(x, device, elem, scaling):
    dtype, columns = ELEMENTS[elem]
    scale, data = to_mx(x.to(device), dtype, BLOCK, scaling_mode=SCALING[scaling])
    return (data.view(torch.uint8).cpu().reshape(x.shape[0], columns),
            scale.view(torch.uint8).cpu().reshape(x.shape[0], K // BLOCK))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default="golden/conformance/mxfp4_quant.safetensors")
    parser.add_argument("--elem", choices=sorted(ELEMENTS), default="e2m1")
    parser.add_argument("--scaling", choices=sorted(SCALING), default="floor")
    args = parser.parse_args()
    x32 = rows()
    tensors = {}
    devices = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
    for name, x in [("f32", x32), ("bf16", x32.to(torch.bfloat16))]:
        tensors[f"{name}_input"] = x.contiguous()
        for device in devices:
            prefix = "" if device == "cpu" else "cuda_"
            data, scale = quantize(x, device, args.elem, args.scaling)
            tensors[f"{prefix}{name}_data"] = data.contiguous()
            tensors[f"{prefix}{name}_scale"] = scale.contiguous()
        if "cuda" in devices:
            same = (torch.equal(tensors[f"{name}_data"], tensors[f"cuda_{name}_data"])
                    and torch.equal(tensors[f"{name}_scale"], tensors[f"cuda_{name}_scale"]))
            print(f"{name}: CPU and CUDA {'identical' if same else 'DIFFER'}")
    save_file(tensors, args.out, metadata={
        "generator": "scripts/gen_mx_quant_vectors.py",
        "torch_version": torch.__version__,
        "torchao_version": torchao.__version__,
        "scaling_mode": args.scaling.upper(),
        "element": args.elem,
        "rows": str(x32.shape[0]),
    })
    print(f"{args.out}: {x32.shape[0]} rows of {K}, devices {devices}")


if __name__ == "__main__":
    main()
