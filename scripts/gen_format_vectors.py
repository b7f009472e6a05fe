#!/usr/bin/env python3
"""Generate the bit-exact conformance vectors for the NVFP4 number formats.

The Rust oracle's tests compare its e2m1 / e4m3fn / f16 / bf16 conversions
bit-for-bit against these files.  Reference semantics come from ml_dtypes
(e2m1, e4m3fn, bf16) and numpy (f16); every vector is additionally checked
against a small exact-rational model in this script before anything is written.

Run from anywhere (output goes to <repo>/golden/conformance/):

    python3 -m venv /tmp/fmtvenv
    /tmp/fmtvenv/bin/pip install -r scripts/requirements-formats.txt
    /tmp/fmtvenv/bin/python scripts/gen_format_vectors.py

Last run with Python 3.11.7, ml_dtypes==0.6.0, numpy==2.4.6, safetensors==0.8.0.
Output is deterministic: fixed seeds, and the safetensors header is rewritten
with sorted keys, so a rerun with the same versions gives byte-identical files.

Files (tensors are 1-D, index i of every tensor in a file belongs together):
  e2m1_decode   code U8[16], value F32[16]
  e4m3_decode   code U8[256], value F32[256]
  e4m3_encode   input F32[N], nan_on_overflow U8[N], saturate U8[N]
  e2m1_encode   input F32[N], saturate U8[N]   (4-bit code, sign in bit 3)
  f16_encode    input F32[N], f16 F16[N]
  bf16_encode   input F32[N], bf16 U16[N]
  ue8m0_decode  code U8[256], value F32[256]
  ue8m0_encode  input F32[N], code U8[N]
  e5m2_decode   code U8[256], value F32[256]
  e5m2_encode   input F32[N], code U8[N], saturate U8[N]
"""

import json
import math
import struct
import sys
from fractions import Fraction
from pathlib import Path

import ml_dtypes
import numpy as np
import safetensors
from safetensors.numpy import load_file, save_file

E2M1 = ml_dtypes.float4_e2m1fn
E4M3 = ml_dtypes.float8_e4m3fn
BF16 = ml_dtypes.bfloat16
UE8M0 = ml_dtypes.float8_e8m0fnu
E5M2 = ml_dtypes.float8_e5m2

SEED = 0x4E564634  # "NVF4"; each file derives its own stream so files stay independent
OUT_DIR = Path(__file__).resolve().parent.parent / "golden" / "conformance"
GENERATOR = "scripts/gen_format_vectors.py"

F32_MAX = float(np.finfo(np.float32).max)
F32_TINY = float(np.finfo(np.float32).smallest_subnormal)
F32_MIN_NORMAL = float(np.finfo(np.float32).tiny)

# Quiet and signalling NaNs of both signs, with payloads in high and low bits.
NAN_BITS = [0x7FC00000, 0xFFC00000, 0x7FC00001, 0xFFE00000, 0x7FFFFFFF,
            0xFFFFFFFF, 0x7F800001, 0xFF800001, 0x7FA5A5A5]


# ---------------------------------------------------------------- helpers

def f32(x):
    return np.asarray(x, dtype=np.float32).ravel()


def bits32(x):
    return f32(x).view(np.uint32)


def from_bits32(u):
    return np.asarray(u, dtype=np.uint32).view(np.float32)


def is_signalling_nan(x):
    b = bits32(x)
    return np.isnan(f32(x)) & ((b & 0x00400000) == 0)


def with_neighbours(x):
    """x plus the adjacent f32 values on both sides (x must not contain NaN)."""
    x = f32(x)
    with np.errstate(over="ignore"):  # stepping past f32 max to inf is intended
        return np.concatenate([x, np.nextafter(x, np.float32(-np.inf)),
                               np.nextafter(x, np.float32(np.inf))])


def both_signs(x):
    x = f32(x)
    return np.concatenate([x, -x])


def pair_probes(lo, hi):
    """Rounding probes for adjacent representable values lo[i] < hi[i]:
    both endpoints and the exact midpoint, each with its f32 neighbours, both signs.
    The midpoint itself is the tie; its neighbours must round away from it."""
    lo, hi = np.asarray(lo, np.float64), np.asarray(hi, np.float64)
    mid = (lo + hi) / 2
    # A tie that is not exactly representable in f32 would silently test nothing.
    assert np.array_equal(f32(mid).astype(np.float64), mid), "midpoint not exact in f32"
    with np.errstate(over="ignore"):  # the would-be value past the top may be 2^128
        pts = np.concatenate([f32(lo), f32(hi), f32(mid)])
    return both_signs(with_neighbours(pts))


