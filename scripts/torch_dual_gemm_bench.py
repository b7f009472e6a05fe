#!/usr/bin/env python3
"""Times the torch paths of the NVFP4 dual GEMM for `nvfp4-oracle bench` (same run, same GPU).

For each shape MxNxK: (1) dequantize FP4 with a lookup table and the e4m3 scales, two cuBLAS fp16
GEMMs, silu * mul; (2) the same with the weights already dequantized to fp16. Also the fp16
tensor-core ceiling: an 8192^3 fp16 matmul. L2 is flushed before every timed call. Prints JSON.

Usage: python3 torch_dual_gemm_bench.py --shapes 256x4096x7168,512x4096x7168 --reps 30
"""
import argparse
import json

import torch

E2M1 = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0]


def timed(fn, reps, flush):
    for _ in range(3):
        fn()
    times = []
    for _ in range(reps):
        flush.zero_()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end) * 1000.0)
    times.sort()
    return times[len(times) // 2]


def dequantize(packed, scales, lut):
    codes = torch.stack([packed & 0xF, packed >> 4], dim=-1).reshape(packed.shape[0], -1).long()
    return lut[codes] * scales.to(torch.float16).repeat_interleave(16, dim=1)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--shapes", required=True)
    parser.add_argument("--reps", type=int, default=30)
    args = parser.parse_args()
    dev = torch.device("cuda")
    flush = torch.empty(256 << 20, dtype=torch.uint8, device=dev)
    lut = torch.tensor(E2M1, dtype=torch.float16, device=dev)
    x = torch.randn(8192, 8192, dtype=torch.float16, device=dev)
    ceiling_us = timed(lambda: x @ x, args.reps, flush)
    out = {"ceiling_tflops": 2 * 8192**3 / ceiling_us / 1e6, "torch": torch.__version__, "gpu": torch.cuda.get_device_name(), "shapes": {}}
    for text in args.shapes.split(","):
        m, n, k = (int(v) for v in text.split("x")[:3])
        g = torch.Generator(device=dev).manual_seed(1111)
        pack = lambda rows: (torch.randint(0, 256, (rows, k // 2), generator=g, device=dev, dtype=torch.uint8) & 0xBB)
        scale = lambda rows: torch.rand(rows, k // 16, generator=g, device=dev).to(torch.float8_e4m3fn)
        a, b1, b2 = pack(m), pack(n), pack(n)
        sa, sb1, sb2 = scale(m), scale(n), scale(n)

        def full_path():
            af, b1f, b2f = dequantize(a, sa, lut), dequantize(b1, sb1, lut), dequantize(b2, sb2, lut)
            d1, d2 = (af @ b1f.T).float(), (af @ b2f.T).float()
            return (torch.nn.functional.silu(d1) * d2).half()

        af, b1f, b2f = dequantize(a, sa, lut), dequantize(b1, sb1, lut), dequantize(b2, sb2, lut)

        def predequantized():
            d1, d2 = (af @ b1f.T).float(), (af @ b2f.T).float()
            return (torch.nn.functional.silu(d1) * d2).half()

        out["shapes"][f"{m}x{n}x{k}"] = {
            "torch_dequant_us": timed(full_path, args.reps, flush),
            "fp16_predequant_us": timed(predequantized, args.reps, flush),
        }
    print(json.dumps(out))


if __name__ == "__main__":
    main()
