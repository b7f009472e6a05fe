#!/usr/bin/env python3
"""Generate NVFP4 quantization conformance vectors from torchao.

Runs wherever `torch`, `torchao` (>= 0.18, the version these vectors were
made with) and `safetensors` import. It always quantizes on the CPU; if CUDA
is available it quantizes the same inputs on the GPU too and stores those
results under a `cuda_` prefix (the two differ in a few designed places, see
docs/research/torchao-nvfp4-semantics.md).

Output (default golden/conformance/nvfp4_quant.safetensors), for every
recipe R in {single_level, two_level, two_level_fixed} and input dtype D in
{f32, bf16}:

  R_D_input         [32,128] D      input matrix
  R_D_data          [32,64]  U8     packed e2m1 codes as torchao returns them
  R_D_scale         [32,8]   U8     e4m3 scale bit patterns, plain row-major
  R_D_tensor_scale  [1]      F32    per-tensor scale used (two-level recipes)
  (same four with suffix _special: inf/NaN inputs, [4,128])
  (same four with suffix _special_inf: inf but no NaN inputs, [2,128])
  cuda_R_D_data / cuda_R_D_scale / cuda_R_D_tensor_scale (+ suffixes)
  single_level_f32_scale_swizzled  U8 torchao's swizzled (blocked) scale layout

Recipes:
  single_level     NVFP4Tensor.to_nvfp4(x)                 (no per-tensor scale)
  two_level        pts = per_tensor_amax_to_scale(torch.max(torch.abs(x)))
                   NVFP4Tensor.to_nvfp4(x, per_tensor_scale=pts)
                   (torchao's dynamic per-tensor-scale path)
  two_level_fixed  pts = 0.5 (a calibrated/static scale), to_nvfp4(x, pts)

float16 is not accepted by torchao 0.18's nvfp4_quantize (it asserts bf16 or
f32); the script tries it and records the outcome in the metadata.

The script also checks torchao's outputs against an independent pure-Python
model of the documented arithmetic (CPU: divide by 6 / 2688; CUDA: multiply by
their f32 reciprocals) and records the result in the metadata.

Usage: python3 scripts/gen_quant_vectors.py [--out PATH] [--summary PATH]
Reproduced on the device machine with the torchao 0.18.0 wheel in .whl/:
  pip install --no-index --no-deps --target /tmp/site .whl/*.whl
  PYTHONPATH=/tmp/site python3 scripts/gen_quant_vectors.py \
      --out golden/conformance/nvfp4_quant.safetensors \
      --summary golden/conformance/nvfp4_quant_summary.json
"""

import argparse
import json
import math
import os
import struct
import sys

import torch
import torchao
from safetensors.torch import save_file
from torchao.prototype.mx_formats.nvfp4_tensor import (
    NVFP4Tensor,
    nvfp4_quantize,
    per_tensor_amax_to_scale,
)
from torchao.prototype.mx_formats.utils import to_blocked

SEED = 20251121
R, K, BS = 32, 128, 16
NB = K // BS
FIXED_PTS = 0.5

DTYPES = {"f32": torch.float32, "bf16": torch.bfloat16}
RECIPES = ["single_level", "two_level", "two_level_fixed"]


# ---------------------------------------------------------------- helpers
def f32(x):
    return struct.unpack("<f", struct.pack("<f", x))[0]


def f32_bits(x):
    return struct.unpack("<I", struct.pack("<f", x))[0]


def f32_from_bits(b):
    return struct.unpack("<f", struct.pack("<I", b & 0xFFFFFFFF))[0]


def rep(v, dtype):
    """Round a python float to dtype and return it as a python float."""
    return float(torch.tensor([v], dtype=torch.float64).to(dtype)[0])


def nudge(v, dtype, n):
    """Move |v| by n ulps of dtype (n>0: away from zero). v must be exact in dtype."""
    t = torch.tensor([v], dtype=dtype)
    ib = torch.int32 if dtype == torch.float32 else torch.int16
    b = t.view(ib) + n
    return float(b.view(dtype)[0])