def grid_probes(grid):
    g = np.asarray(grid, np.float64)
    return pair_probes(g[:-1], g[1:])


def log_uniform(rng, n, lo_exp, hi_exp):
    mag = np.exp2(rng.uniform(lo_exp, hi_exp, n))
    sign = rng.choice(np.array([-1.0, 1.0]), n)
    return f32(sign * mag)


def random_bits(rng, n):
    return from_bits32(rng.integers(0, 2**32, n, dtype=np.uint32))


def dedup(*parts):
    """Unique by bit pattern (so +0/-0 and NaN payloads survive), sorted by bits."""
    return from_bits32(np.unique(np.concatenate([bits32(p) for p in parts])))


def rng_for(index):
    return np.random.default_rng([SEED, index])


# ---------------------------------------------- independent exact reference

def rne(x, mbits, emin):
    """x rounded to nearest, ties to even, onto a binary format with `mbits`
    fraction bits and minimum normal exponent `emin`, ignoring the top of the
    range (callers apply their own overflow convention)."""
    if x == 0.0:
        return x
    e = max(math.frexp(abs(x))[1] - 1, emin)
    quantum = Fraction(2) ** (e - mbits)
    # round() on a Fraction is round-half-even.
    return math.copysign(float(round(Fraction(abs(x)) / quantum) * quantum), x)


def ref_decode_e4m3(code):
    s, e, m = code >> 7, (code >> 3) & 0xF, code & 0x7
    if e == 0xF and m == 0x7:
        return math.nan
    mag = m * 2.0**-9 if e == 0 else (1 + m / 8) * 2.0 ** (e - 7)
    return -mag if s else mag


def ref_decode_e2m1(code):
    s, e, m = code >> 3, (code >> 1) & 0x3, code & 0x1
    mag = m * 0.5 if e == 0 else (1 + m / 2) * 2.0 ** (e - 1)
    return -mag if s else mag


def code_table(decode, ncodes):
    """(sign, magnitude) -> code for every non-NaN code."""
    table = {}
    for c in range(ncodes):
        v = decode(c)
        if not math.isnan(v):
            table[(math.copysign(1.0, v) < 0, abs(v))] = c
    return table


E4M3_CODES = code_table(ref_decode_e4m3, 256)
E2M1_CODES = code_table(ref_decode_e2m1, 16)


def lookup(table, v):
    return table[(math.copysign(1.0, v) < 0, abs(v))]


def ref_e4m3(x, saturate):
    neg = math.copysign(1.0, x) < 0
    if math.isnan(x):
        return 0xFF if neg else 0x7F
    if saturate:
        x = max(-448.0, min(448.0, x))
    if math.isinf(x):
        return 0xFF if neg else 0x7F
    r = rne(x, 3, -6)
    if abs(r) > 448.0:  # e4m3fn has no inf: overflow goes to NaN
        return 0xFF if neg else 0x7F
    return lookup(E4M3_CODES, r)


def ref_e2m1(x):
    # Saturating: clamping first is equivalent to clamping the rounded value.
    return lookup(E2M1_CODES, rne(max(-6.0, min(6.0, x)), 1, 0))


def ref_f16(x):
    b = int(bits32(x)[0])
    sign = (b >> 16) & 0x8000
    if math.isnan(x):
        # Quiet NaNs only: keep sign and the top 10 payload bits.
        return sign | 0x7C00 | ((b >> 13) & 0x3FF)
    if math.isinf(x):
        return sign | 0x7C00
    r = rne(x, 10, -14)
    if abs(r) >= 65536.0:
        return sign | 0x7C00
    return struct.unpack("<H", struct.pack("<e", r))[0]


def ref_bf16(x):
    b = int(bits32(x)[0])
    sign = (b >> 16) & 0x8000
    if math.isnan(x):
        return sign | 0x7FC0  # ml_dtypes canonicalises NaN, keeping only the sign
    if math.isinf(x):
        return sign | 0x7F80
    r = rne(x, 7, -126)
    if abs(r) >= 2.0**128:
        return sign | 0x7F80
    return int(bits32(r)[0]) >> 16


