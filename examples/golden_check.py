#!/usr/bin/env python3
"""Checks one golden case from Python alone: proof that the format is usable outside Rust.

Loads a dual-GEMM golden case, dequantizes its NVFP4 inputs with numpy (e2m1 lookup table,
e4m3 decoded bit by bit), computes silu(A @ B1^T) * (A @ B2^T) in float64, and asserts that the
result, rounded to fp16, lies inside the stored [lo, hi] interval for every element.

The file is read with the `safetensors` package for its metadata, and its tensors are read from
the raw bytes: numpy has no float8 dtype, so `safetensors.numpy.load_file` cannot load the F8_E4M3
scale tensors (torch users can simply call `safetensors.torch.load_file`).

Usage: python3 examples/golden_check.py [golden/cases/dual-gemm-test-256x512x256-gpumode.safetensors]
Needs: numpy, safetensors (pip install numpy safetensors).
"""
import json
import struct
import sys

import numpy as np
from safetensors import safe_open

E2M1 = np.array([0, 0.5, 1, 1.5, 2, 3, 4, 6, -0.0, -0.5, -1, -1.5, -2, -3, -4, -6])
DTYPES = {"U8": np.uint8, "F8_E4M3": np.uint8, "F16": np.float16}


def read_tensors(path):
    with open(path, "rb") as f:
        raw = f.read()
    (header_len,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8 : 8 + header_len])
    body = raw[8 + header_len :]
    tensors = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        start, end = info["data_offsets"]
        tensors[name] = np.frombuffer(body[start:end], DTYPES[info["dtype"]]).reshape(info["shape"])
    return tensors


def e4m3_to_float(bits):
    """UE4M3 as the tensor cores read a scale: sign ignored, 0x7F is NaN."""
    bits = bits.astype(np.int64) & 0x7F
    exponent, mantissa = bits >> 3, bits & 7
    value = np.where(exponent == 0, mantissa * 2.0**-9, (8 + mantissa) * 2.0 ** (exponent - 10))
    return np.where(bits == 0x7F, np.nan, value)


def dequantize(packed, scales):
    """[L, rows, K/2] packed FP4 and [L, rows, K/16] scales -> float64 [L, rows, K]."""
    codes = np.stack([packed & 0xF, packed >> 4], axis=-1).reshape(*packed.shape[:-1], -1)
    return E2M1[codes] * np.repeat(e4m3_to_float(scales), 16, axis=-1)


def main():
    path = sys.argv[1] if len(sys.argv) > 1 else "golden/cases/dual-gemm-test-256x512x256-gpumode.safetensors"
    with safe_open(path, framework="numpy") as f:
        meta = f.metadata()
    assert meta["problem"] == "dual-gemm", meta
    t = read_tensors(path)
    a, b1, b2 = (dequantize(t[x], t["sf" + x]) for x in ("a", "b1", "b2"))
    d1 = np.einsum("lmk,lnk->mnl", a, b1)
    d2 = np.einsum("lmk,lnk->mnl", a, b2)
    c = (d1 / (1.0 + np.exp(-d1)) * d2).astype(np.float16)
    lo, hi = t["lo"].astype(np.float64), t["hi"].astype(np.float64)
    inside = (lo <= c) & (c <= hi) | (np.isnan(lo) & np.isnan(c))
    print(f"{path}: shape {meta['shape']}, {inside.sum()} of {inside.size} elements inside [lo, hi]")
    assert inside.all(), np.argwhere(~inside)[:10]


if __name__ == "__main__":
    main()
