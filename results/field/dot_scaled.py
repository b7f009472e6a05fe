#!/usr/bin/env python3
"""Triton's `tl.dot_scaled` judged by the oracle on a GPU: MXFP4 x MXFP4, MXFP8 (e4m3, e5m2) x
MXFP4 and bf16 x MXFP4 (the pairings it supports without a native block-scaled MMA, where it
upcasts both operands to bf16), f32 output, in the oracle's distributions. Each case is written
by `nvfp4-oracle scaled-gemm reference`, run through a plain Triton matmul whose inner product is
`tl.dot_scaled`, and judged by `nvfp4-oracle scaled-gemm check`. From the repository root:

    python3 results/field/dot_scaled.py --oracle .carry/nvfp4-oracle --out $OUT

Prints one line per case and a summary; exits 1 if any case failed. Needs torch and triton.
"""
import argparse
import json
import struct
import subprocess
import sys
from pathlib import Path

import torch
import triton
import triton.language as tl

PAIRINGS = [("mxfp4", "mxfp4"), ("mxfp8-e4m3", "mxfp4"), ("mxfp8-e5m2", "mxfp4"),
            ("bf16", "mxfp4")]
TRITON_FORMAT = {"mxfp4": "e2m1", "mxfp8-e4m3": "e4m3", "mxfp8-e5m2": "e5m2", "bf16": "bf16"}
SHAPES = ["128x128x256", "64x96x512", "200x136x1024"]
DISTRIBUTIONS = ["normal", "moderate", "codes", "edges"]


@triton.jit
def mx_matmul(a_ptr, a_scale_ptr, b_ptr, b_scale_ptr, c_ptr, M, N, K,
              A_FORMAT: tl.constexpr, B_FORMAT: tl.constexpr, A_PACK: tl.constexpr,
              B_PACK: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
              BLOCK_K: tl.constexpr):
    """C[M, N] = (A * a_scale) @ (B * b_scale)^T with A [M, K / A_PACK] and B [N, K / B_PACK] as
    stored (B as a weight, N rows of K), scales [rows, K / 32]."""
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        offs_ka = k0 // A_PACK + tl.arange(0, BLOCK_K // A_PACK)
        a = tl.load(a_ptr + offs_m[:, None] * (K // A_PACK) + offs_ka[None, :],
                    mask=offs_m[:, None] < M, other=0)
        offs_kb = k0 // B_PACK + tl.arange(0, BLOCK_K // B_PACK)
        b = tl.load(b_ptr + offs_n[None, :] * (K // B_PACK) + offs_kb[:, None],
                    mask=offs_n[None, :] < N, other=0)
        offs_s = k0 // 32 + tl.arange(0, BLOCK_K // 32)
        b_scale = tl.load(b_scale_ptr + offs_n[:, None] * (K // 32) + offs_s[None, :],
                          mask=offs_n[:, None] < N, other=127)
        if A_FORMAT == "bf16":
            acc = tl.dot_scaled(a, None, A_FORMAT, b, b_scale, B_FORMAT, acc)
        else:
            a_scale = tl.load(a_scale_ptr + offs_m[:, None] * (K // 32) + offs_s[None, :],
                              mask=offs_m[:, None] < M, other=127)
            acc = tl.dot_scaled(a, a_scale, A_FORMAT, b, b_scale, B_FORMAT, acc)
    tl.store(c_ptr + offs_m[:, None] * N + offs_n[None, :], acc,
             mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


def read_safetensors(path):
    """name -> (dtype, shape, bytes), without the safetensors package."""
    data = Path(path).read_bytes()
    (length,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + length])
    body = data[8 + length:]
    return {name: (info["dtype"], info["shape"], body[info["data_offsets"][0]:info["data_offsets"][1]])
            for name, info in header.items() if name != "__metadata__"}


def write_f32(path, name, tensor):
    raw = tensor.contiguous().cpu().numpy().tobytes()
    header = json.dumps({name: {"dtype": "F32", "shape": list(tensor.shape),
                                "data_offsets": [0, len(raw)]}}).encode()
    header += b" " * (-len(header) % 8)
    Path(path).write_bytes(struct.pack("<Q", len(header)) + header + raw)


def as_tensor(entry, device):
    dtype, shape, raw = entry
    torch_dtype = {"U8": torch.uint8, "BF16": torch.bfloat16}[dtype]
    return torch.frombuffer(bytearray(raw), dtype=torch_dtype).reshape(shape).to(device)


def run_case(oracle, out_dir, a_format, b_format, shape, dist, seed):
    name = f"{a_format}_x_{b_format}_{shape}_{dist}_{seed}"
    case = out_dir / f"{name}.safetensors"
    made = subprocess.run([oracle, "scaled-gemm", "reference", "--a-format", a_format,
                           "--b-format", b_format, "--shape", shape, "--dist", dist, "--seed",
                           str(seed), "--out-dtype", "fp32", "--out", str(case)],
                          capture_output=True, text=True)
    if made.returncode != 0:
        return name, "error", made.stdout + made.stderr
    tensors = read_safetensors(case)
    m, n, k = (int(x) for x in shape.split("x"))
    a = as_tensor(tensors["a"], "cuda")
    b = as_tensor(tensors["b"], "cuda")
    a_scale = as_tensor(tensors["a_scale"], "cuda") if "a_scale" in tensors else a
    b_scale = as_tensor(tensors["b_scale"], "cuda")
    c = torch.empty((m, n), dtype=torch.float32, device="cuda")
    block = (64, 64, 128)
    grid = (triton.cdiv(m, block[0]), triton.cdiv(n, block[1]))
    mx_matmul[grid](a, a_scale, b, b_scale, c, m, n, k, TRITON_FORMAT[a_format],
                    TRITON_FORMAT[b_format], 2 if a_format == "mxfp4" else 1,
                    2 if b_format == "mxfp4" else 1, *block)
    torch.cuda.synchronize()
    output = out_dir / f"{name}.out.safetensors"
    write_f32(output, "c", c)
    judged = subprocess.run([oracle, "scaled-gemm", "check", "--case", str(case), "--output",
                             str(output)], capture_output=True, text=True)
    verdict = {0: "pass", 1: "FAIL"}.get(judged.returncode, "error")
    if verdict == "pass":
        case.unlink()
        output.unlink()
    return name, verdict, judged.stdout + judged.stderr


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--oracle", default=".carry/nvfp4-oracle")
    parser.add_argument("--out", default="/tmp/dot-scaled")
    parser.add_argument("--seeds", type=int, default=2)
    args = parser.parse_args()
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    print(f"torch {torch.__version__}, triton {triton.__version__}, "
          f"{torch.cuda.get_device_name()}", flush=True)
    failed = 0
    for a_format, b_format in PAIRINGS:
        for shape in SHAPES:
            for dist in DISTRIBUTIONS:
                for seed in range(1, args.seeds + 1):
                    name, verdict, text = run_case(args.oracle, out_dir, a_format, b_format,
                                                   shape, dist, seed)
                    first = text.strip().splitlines()[:4]
                    print(f"{verdict:5} {name}: " + " | ".join(first), flush=True)
                    failed += verdict != "pass"
    print(f"{failed} case(s) not passed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