def ref_decode_e5m2(code):
    s, e, m = code >> 7, (code >> 2) & 0x1F, code & 0x3
    if e == 0x1F:
        v = math.inf if m == 0 else math.nan
    elif e == 0:
        v = m / 4 * 2.0**-14
    else:
        v = (1 + m / 4) * 2.0 ** (e - 15)
    return -v if s else v


E5M2_CODES = code_table(ref_decode_e5m2, 256)


def ref_e5m2(x, saturate):
    """IEEE semantics (overflow and inf to inf, NaN to NaN keeping the sign; ml_dtypes'
    quiet NaN is 0x7E/0xFE), or with saturate, clamped to +-57344 first."""
    neg = math.copysign(1.0, x) < 0
    if math.isnan(x):
        return 0xFE if neg else 0x7E
    if saturate:
        x = max(-57344.0, min(57344.0, x))
    r = rne(x, 2, -14) if not math.isinf(x) else x
    if abs(r) > 57344.0:
        return 0xFC if neg else 0x7C
    return lookup(E5M2_CODES, r)


def ref_decode_ue8m0(code):
    return math.nan if code == 0xFF else 2.0 ** (code - 127)


def ref_ue8m0(x):
    """ml_dtypes' cast to float8_e8m0fnu, as measured and stated here independently: a power of
    two 2^e, e in -127..127; a normal x = m * 2^k with 1 <= m < 2 goes to 2^k below m = 1.5 and
    to 2^(k+1) from it on (the tie goes up); an f32 subnormal (below 2^-126) goes to 2^-127 up to
    and including 2^-127 and to 2^-126 above it (up, not to nearest: found by this check);
    zero, negatives, infinities, NaN and anything rounding past 2^127 to NaN (0xFF)."""
    if math.isnan(x) or math.isinf(x) or x <= 0:
        return 0xFF
    if x < F32_MIN_NORMAL:
        return 0 if x <= 2.0**-127 else 1
    m, k = math.frexp(x)  # x = m * 2^k, 0.5 <= m < 1
    e = k - 1 if m < 0.75 else k
    if e > 127:
        return 0xFF
    return max(e, -127) + 127


def check_against_reference(name, inputs, got, ref):
    want = np.array([ref(float(x)) for x in inputs], dtype=np.int64)
    bad = np.nonzero(want != got.astype(np.int64))[0]
    if bad.size:
        for i in bad[:10]:
            print(f"  {name}: input {inputs[i]!r} (0x{int(bits32(inputs[i])[0]):08x}) "
                  f"library 0x{int(got[i]):x} reference 0x{int(want[i]):x}")
        sys.exit(f"{name}: {bad.size} mismatches against the exact reference")


# ---------------------------------------------------------------- files

def e2m1_decode():
    code = np.arange(16, dtype=np.uint8)
    value = code.view(E2M1).astype(np.float32)  # 4-bit codes sit in the low bits of a byte
    assert np.signbit(value[8]) and value[8] == 0, "code 8 must decode to -0"
    ref = f32([ref_decode_e2m1(c) for c in range(16)])
    assert np.array_equal(bits32(value), bits32(ref))
    return {"code": code, "value": value}, \
        "ml_dtypes float4_e2m1fn decode of every 4-bit code 0..15 (sign in bit 3; code 8 is -0)"


def e4m3_decode():
    code = np.arange(256, dtype=np.uint8)
    value = code.view(E4M3).astype(np.float32)
    ref = f32([ref_decode_e4m3(c) for c in range(256)])
    same = (bits32(value) == bits32(ref)) | (np.isnan(value) & np.isnan(ref))
    assert same.all()
    assert np.isnan(value).sum() == 2 and np.isnan(value[[0x7F, 0xFF]]).all()
    return {"code": code, "value": value}, \
        "ml_dtypes float8_e4m3fn decode of every code 0..255 (0x7F/0xFF NaN, 0x80 is -0)"


