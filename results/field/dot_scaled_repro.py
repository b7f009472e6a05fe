#!/usr/bin/env python3
"""Minimal reproducers for what `dot_scaled.py` found in Triton's `tl.dot_scaled` on Hopper: one
64x64x128 product whose every element of A is the same and every element of B is the same, so
each output is K times one exact product, computed here in exact rational arithmetic. Each case
is also judged by `nvfp4_oracle.assert_gemm`. From the repository root, with the package
installed:

    python3 results/field/dot_scaled_repro.py

Prints a table (case, exact, Triton's output, the oracle's verdict).
"""
from fractions import Fraction

import torch
import triton

import nvfp4_oracle as oracle
from dot_scaled import TRITON_FORMAT, mx_matmul

M = N = 64
K = 128
E2M1 = {0x0: 0, 0x1: Fraction(1, 2), 0x2: 1, 0x4: 2, 0x7: 6}


def ue8m0(byte):
    return None if byte == 0xFF else Fraction(2) ** (byte - 127)


def bf16_value(x):
    return Fraction(torch.tensor(x, dtype=torch.bfloat16).float().item())


# (name, A as (format, element, scale byte), B as (e2m1 code, scale byte), what it shows)
CASES = [
    ("overflow of the upcast", ("mxfp4", 0x7, 254), (0x1, 1),
     "6 * 2^127 leaves bf16's range before B's 2^-126 brings the product back to 6"),
    ("overflow times zero", ("mxfp4", 0x7, 254), (0x0, 127),
     "A upcasts to inf, B is 0: inf * 0 is NaN where every product is 0"),
    ("scale byte 0 is 2^-127", ("mxfp4", 0x2, 0), (0x2, 254),
     "1 * 2^-127 times 1 * 2^127 is 1 per product"),
    ("scale byte 0 on B", ("mxfp4", 0x2, 254), (0x2, 0),
     "the same with the scales swapped"),
    ("largest scale in range", ("mxfp4", 0x7, 253), (0x1, 1),
     "6 * 2^126 = 1.5 * 2^128 also overflows bf16 (largest 2^128 * (1 - 2^-8))"),
    ("no overflow", ("mxfp4", 0x4, 253), (0x1, 1),
     "2 * 2^126 = 2^127 fits: the product is 2 * 2^126 * 2^-127 = 1"),
    ("bf16 A, B overflows", ("bf16", 2.0**-120, None), (0x7, 254),
     "2^-120 * 6 * 2^127 = 768 per product, B alone overflows bf16"),
    ("NaN scale", ("mxfp4", 0x2, 127), (0x2, 0xFF), "a NaN scale makes every output NaN"),
]


def run(a_spec, b_spec):
    a_format, a_element, a_byte = a_spec
    b_code, b_byte = b_spec
    if a_format == "bf16":
        a = torch.full((M, K), a_element, dtype=torch.bfloat16, device="cuda")
        a_scale = None
        a_value = bf16_value(a_element)
    else:
        a = torch.full((M, K // 2), a_element | (a_element << 4), dtype=torch.uint8,
                       device="cuda")
        a_scale = torch.full((M, K // 32), a_byte, dtype=torch.uint8, device="cuda")
        a_value = None if ue8m0(a_byte) is None else E2M1[a_element] * ue8m0(a_byte)
    b = torch.full((N, K // 2), b_code | (b_code << 4), dtype=torch.uint8, device="cuda")
    b_scale = torch.full((N, K // 32), b_byte, dtype=torch.uint8, device="cuda")
    b_value = None if ue8m0(b_byte) is None else E2M1[b_code] * ue8m0(b_byte)
    c = torch.empty((M, N), dtype=torch.float32, device="cuda")
    mx_matmul[(1, 1)](a, a if a_scale is None else a_scale, b, b_scale, c, M, N, K,
                      TRITON_FORMAT[a_format], "e2m1", 2 if a_format == "mxfp4" else 1, 2,
                      M, N, K)
    torch.cuda.synchronize()
    exact = "NaN" if a_value is None or b_value is None else float(K * a_value * b_value)
    try:
        oracle.assert_gemm(c, a, b, a_scale, b_scale, a_format=a_format, b_format="mxfp4",
                           out_dtype="fp32")
        verdict = "accepted"
    except AssertionError:
        verdict = "REJECTED"
    got = sorted({"nan" if x != x else x for x in c.flatten().tolist()}, key=str)
    return exact, got, verdict


def main():
    print(f"torch {torch.__version__}, triton {triton.__version__}, "
          f"{torch.cuda.get_device_name()}")
    print("| case | A | B | exact output | Triton's outputs | oracle | why |")
    print("|---|---|---|---|---|---|---|")
    for name, a_spec, b_spec, why in CASES:
        exact, got, verdict = run(a_spec, b_spec)
        a_text = (f"bf16 {a_spec[1]!r}" if a_spec[0] == "bf16" else
                  f"e2m1 {float(E2M1[a_spec[1]])} x byte {a_spec[2]}")
        b_text = f"e2m1 {float(E2M1[b_spec[0]])} x byte {b_spec[1]}"
        print(f"| {name} | {a_text} | {b_text} | {exact} | {got} | {verdict} | {why} |",
              flush=True)


if __name__ == "__main__":
    main()