def e4m3_rne_pos(x):
    """Reference RNE of a positive normal-range value to e4m3 (search only)."""
    e = max(math.floor(math.log2(x)), -6)
    q = x / 2.0 ** (e - 3)
    return round(q) * 2.0 ** (e - 3)


def div_vs_recip_amaxes():
    """f32 amax values a where fl32(a/6) and fl32(a*fl32(1/6)) give different
    e4m3 block scales (CPU divides, CUDA multiplies by the rounded reciprocal
    when the divisor is a Python scalar)."""
    c = f32(1.0 / 6.0)
    found = []
    for e in range(-6, 9):
        for k in range(8):
            t = (8 + k + 0.5) * 2.0 ** (e - 3)  # e4m3 rounding tie
            if t > 448:
                continue
            b0 = f32_bits(f32(6 * t))
            for d in range(-40, 41):
                a = f32_from_bits(b0 + d)
                q1, q2 = f32(a / 6.0), f32(a * c)
                if q1 != q2 and e4m3_rne_pos(q1) != e4m3_rne_pos(q2):
                    found.append(a)
    return found


# e4m3 rounding ties t (amax = 6 t): value -> expected RNE neighbour
E4M3_TIES = [1.0625, 1.1875, 1.9375, 17 / 1024, 19 / 1024, 432.0, 168.0, 3.125]
E2M1_TIES = [0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0]