def e4m3_encode():
    rng = rng_for(1)
    grid = np.sort(np.arange(0x7F, dtype=np.uint8).view(E4M3).astype(np.float64))
    grid = np.append(grid, 480.0)  # would-be next value: probes the 448..480 gap
    around = [448, 464, 480, 512, 1e4, F32_MAX,
              2.0**-10, 2.0**-9, 2.0**-6, F32_MIN_NORMAL]
    tiny = [2.0**-11, 2.0**-12, 2.0**-20, 1e-30, 1e-40, F32_TINY,
            F32_MIN_NORMAL - F32_TINY]  # largest f32 subnormal
    x = dedup(grid_probes(grid),
              both_signs(with_neighbours(around)),
              both_signs(with_neighbours(tiny)),
              f32([0.0, -0.0, np.inf, -np.inf]), from_bits32(NAN_BITS),
              log_uniform(rng, 20000, -14, 10),
              random_bits(rng, 2000))
    with np.errstate(invalid="ignore", over="ignore"):
        nan_on_overflow = x.astype(E4M3).view(np.uint8)
        clipped = np.clip(x, -448, 448)
        saturate = clipped.astype(E4M3).view(np.uint8)
    nan = np.isnan(x)
    assert np.array_equal(bits32(clipped[nan]), bits32(x[nan])), "np.clip must keep NaN bits"
    check_against_reference("e4m3 nan_on_overflow", x, nan_on_overflow,
                            lambda v: ref_e4m3(v, saturate=False))
    check_against_reference("e4m3 saturate", x, saturate,
                            lambda v: ref_e4m3(v, saturate=True))
    return {"input": x, "nan_on_overflow": nan_on_overflow, "saturate": saturate}, \
        ("f32 -> float8_e4m3fn, round-to-nearest-even. nan_on_overflow: ml_dtypes astype "
         "(|x| > 464 or inf -> NaN 0x7F/0xFF by sign). saturate: clip to +-448 first "
         "(inf -> +-448); NaN -> 0x7F/0xFF by sign in both")


def e2m1_encode():
    rng = rng_for(2)
    grid = np.append(np.arange(8, dtype=np.uint8).view(E2M1).astype(np.float64), 8.0)
    around = [6, 7, 8, 12, 100, 1e4, 1e30, F32_MAX, 0.25, 0.5]
    tiny = [0.125, 2.0**-10, 1e-30, 1e-40, F32_TINY, F32_MIN_NORMAL - F32_TINY]
    x = dedup(grid_probes(grid),
              both_signs(with_neighbours(around)),
              both_signs(with_neighbours(tiny)),
              f32([0.0, -0.0, np.inf, -np.inf]),
              log_uniform(rng, 10000, -6, 4),
              random_bits(rng, 2000))
    x = x[~np.isnan(x)]  # e2m1 has no NaN encoding; see the report on what ml_dtypes does
    with np.errstate(invalid="ignore", over="ignore"):
        saturate = np.clip(x, -6, 6).astype(E2M1).view(np.uint8)
        unclipped = x.astype(E2M1).view(np.uint8)
    assert saturate.max() < 16
    # ml_dtypes already saturates on its own; the clip only makes the convention explicit.
    assert np.array_equal(saturate, unclipped)
    check_against_reference("e2m1 saturate", x, saturate, ref_e2m1)
    return {"input": x, "saturate": saturate}, \
        ("f32 -> float4_e2m1fn 4-bit code (sign in bit 3), round-to-nearest-even, "
         "saturating: |x| > 6 and inf -> +-6 (0x7/0xF); no NaN inputs")


def f16_encode():
    rng = rng_for(3)
    grid = np.append(np.arange(0x7C00, dtype=np.uint16).view(np.float16).astype(np.float64),
                     65536.0)
    # All 31k pairs would be ~2 MB; binade edges are where the tricky cases live.
    lo = set(range(0, 65)) | set(range(0x3C0, 0x420)) | set(range(0x3BF0, 0x3C10)) \
        | set(range(0x7BF0, 0x7C00))
    for e in range(1, 31):
        lo |= {(e << 10) + m for m in (0, 1, 2, 1021, 1022, 1023)}
    lo = np.array(sorted(i for i in lo if i < 0x7C00))
    around = [65504, 65520, 65536, 1e5, F32_MAX, 2.0**-24, 2.0**-25, 2.0**-14, 2.0**-26]
    tiny = [1e-30, 1e-40, F32_TINY, F32_MIN_NORMAL - F32_TINY]
    x = dedup(pair_probes(grid[lo], grid[lo + 1]),
              both_signs(with_neighbours(around)),
              both_signs(with_neighbours(tiny)),
              f32([0.0, -0.0, np.inf, -np.inf]), from_bits32(NAN_BITS),
              log_uniform(rng, 4000, -26, 17),
              random_bits(rng, 1000))
    # numpy's f32->f16 NaN payload handling differs between its software and
    # F16C/AVX-512 paths for signalling NaNs, so those are not portable vectors.
    x = x[~is_signalling_nan(x)]
    with np.errstate(invalid="ignore", over="ignore"):
        out = x.astype(np.float16)
    check_against_reference("f16", x, out.view(np.uint16), ref_f16)
    return {"input": x, "f16": out}, \
        ("f32 -> IEEE binary16 via numpy astype, round-to-nearest-even, overflow "
         "(|x| >= 65520) -> inf; quiet NaNs keep sign and top payload bits; no signalling NaNs")


def bf16_encode():
    rng = rng_for(4)
    grid = np.append(np.arange(0x7F80, dtype=np.uint16).view(BF16).astype(np.float64),
                     2.0**128)
    lo = set(range(0, 33)) | set(range(0x70, 0x90)) | set(range(0x3F70, 0x3F90)) \
        | set(range(0x7F70, 0x7F80))
    for e in range(1, 255):
        lo |= {(e << 7) + m for m in (0, 1, 126, 127)}
    lo = np.array(sorted(i for i in lo if i < 0x7F80))
    around = [F32_MAX, 2.0**-133, 2.0**-134, 2.0**-126, 1.0, 3.0e38]
    tiny = [1e-40, 1e-45, F32_TINY, F32_MIN_NORMAL - F32_TINY]
    x = dedup(pair_probes(grid[lo], grid[lo + 1]),
              both_signs(with_neighbours(around)),
              both_signs(with_neighbours(tiny)),
              f32([0.0, -0.0, np.inf, -np.inf]), from_bits32(NAN_BITS),
              log_uniform(rng, 4000, -133, 128),
              random_bits(rng, 1000))
    with np.errstate(invalid="ignore", over="ignore"):
        out = x.astype(BF16).view(np.uint16)
    check_against_reference("bf16", x, out, ref_bf16)
    return {"input": x, "bf16": out}, \
        ("f32 -> bfloat16 bits via ml_dtypes astype, round-to-nearest-even incl. "
         "subnormals, overflow -> inf; every NaN -> 0x7FC0/0xFFC0 by sign (payload dropped)")


def ue8m0_decode():
    code = np.arange(256, dtype=np.uint8)
    value = code.view(UE8M0).astype(np.float32)
    ref = f32([ref_decode_ue8m0(c) for c in range(256)])
    same = (bits32(value) == bits32(ref)) | (np.isnan(value) & np.isnan(ref))
    assert same.all()
    assert np.isnan(value).sum() == 1 and value[0] == 2.0**-127
    return {"code": code, "value": value}, \
        "ml_dtypes float8_e8m0fnu decode of every code 0..255 (2^(code-127); 0x00 is 2^-127, 0xFF NaN)"


def ue8m0_encode():
    rng = rng_for(7)
    powers = [2.0**e for e in range(-127, 128)]
    # Each power of two, the tie 1.5 * 2^e between it and the next, and their neighbours.
    ties = [1.5 * p for p in powers]
    special = [0.0, F32_TINY, 2.0**-130, 2.0**-128, 1.5 * 2.0**-128, F32_MIN_NORMAL,
               1.5 * 2.0**127, F32_MAX, 6.0, 448.0]
    x = dedup(both_signs(with_neighbours(powers + ties + special)),
              f32([np.inf, -np.inf]), from_bits32(NAN_BITS),
              log_uniform(rng, 4000, -135, 130), random_bits(rng, 4000))
    code = x.astype(UE8M0).view(np.uint8)
    check_against_reference("ue8m0_encode", x, code, ref_ue8m0)
    return {"input": x, "code": code}, \
        ("f32 -> float8_e8m0fnu via ml_dtypes astype: nearest power of two, ties (1.5 * 2^e) up; "
         "f32 subnormals up to 2^-127 -> 0x00, above it -> 0x01; zero, negatives, infinities, "
         "NaN, overflow -> 0xFF")