def build_main(dtype, variant):
    """variant: 'single' (also used by two_level_fixed) or 'two' (two_level:
    no values that would make the global amax absurd)."""
    g = torch.Generator().manual_seed(SEED)
    x = torch.zeros(R, K, dtype=torch.float64)
    desc = {}

    def randn(n, scale=1.0):
        return torch.randn(n, generator=g, dtype=torch.float64) * scale

    def block_with_amax(amax, pos, sign=1.0):
        v = (torch.rand(BS, generator=g, dtype=torch.float64) * 1.8 - 0.9) * amax
        v[pos] = sign * amax
        return v

    def setb(r, b, vals):
        x[r, b * BS:(b + 1) * BS] = torch.as_tensor(vals, dtype=torch.float64)

    # 0-5: random normal rows at magnitudes 1e-3, 1, 1e3
    for r, m in zip(range(6), [1e-3, 1e-3, 1.0, 1.0, 1e3, 1e3]):
        x[r] = randn(K, m)
        desc[r] = f"randn*{m:g}"
    # 6: per-block magnitude 10^(b-4)
    for b in range(NB):
        setb(6, b, randn(BS, 10.0 ** (b - 4)))
    desc[6] = "randn*10^(block-4)"
    # 7: zero blocks (0-3 +0.0, 4-7 -0.0)
    x[7, :K // 2] = 0.0
    x[7, K // 2:] = -0.0
    desc[7] = "blocks 0-3 +0.0, blocks 4-7 -0.0"
    # 8: one huge value, rest tiny
    spikes = [1000.0, -1000.0, 2688.0, -2688.0, 100.0, -6.0, 1e4, 3e4]
    if variant == "two":
        # 2976 is the global amax of the two_level input: bf16-exact, and
        # 2976/2688 rounds differently from 2976*fl32(1/2688), so the
        # per-tensor scale differs between CPU (divide) and CUDA (multiply)
        spikes = [1000.0, -1000.0, 2976.0, -2688.0, 100.0, -6.0, 500.0, -30.0]
    for b in range(NB):
        v = randn(BS, 1e-4)
        v[(5 * b + 3) % BS] = spikes[b]
        setb(8, b, v)
    desc[8] = f"one spike per block {spikes}, rest randn*1e-4"
    # 9: exact e2m1 ties after scaling (amax 6*m -> scale m, m power of two)
    mults = [1, 1, 1, 1, 2, 0.5, 0.25, 4]
    base = [6.0] + E2M1_TIES
    for b in range(NB):
        vals = torch.tensor(base + [-v for v in base], dtype=torch.float64) * mults[b]
        perm = torch.randperm(BS, generator=g)
        setb(9, b, vals[perm])
    desc[9] = f"e2m1 ties {E2M1_TIES} and +-6, times block multiplier {mults}"
    # 10: one ulp (of dtype) either side of the e2m1 ties
    mults10 = [1, 1, 2, 0.5, 1, 1, 0.25, 4]
    for b in range(NB):
        m = mults10[b]
        vals = [6.0 * m * (1 if b % 2 == 0 else -1)]
        for t in E2M1_TIES:
            for n in (-1, 1):
                vals.append(nudge(t * m, dtype, n))
        vals.append(0.0)
        vals = torch.tensor(vals, dtype=torch.float64)
        signs = torch.where(torch.rand(BS, generator=g) < 0.5, -1.0, 1.0).double()
        signs[0] = 1.0
        vals = vals * signs
        perm = torch.randperm(BS, generator=g)
        setb(10, b, vals[perm])
    desc[10] = f"e2m1 ties +-1 ulp of input dtype, block multiplier {mults10}"
    # 11-13: amax/6 exactly at an e4m3 tie, 1 ulp below, 1 ulp above
    for b, t in enumerate(E4M3_TIES):
        a = 6.0 * t
        setb(11, b, block_with_amax(a, (3 * b) % BS, 1 if b % 2 else -1))
        setb(12, b, block_with_amax(nudge(a, dtype, -1), (3 * b + 1) % BS))
        setb(13, b, block_with_amax(nudge(a, dtype, 1), (3 * b + 2) % BS))
    desc[11] = f"amax = 6*t, t e4m3 ties {E4M3_TIES}"
    desc[12] = "amax = 6*t minus 1 ulp (input dtype)"
    desc[13] = "amax = 6*t plus 1 ulp (input dtype)"
    # 14: block scale below E4M3_EPS (2^-6) -> clamps up
    eps_amax = [1e-3, 0.09, 0.09375, 6 * 2.0**-7, 6 * 2.0**-9 * 1.5, 1e-20, 1e-38, 0.0934]
    for b, a in enumerate(eps_amax):
        setb(14, b, block_with_amax(rep(a, dtype), (7 * b) % BS))
    desc[14] = f"EPS clamp / e4m3-subnormal-range scales, amax {eps_amax}"
    # 15: block scale above 448 -> clamps down
    if variant == "single":
        big = [2688.0, nudge(2688.0, dtype, 1), 2700.0, 2760.0, 3000.0, 1e4, 1e6, 3e38]
        for b, a in enumerate(big):
            setb(15, b, block_with_amax(rep(a, dtype), (7 * b + 1) % BS, -1 if b % 3 == 0 else 1))
        desc[15] = f"448 clamp, amax {big}"
    else:
        x[15] = randn(K, 100.0)
        desc[15] = "randn*100 (two_level input has no 448-clamp row)"
    # 16-17: amaxes where CPU a/6 and CUDA a*fl(1/6) round to different e4m3
    dv = div_vs_recip_amaxes()
    dv = (dv + [6.375] * 16)[:16]
    for i, a in enumerate(dv):
        r, b = 16 + i // NB, i % NB
        setb(r, b, block_with_amax(rep(a, dtype), (5 * i + 2) % BS))
    desc[16] = desc[17] = f"f32 amaxes where a/6 vs a*fl32(1/6) differ in e4m3: {dv}"
    # 18-31: random blocks with random magnitudes 10^U(-4,4), some uniform
    for r in range(18, R):
        for b in range(NB):
            u = float(torch.rand(1, generator=g, dtype=torch.float64))
            # two_level: keep the global amax near 2688 so pts stays ~1
            mag = 10.0 ** (u * 8 - 4) if variant == "single" else 10.0 ** (u * 5.5 - 3)
            if r % 2 == 0:
                setb(r, b, randn(BS, mag))
            else:
                setb(r, b, (torch.rand(BS, generator=g, dtype=torch.float64) * 2 - 1) * mag)
        desc[r] = ("per-block randn (even rows) or uniform[-1,1) (odd rows) * "
                   + ("10^U(-4,4)" if variant == "single" else "10^U(-3,2.5)"))
    return x.to(dtype), desc


NAN_NEG_F32 = 0xFFC00000


def build_special(dtype, with_nan):
    g = torch.Generator().manual_seed(SEED + 1)
    inf, nan = math.inf, math.nan
    rows = 4 if with_nan else 2
    x = torch.randn(rows, K, generator=g, dtype=torch.float64)
    negnan = torch.zeros(rows, K, dtype=torch.bool)

    def blk(r, b):
        return slice(b * BS, (b + 1) * BS)

    if with_nan:
        # row 0
        x[0, blk(0, 0)][3] = inf
        x[0, blk(0, 1)][0] = -inf
        x[0, blk(0, 2)][5] = nan
        x[0, 3 * BS + 7] = nan
        negnan[0, 3 * BS + 7] = True
        x[0, 4 * BS + 1], x[0, 4 * BS + 9] = inf, -inf
        x[0, 5 * BS + 2], x[0, 5 * BS + 4] = nan, inf
        # block 6 finite
        x[0, blk(0, 7)] = nan
        # row 1
        x[1, blk(1, 0)] = inf
        x[1, blk(1, 1)] = -inf
        x[1, blk(1, 2)] = 0.0
        x[1, 2 * BS + 6] = inf
        x[1, blk(1, 3)] = 0.0
        x[1, 3 * BS + 6] = nan
        x[1, blk(1, 4)] *= 1e4
        x[1, blk(1, 5)] *= 1e-4
        x[1, 6 * BS + 15] = nan
        x[1, 7 * BS + 0] = nan
        negnan[1, 7 * BS + 0] = True
        # rows 2-3 finite control rows
        desc = {
            0: "b0 +inf@3, b1 -inf@0, b2 NaN@5, b3 -NaN@7, b4 +inf@1 -inf@9, "
               "b5 NaN@2 +inf@4, b6 finite, b7 all NaN; rest randn",
            1: "b0 all +inf, b1 all -inf, b2 zeros +inf@6, b3 zeros NaN@6, "
               "b4 randn*1e4, b5 randn*1e-4, b6 NaN@15, b7 -NaN@0",
            2: "finite randn", 3: "finite randn",
        }
    else:
        x[0, 0 * BS + 2] = inf
        x[0, 1 * BS + 11] = -inf
        x[0, blk(0, 2)] = inf
        x[0, blk(0, 3)] = 0.0
        x[0, 3 * BS + 5] = -inf
        desc = {0: "b0 +inf@2, b1 -inf@11, b2 all +inf, b3 zeros -inf@5, b4-7 randn",
                1: "finite randn"}
    out = x.to(dtype)
    if negnan.any():
        ib = torch.int32 if dtype == torch.float32 else torch.int16
        bits = NAN_NEG_F32 if dtype == torch.float32 else (NAN_NEG_F32 >> 16)
        if bits >= 2 ** (torch.iinfo(ib).bits - 1):
            bits -= 2 ** torch.iinfo(ib).bits
        v = out.view(ib)
        v[negnan] = bits
    return out, desc


# ---------------------------------------------------------------- quantize
def quantize(x, recipe, device):
    xd = x.to(device)
    if recipe == "single_level":
        pts = None
    elif recipe == "two_level":
        pts = per_tensor_amax_to_scale(torch.max(torch.abs(xd)))
    else:
        pts = torch.tensor(FIXED_PTS, dtype=torch.float32, device=device)
    t = NVFP4Tensor.to_nvfp4(xd, block_size=16, per_tensor_scale=pts, is_swizzled_scales=False)
    # cross-check against the underlying function
    s2, d2 = nvfp4_quantize(xd, 16, pts)
    assert torch.equal(t.qdata.view(torch.uint8), d2.view(torch.uint8))
    assert torch.equal(t.scale.view(torch.uint8), s2.view(torch.uint8))
    assert t.qdata.dtype == torch.uint8 and t.scale.dtype == torch.float8_e4m3fn
    assert tuple(t.qdata.shape) == (x.shape[0], K // 2)
    assert tuple(t.scale.shape) == (x.shape[0], K // BS)
    data = t.qdata.contiguous().cpu()
    scale = t.scale.contiguous().view(torch.uint8).cpu()
    ts = None if pts is None else pts.detach().reshape(1).to(torch.float32).cpu()
    return data, scale, ts


def blocks_str(data, scale):
    """Human-readable: per block 'SS:c0c1..c15' (scale hex, nibble codes)."""
    lines = []
    for r in range(data.shape[0]):
        codes = []
        for byte in data[r].tolist():
            codes += [byte & 0xF, byte >> 4]
        parts = []
        for b in range(scale.shape[1]):
            parts.append(f"{scale[r, b].item():02x}:" + "".join(f"{c:x}" for c in codes[b * BS:(b + 1) * BS]))
        lines.append(" ".join(parts))
    return lines


# ------------------------------------------- independent reference (checks the doc)
def _f32op(v):
    try:
        return f32(v)
    except OverflowError:
        return math.copysign(math.inf, v)


def _e4m3_bits(v):
    """RNE of v in [2^-6, 448] to e4m3fn; returns the bit pattern."""
    m, ex = math.frexp(v)  # v = m * 2^ex, m in [0.5, 1)
    e = ex - 1
    r = round(v / 2.0 ** (e - 3))  # 8..16, exact halves -> even
    if r == 16:
        r, e = 8, e + 1
    return ((e + 7) << 3) | (r - 8)


def _e4m3_val(b):
    e, m = (b >> 3) & 0xF, b & 7
    return (1 + m / 8) * 2.0 ** (e - 7) if e else m / 8 * 2.0 ** -6


_E2M1_CODE = {0.0: 0, 0.5: 1, 1.0: 2, 1.5: 3, 2.0: 4, 3.0: 5, 4.0: 6, 6.0: 7}


def _e2m1_code(v):
    neg = f32_bits(v) >> 31
    a = abs(v)
    if a < 2:
        q = round(a * 2) / 2
    elif a < 4:
        q = float(round(a))
    else:
        q = float(round(a / 2) * 2)
    return _E2M1_CODE[q] | (neg << 3)


def reference(x, pts, scale_div):
    """Pure-python model of nvfp4_quantize for finite x ([rows, K] tensor).
    scale_div: 'div' -> amax/6 rounded once (CPU); 'mul' -> amax*fl32(1/6) (CUDA)."""
    xs = x.float().tolist()
    c6 = f32(1.0 / 6.0)
    eps, mx = 2.0 ** -6, 448.0
    data, scales = [], []
    for row in xs:
        codes, srow = [], []
        for b in range(len(row) // BS):
            blk = row[b * BS:(b + 1) * BS]
            amax = max(abs(v) for v in blk)
            bs = _f32op(amax / 6.0) if scale_div == "div" else _f32op(amax * c6)
            if pts is None:
                sb = _e4m3_bits(min(max(bs, eps), mx))
                recip = _f32op(1.0 / _e4m3_val(sb))
            else:
                sc = _f32op(bs / pts)
                sb = _e4m3_bits(min(max(sc, eps), mx))
                recip = _f32op(_f32op(1.0 / pts) / _e4m3_val(sb))
            srow.append(sb)
            for v in blk:
                y = _f32op(v * recip)
                y = min(max(y, -6.0), 6.0) if y == y else y
                codes.append(_e2m1_code(y))
        data.append([codes[i] | (codes[i + 1] << 4) for i in range(0, len(codes), 2)])
        scales.append(srow)
    return (torch.tensor(data, dtype=torch.uint8), torch.tensor(scales, dtype=torch.uint8))


def check_reference(tensors, summary):
    res = {}
    for recipe in RECIPES:
        for dname in DTYPES:
            key = f"{recipe}_{dname}"
            x = tensors[f"{key}_input"]
            for pre in ("", "cuda_"):
                if f"{pre}{key}_data" not in tensors:
                    continue
                ts = tensors.get(f"{pre}{key}_tensor_scale")
                pts = None if ts is None else float(ts[0])
                if recipe == "two_level":
                    amax = float(x.float().abs().max())
                    res[f"{pre or 'cpu_'}{key} tensor_scale"] = {
                        "stored": pts, "amax/2688": f32(amax / 2688.0),
                        "amax*fl32(1/2688)": f32(amax * f32(1.0 / 2688.0))}
                for mode in ("div", "mul"):
                    d, s = reference(x, pts, mode)
                    nd = int((d != tensors[f"{pre}{key}_data"]).sum())
                    ns = int((s != tensors[f"{pre}{key}_scale"]).sum())
                    res[f"{pre or 'cpu_'}{key} vs ref[{mode}]"] = f"data bytes differing {nd}, scale bytes differing {ns}"
    summary["reference_check"] = res
    return res


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="golden/conformance/nvfp4_quant.safetensors")
    ap.add_argument("--summary", default=None, help="optional JSON summary path")
    args = ap.parse_args()

    torch.manual_seed(SEED)
    devices = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
    tensors = {}
    summary = {"diffs_cpu_vs_cuda": {}, "special_dump": {}}
    inputs = {}

    for dname, dt in DTYPES.items():
        main_single, desc_single = build_main(dt, "single")
        main_two, desc_two = build_main(dt, "two")
        sp, desc_sp = build_special(dt, True)
        spi, desc_spi = build_special(dt, False)
        inputs[dname] = (main_single, main_two, sp, spi)
        summary["row_desc_single"] = {str(k): v for k, v in desc_single.items()}
        summary["row_desc_two_level"] = {str(k): v for k, v in desc_two.items()}
        summary["row_desc_special"] = {str(k): v for k, v in desc_sp.items()}
        summary["row_desc_special_inf"] = {str(k): v for k, v in desc_spi.items()}
        for recipe in RECIPES:
            for suffix, x in (("", main_two if recipe == "two_level" else main_single),
                              ("_special", sp), ("_special_inf", spi)):
                key = f"{recipe}_{dname}"
                tensors[f"{key}_input{suffix}"] = x.clone().contiguous()  # no shared storage (safetensors)
                for dev in list(devices):
                    try:
                        data, scale, ts = quantize(x, recipe, dev)
                    except Exception as e:  # noqa: BLE001
                        if dev == "cpu":
                            raise
                        summary.setdefault("cuda_errors", []).append(
                            f"{recipe}_{dname}{suffix}: {type(e).__name__}: {e}")
                        continue
                    pre = "" if dev == "cpu" else "cuda_"
                    tensors[f"{pre}{key}_data{suffix}"] = data
                    tensors[f"{pre}{key}_scale{suffix}"] = scale
                    if ts is not None:
                        tensors[f"{pre}{key}_tensor_scale{suffix}"] = ts
                    if suffix:
                        summary["special_dump"][f"{dev}:{key}{suffix}"] = {
                            "tensor_scale": None if ts is None else repr(float(ts[0])),
                            "blocks": blocks_str(data, scale),
                        }
                if f"cuda_{key}_data{suffix}" in tensors:
                    d = {}
                    for f in ("data", "scale", "tensor_scale"):
                        a = tensors.get(f"{key}_{f}{suffix}")
                        c = tensors.get(f"cuda_{key}_{f}{suffix}")
                        if a is None:
                            continue
                        if f == "tensor_scale":
                            neq = a.view(torch.int32) != c.view(torch.int32)
                        else:
                            neq = a != c
                        if neq.any():
                            idx = neq.nonzero().tolist()
                            d[f] = {"count": int(neq.sum()), "at": idx[:40],
                                    "cpu": [a[tuple(i)].view(torch.int32).item() if f == "tensor_scale" else a[tuple(i)].item() for i in idx[:40]],
                                    "cuda": [c[tuple(i)].view(torch.int32).item() if f == "tensor_scale" else c[tuple(i)].item() for i in idx[:40]]}
                    summary["diffs_cpu_vs_cuda"][f"{key}{suffix}"] = d

    # swizzled layout example (torchao's is_swizzled_scales=True path)
    try:
        x = inputs["f32"][0]
        tsw = NVFP4Tensor.to_nvfp4(x, is_swizzled_scales=True)
        sw = tsw.scale.contiguous().view(torch.uint8).clone()
        plain = tensors["single_level_f32_scale"]
        summary["swizzled_equals_to_blocked_of_plain"] = bool(
            torch.equal(sw.flatten(), to_blocked(plain).flatten()))
        tensors["single_level_f32_scale_swizzled"] = sw
        summary["swizzled_shape"] = list(sw.shape)
    except Exception as e:  # noqa: BLE001
        summary["swizzled_error"] = f"{type(e).__name__}: {e}"

    try:
        check_reference(tensors, summary)
    except Exception as e:  # noqa: BLE001
        summary["reference_check_error"] = f"{type(e).__name__}: {e}"

    # float16: torchao 0.18 rejects it; record what happens
    try:
        NVFP4Tensor.to_nvfp4(inputs["f32"][0].to(torch.float16))
        f16_status = "accepted (unexpected; no vectors stored)"
    except Exception as e:  # noqa: BLE001
        f16_status = f"rejected: {type(e).__name__}: {e}"
    summary["f16"] = f16_status

    # probes of PyTorch arithmetic used by torchao
    probes = {}
    a = torch.tensor(dv_probe_values(), dtype=torch.float32)
    for dev in devices:
        ad = a.to(dev)
        q_div = (ad / 6.0).cpu()
        q_true = torch.tensor([f32(v / 6.0) for v in a.tolist()])
        q_mul = torch.tensor([f32(v * f32(1 / 6.0)) for v in a.tolist()])
        probes[dev] = {
            "tensor/6.0 == IEEE f32 division": bool(torch.equal(q_div, q_true)),
            "tensor/6.0 == tensor*fl32(1/6)": bool(torch.equal(q_div, q_mul)),
        }
    summary["probes"] = probes

    meta = {
        "torch_version": torch.__version__,
        "torchao_version": torchao.__version__,
        "python_version": sys.version.split()[0],
        "devices": ",".join(devices),
        "cuda_device": torch.cuda.get_device_name(0) if "cuda" in devices else "",
        "seed": str(SEED),
        "fixed_per_tensor_scale": repr(FIXED_PTS),
        "f16": f16_status,
        "naming": "{recipe}_{dtype}_{input|data|scale|tensor_scale}[_special|_special_inf]; "
                  "cuda_ prefix = same computation on the GPU; unprefixed = CPU",
        "row_desc_single": json.dumps(summary["row_desc_single"]),
        "row_desc_two_level": json.dumps(summary["row_desc_two_level"]),
        "row_desc_special": json.dumps(summary["row_desc_special"]),
        "row_desc_special_inf": json.dumps(summary["row_desc_special_inf"]),
        "probes": json.dumps(probes),
        "diffs_cpu_vs_cuda": json.dumps(summary["diffs_cpu_vs_cuda"]),
        "reference_check": json.dumps(summary.get("reference_check", {})),
    }
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    save_file({k: v.contiguous() for k, v in sorted(tensors.items())}, args.out, metadata=meta)
    summary["meta"] = {k: v for k, v in meta.items() if not k.startswith("row_desc") and k != "diffs_cpu_vs_cuda"}
    summary["tensors"] = {k: [str(v.dtype), list(v.shape)] for k, v in sorted(tensors.items())}
    if args.summary:
        with open(args.summary, "w") as fh:
            json.dump(summary, fh, indent=1)
    print(json.dumps({"out": args.out, "bytes": os.path.getsize(args.out), "n_tensors": len(tensors),
                      "f16": f16_status, "probes": probes,
                      "reference_check": summary.get("reference_check", summary.get("reference_check_error")),
                      "swizzle": [summary.get("swizzled_shape"), summary.get("swizzled_equals_to_blocked_of_plain"), summary.get("swizzled_error")],
                      "cuda_errors": summary.get("cuda_errors"),
                      "diffs": {k: {f: v[f]["count"] for f in v} for k, v in summary["diffs_cpu_vs_cuda"].items() if v}},
                     indent=1))


def dv_probe_values():
    return div_vs_recip_amaxes() + [6.375, 7.125, 1.0, 3.0, 1234.5]


if __name__ == "__main__":
    main()