def e5m2_decode():
    code = np.arange(256, dtype=np.uint8)
    value = code.view(E5M2).astype(np.float32)
    ref = f32([ref_decode_e5m2(c) for c in range(256)])
    same = (bits32(value) == bits32(ref)) | (np.isnan(value) & np.isnan(ref))
    assert same.all()
    return {"code": code, "value": value}, \
        "ml_dtypes float8_e5m2 decode of every code 0..255 (0x7C/0xFC inf, 0x7D..0x7F NaN)"


def e5m2_encode():
    rng = rng_for(8)
    grid = np.sort(np.arange(0x7C, dtype=np.uint8).view(E5M2).astype(np.float64))
    grid = np.append(grid, 65536.0)  # would-be next value: probes the 57344..65536 gap
    around = [57344, 61440, 65536, 1e5, F32_MAX, 2.0**-17, 2.0**-16, 2.0**-14, F32_MIN_NORMAL]
    tiny = [2.0**-18, 2.0**-30, 1e-40, F32_TINY]
    x = dedup(grid_probes(grid),
              both_signs(with_neighbours(around)),
              both_signs(with_neighbours(tiny)),
              f32([0.0, -0.0, np.inf, -np.inf]), from_bits32(NAN_BITS),
              log_uniform(rng, 20000, -18, 17),
              random_bits(rng, 2000))
    with np.errstate(invalid="ignore", over="ignore"):
        code = x.astype(E5M2).view(np.uint8)
        saturate = np.clip(x, -57344, 57344).astype(E5M2).view(np.uint8)
    check_against_reference("e5m2", x, code, lambda v: ref_e5m2(v, saturate=False))
    check_against_reference("e5m2 saturate", x, saturate, lambda v: ref_e5m2(v, saturate=True))
    return {"input": x, "code": code, "saturate": saturate}, \
        ("f32 -> float8_e5m2, round-to-nearest-even. code: ml_dtypes astype (overflow past "
         "61440 and inf -> inf 0x7C/0xFC). saturate: clip to +-57344 first (inf -> +-57344). "
         "NaN -> 0x7E/0xFE by sign in both")


FILES = {
    "e2m1_decode": e2m1_decode,
    "e4m3_decode": e4m3_decode,
    "e4m3_encode": e4m3_encode,
    "e2m1_encode": e2m1_encode,
    "f16_encode": f16_encode,
    "bf16_encode": bf16_encode,
    "ue8m0_decode": ue8m0_decode,
    "ue8m0_encode": ue8m0_encode,
    "e5m2_decode": e5m2_decode,
    "e5m2_encode": e5m2_encode,
}


def save_canonical(tensors, path, metadata):
    save_file(tensors, str(path), metadata=metadata)
    # safetensors serialises the header from a Rust HashMap, so __metadata__ key
    # order changes from run to run; sort the header so reruns are byte-identical.
    raw = path.read_bytes()
    n = int.from_bytes(raw[:8], "little")
    header = json.loads(raw[8:8 + n])
    text = json.dumps(header, sort_keys=True, separators=(",", ":")).encode("ascii")
    assert len(text) <= n
    path.write_bytes(raw[:8] + text.ljust(n) + raw[8 + n:])


def main():
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    total = 0
    for name, build in FILES.items():
        tensors, description = build()
        counts = {len(t) for t in tensors.values()}
        assert len(counts) == 1, f"{name}: tensors differ in length"
        (count,) = counts
        metadata = {
            "generator": GENERATOR,
            "ml_dtypes_version": ml_dtypes.__version__,
            "numpy_version": np.__version__,
            "safetensors_version": safetensors.__version__,
            "seed": str(SEED),
            "count": str(count),
            "description": description,
        }
        path = OUT_DIR / f"{name}.safetensors"
        save_canonical(tensors, path, metadata)

        back = load_file(str(path))
        assert back.keys() == tensors.keys()
        for key, t in tensors.items():
            assert back[key].dtype == t.dtype and back[key].tobytes() == t.tobytes(), key
        size = path.stat().st_size
        total += size
        print(f"{path.name:24s} {count:6d} vectors {size:8d} bytes")
    print(f"{'total':24s} {'':6s}         {total:8d} bytes")


if __name__ == "__main__":
    main()
