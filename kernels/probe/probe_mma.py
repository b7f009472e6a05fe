#!/usr/bin/env python3
"""Probe the exact arithmetic of Hopper `mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32`
and of `wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16` (`device --kernel wgmma_f16_f32`
with a cubin of kernels/probe/wgmma_f16_f32.cu: the same inputs, the same output layout).

Two halves, one file, so that both sides generate bit-identical inputs:

  device:   python3 kernels/probe/probe_mma.py device --cubin X --out DIR
            generates every family's inputs (deterministic splitmix64, numpy only), runs the
            kernel kernels/probe/mma_f16_f32.cu (one m16n8k16 per warp) through the CUDA driver
            API on torch buffers, and writes DIR/D_all.bin (every f32 output, families
            concatenated in manifest order) and DIR/manifest.json (sizes and input hashes).
  analyse:  python3 kernels/probe/probe_mma.py analyse --dir DIR [--sweep]
            regenerates the inputs, checks the hashes, and scores each model hypothesis
            bit-for-bit against the hardware outputs, per family (numpy, exact int64 arithmetic).

Only numpy is needed for `analyse`; `device` also needs torch and libcuda.
"""
import argparse
import hashlib
import json
import os
import sys

import numpy as np

# ----------------------------------------------------------------------------------------------
# Deterministic inputs.
# ----------------------------------------------------------------------------------------------
U = np.uint64
GOLD = U(0x9E3779B97F4A7C15)


class Rng:
    """splitmix64 over a counter: the same numbers on every numpy version and machine."""

    def __init__(self, seed):
        with np.errstate(over="ignore"):
            self.state = U(seed) * U(0xD1B54A32D192ED03) + U(1)
        self.ctr = 0

    def u64(self, shape):
        n = int(np.prod(shape))
        idx = np.arange(self.ctr + 1, self.ctr + n + 1, dtype=np.uint64)
        self.ctr += n
        with np.errstate(over="ignore"):
            z = self.state + idx * GOLD
            z = (z ^ (z >> U(30))) * U(0xBF58476D1CE4E5B9)
            z = (z ^ (z >> U(27))) * U(0x94D049BB133111EB)
            z = z ^ (z >> U(31))
        return z.reshape(shape)

    def ints(self, lo, hi, shape):
        """Integers in [lo, hi] (inclusive), as int64."""
        span = U(hi - lo + 1)
        return (self.u64(shape) % span).astype(np.int64) + lo

    def bern(self, p, shape):
        return self.ints(0, 1 << 20, shape) < int(p * (1 << 20))


def h16(sign, exp, mant):
    """fp16 bits from sign (0/1), unbiased exponent in [-14, 15] (normal) and 10-bit mantissa."""
    return ((sign << 15) | ((exp + 15) << 10) | (mant & 0x3FF)).astype(np.uint16)


def h16_sub(sign, mant):
    return ((sign << 15) | (mant & 0x3FF)).astype(np.uint16)


def f32b(sign, exp, mant):
    """f32 bits from sign, unbiased exponent in [-126, 127] and 23-bit mantissa."""
    return ((sign << 31) | ((exp + 127) << 23) | (mant & 0x7FFFFF)).astype(np.uint32)


def rnd_h16(r, shape, elo, ehi, p_zero=0.0, sign=None):
    s = r.ints(0, 1, shape) if sign is None else np.full(shape, sign, dtype=np.int64)
    v = h16(s, r.ints(elo, ehi, shape), r.ints(0, 1023, shape))
    if p_zero:
        z = r.bern(p_zero, shape)
        v[z] = (s[z] << 15).astype(np.uint16)
    return v


def rnd_f32(r, shape, elo, ehi, p_zero=0.0, sign=None):
    s = r.ints(0, 1, shape) if sign is None else np.full(shape, sign, dtype=np.int64)
    v = f32b(s, r.ints(elo, ehi, shape), r.ints(0, (1 << 23) - 1, shape))
    if p_zero:
        z = r.bern(p_zero, shape)
        v[z] = (s[z] << 31).astype(np.uint32)
    return v


def fam_random_narrow(r, n):  # randn-like fp16, C of similar size
    a = rnd_h16(r, (n, 16, 16), -4, 2)
    b = rnd_h16(r, (n, 16, 8), -4, 2)
    c = rnd_f32(r, (n, 16, 8), -6, 4, p_zero=0.05)
    return a, b, c


def fam_random_wide(r, n):  # exponents over most of the fp16 range, C anywhere near
    a = rnd_h16(r, (n, 16, 16), -10, 8, p_zero=0.02)
    b = rnd_h16(r, (n, 16, 8), -10, 8, p_zero=0.02)
    c = rnd_f32(r, (n, 16, 8), -24, 20, p_zero=0.05)
    return a, b, c


def fam_cancel(r, n):
    # A row: pairs (x, -x') with x' = x or x +- 1 ulp; B col: (y, y) on each pair. Products nearly
    # cancel pairwise; a few k are replaced by small terms; C small or zero.
    x = rnd_h16(r, (n, 16, 8), -4, 4)
    xm = x.astype(np.int64) ^ 0x8000
    d = r.ints(-1, 1, (n, 16, 8)) * r.bern(0.5, (n, 16, 8))
    m = xm & 0x3FF
    xm = np.where((m + d >= 0) & (m + d <= 1023), xm + d, xm).astype(np.uint16)
    a = np.empty((n, 16, 16), np.uint16)
    a[:, :, 0::2], a[:, :, 1::2] = x, xm
    y = rnd_h16(r, (n, 8, 8), -4, 4)
    b = np.empty((n, 16, 8), np.uint16)
    b[:, 0::2, :], b[:, 1::2, :] = y, y
    small = r.bern(0.15, (n, 1, 16))
    a = np.where(small, rnd_h16(r, (n, 16, 16), -14, -6), a)
    c = rnd_f32(r, (n, 16, 8), -40, 0, p_zero=0.3)
    return a, b, c


def fam_spread(r, n):
    # Per row / column a top exponent, each element 0..15 below it: products differ by up to 2^30.
    ta = r.ints(-2, 15, (n, 16, 1))
    tb = r.ints(-2, 15, (n, 1, 8))
    ea = np.maximum(ta - r.ints(0, 16, (n, 16, 16)), -14)
    eb = np.maximum(tb - r.ints(0, 16, (n, 16, 8)), -14)
    a = h16(r.ints(0, 1, ea.shape), ea, r.ints(0, 1023, ea.shape))
    b = h16(r.ints(0, 1, eb.shape), eb, r.ints(0, 1023, eb.shape))
    c = rnd_f32(r, (n, 16, 8), -30, 30, p_zero=0.2)
    return a, b, c


def fam_subnormal(r, n):
    sub_a = r.bern(0.5, (n, 16, 16))
    a = np.where(sub_a, h16_sub(r.ints(0, 1, (n, 16, 16)), r.ints(1, 1023, (n, 16, 16))),
                 rnd_h16(r, (n, 16, 16), -14, -8))
    sub_b = r.bern(0.25, (n, 16, 8))
    b = np.where(sub_b, h16_sub(r.ints(0, 1, (n, 16, 8)), r.ints(1, 1023, (n, 16, 8))),
                 rnd_h16(r, (n, 16, 8), -14, 15))
    c = rnd_f32(r, (n, 16, 8), -50, 0, p_zero=0.3)
    return a, b, c


def fam_c_large(r, n):
    a = rnd_h16(r, (n, 16, 16), -4, 4)
    b = rnd_h16(r, (n, 16, 8), -4, 4)
    c = rnd_f32(r, (n, 16, 8), 8, 34)
    return a, b, c


def fam_c_small(r, n):
    a = rnd_h16(r, (n, 16, 16), -4, 4)
    b = rnd_h16(r, (n, 16, 8), -4, 4)
    c = rnd_f32(r, (n, 16, 8), -126, -20)
    sub = r.bern(0.1, (n, 16, 8))
    c = np.where(sub, ((r.ints(0, 1, c.shape) << 31) | r.ints(1, (1 << 23) - 1, c.shape))
                 .astype(np.uint32), c)
    return a, b, c


def fam_ties(r, n):
    # C in [1, 2) or [2, 4) (ulp 2^-23 / 2^-22), products +-2^u: sums at and around f32 midpoints.
    a = h16(r.ints(0, 1, (n, 16, 16)), r.ints(-14, -10, (n, 16, 16)), np.zeros((n, 16, 16), np.int64))
    a[r.bern(0.7, a.shape)] = 0
    b = h16(r.ints(0, 1, (n, 16, 8)), r.ints(-14, -10, (n, 16, 8)), np.zeros((n, 16, 8), np.int64))
    c = rnd_f32(r, (n, 16, 8), 0, 1)
    low = r.bern(0.5, c.shape)  # half of them with few mantissa bits set
    c = np.where(low, c & np.uint32(0xFFFFFFF0), c)
    return a, b, c


def fam_negc_pos(r, n):
    a = rnd_h16(r, (n, 16, 16), -6, 4, sign=0)
    b = rnd_h16(r, (n, 16, 8), -6, 4, sign=0)
    c = rnd_f32(r, (n, 16, 8), -10, 16, sign=1)
    return a, b, c


def fam_all_neg(r, n):
    a = rnd_h16(r, (n, 16, 16), -6, 4, sign=0)
    b = rnd_h16(r, (n, 16, 8), -6, 4, sign=1)
    c = rnd_f32(r, (n, 16, 8), -10, 10, sign=1, p_zero=0.1)
    return a, b, c


def fam_exact_ints(r, n):
    # Small integers: the exact sum is an f32, every model agrees; checks the fragment layout.
    def ints16(shape):
        v = r.ints(-8, 8, shape).astype(np.float16)
        return v.view(np.uint16)
    a, b = ints16((n, 16, 16)), ints16((n, 16, 8))
    c = r.ints(-1000, 1000, (n, 16, 8)).astype(np.float32).view(np.uint32)
    return a, b, c


def fam_zero_times_big(r, n):
    # Per problem a set of k with B[k,:] = +-2^15 and A[:,k] = +-0 (or A big and B zero): zero
    # products whose operand exponents sum far above every non-zero product (all tiny).
    a = rnd_h16(r, (n, 16, 16), -14, -8)
    b = rnd_h16(r, (n, 16, 8), -14, -8)
    ks = r.bern(0.25, (n, 16))
    flip = r.bern(0.5, (n, 1))
    zero_a = ks & ~flip
    zero_b = ks & flip
    bigb = rnd_h16(r, (n, 16, 8), 14, 15)
    biga = rnd_h16(r, (n, 16, 16), 14, 15)
    za = (r.ints(0, 1, (n, 16, 16)) << 15).astype(np.uint16)
    zb = (r.ints(0, 1, (n, 16, 8)) << 15).astype(np.uint16)
    a = np.where(zero_a[:, None, :], za, np.where(zero_b[:, None, :], biga, a))
    b = np.where(zero_b[:, :, None], zb, np.where(zero_a[:, :, None], bigb, b))
    c = rnd_f32(r, (n, 16, 8), -40, -20, p_zero=0.3)
    return a, b, c


def fam_signed_zero(r, n):
    # Exact-zero results: all products +-0 with C = +-0, or exact pairwise cancellation.
    half = n // 2
    a = rnd_h16(r, (n, 16, 16), -4, 4)
    a[:half] = (r.ints(0, 1, (half, 16, 16)) << 15).astype(np.uint16)
    x = rnd_h16(r, (n - half, 16, 8), -4, 4)
    a[half:, :, 0::2], a[half:, :, 1::2] = x, x ^ np.uint16(0x8000)
    b = rnd_h16(r, (n, 16, 8), -4, 4)
    y = rnd_h16(r, (n - half, 8, 8), -4, 4)
    b[half:, 0::2, :], b[half:, 1::2, :] = y, y
    c = (r.ints(0, 1, (n, 16, 8)) << 31).astype(np.uint32)
    return a, b, c


def fam_c_subnormal(r, n):
    # Subnormal C with zero products or fp16-subnormal x subnormal products (down to 2^-48).
    c = ((r.ints(0, 1, (n, 16, 8)) << 31) | r.ints(1, (1 << 23) - 1, (n, 16, 8))).astype(np.uint32)
    a = h16_sub(r.ints(0, 1, (n, 16, 16)), r.ints(0, 1023, (n, 16, 16)))
    b = h16_sub(r.ints(0, 1, (n, 16, 8)), r.ints(0, 1023, (n, 16, 8)))
    a[: n // 2] &= np.uint16(0x8000)
    return a, b, c


def fam_carry(r, n):
    # Same-sign products with maximal significands at one exponent, C of the same size: the sum
    # carries up to ~6 bits above the largest term.
    e = r.ints(-4, 4, (n, 1, 1))
    sg = r.ints(0, 1, (n, 1, 1))
    a = h16(np.zeros((n, 16, 16), np.int64), np.broadcast_to(e, (n, 16, 16)),
            r.ints(900, 1023, (n, 16, 16)))
    b = h16(np.broadcast_to(sg, (n, 16, 8)), np.broadcast_to(e, (n, 16, 8)),
            r.ints(900, 1023, (n, 16, 8)))
    c = f32b(np.broadcast_to(sg, (n, 16, 8)), 2 * e + r.ints(0, 3, (n, 16, 8)),
             r.ints(0, (1 << 23) - 1, (n, 16, 8)))
    return a, b, c


def fam_random_full(r, n):
    # Whole fp16 range with subnormals and zeros, C over a wide f32 range.
    def h(shape):
        v = rnd_h16(r, shape, -14, 15, p_zero=0.05)
        sub = r.bern(0.05, shape)
        return np.where(sub, h16_sub(r.ints(0, 1, shape), r.ints(1, 1023, shape)), v)
    return h((n, 16, 16)), h((n, 16, 8)), rnd_f32(r, (n, 16, 8), -60, 60, p_zero=0.05)


def fam_special(r, n):
    # Inf / NaN operands (reported separately: the finite model does not cover them).
    a = rnd_h16(r, (n, 16, 16), -4, 4)
    b = rnd_h16(r, (n, 16, 8), -4, 4)
    c = rnd_f32(r, (n, 16, 8), -4, 4)
    kind = r.ints(0, 5, (n,))
    ia = r.ints(0, 15, (n,)); ka = r.ints(0, 15, (n,)); jb = r.ints(0, 7, (n,))
    s = r.ints(0, 1, (n,))
    for p in range(n):
        if kind[p] == 0:   # +-inf in one A element
            a[p, ia[p], ka[p]] = 0x7C00 | (s[p] << 15)
        elif kind[p] == 1:  # NaN in one A element
            a[p, ia[p], ka[p]] = 0x7E00
        elif kind[p] == 2:  # inf C for one row
            c[p, ia[p], :] = 0x7F800000 | (s[p] << 31)
        elif kind[p] == 3:  # NaN C
            c[p, ia[p], jb[p]] = 0x7FC00000
        elif kind[p] == 4:  # inf in A times 0 in B
            a[p, ia[p], ka[p]] = 0x7C00
            b[p, ka[p], jb[p]] = 0
        else:  # +inf and -inf products in one row
            a[p, ia[p], ka[p]] = 0x7C00
            a[p, ia[p], (ka[p] + 1) % 16] = 0xFC00
    return a, b, c


FAMILIES = [  # name, generator, number of m16n8k16 problems (128 dot products each)
    ("random_narrow", fam_random_narrow, 8192),
    ("random_wide", fam_random_wide, 8192),
    ("cancel", fam_cancel, 512),
    ("spread", fam_spread, 512),
    ("subnormal", fam_subnormal, 512),
    ("c_large", fam_c_large, 512),
    ("c_small", fam_c_small, 512),
    ("ties", fam_ties, 512),
    ("negc_pos", fam_negc_pos, 512),
    ("all_neg", fam_all_neg, 512),
    ("exact_ints", fam_exact_ints, 128),
    # second round
    ("zero_times_big", fam_zero_times_big, 512),
    ("signed_zero", fam_signed_zero, 256),
    ("c_subnormal", fam_c_subnormal, 256),
    ("carry", fam_carry, 512),
    ("random_full", fam_random_full, 8192),
    ("special", fam_special, 256),
]
FAMILY_INDEX = {f[0]: i for i, f in enumerate(FAMILIES)}
SEED = 20260517


def family_inputs(idx):
    name, gen, n = FAMILIES[idx]
    a, b, c = gen(Rng(SEED + 1000 * idx), n)
    assert a.shape == (n, 16, 16) and b.shape == (n, 16, 8) and c.shape == (n, 16, 8)
    a, b, c = a.astype(np.uint16), b.astype(np.uint16), c.astype(np.uint32)
    h = hashlib.sha256(a.tobytes() + b.tobytes() + c.tobytes()).hexdigest()[:16]
    return name, a, b, c, h


# ----------------------------------------------------------------------------------------------
# Device side.
# ----------------------------------------------------------------------------------------------
def device(args):
    import ctypes
    import torch

    lib = ctypes.CDLL("libcuda.so.1")
    lib.cuModuleGetFunction.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_void_p,
                                        ctypes.c_char_p]
    lib.cuLaunchKernel.argtypes = [ctypes.c_void_p] + [ctypes.c_uint] * 7 + [
        ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p), ctypes.c_void_p]

    def check(rc, what):
        if rc != 0:
            sys.exit(f"{what} failed: {rc}")

    check(lib.cuInit(0), "cuInit")
    torch.zeros(1, device="cuda")
    print("device:", torch.cuda.get_device_name(), "torch", torch.__version__)
    mod, fn = ctypes.c_void_p(), ctypes.c_void_p()
    check(lib.cuModuleLoadData(ctypes.byref(mod), open(args.cubin, "rb").read()), "load")
    check(lib.cuModuleGetFunction(ctypes.byref(fn), mod, args.kernel.encode()), "getfn")
    # mma_f16_f32: one problem per warp, 4 per CTA; wgmma_f16_f32: one problem per CTA.
    per_cta = 4 if args.kernel == "mma_f16_f32" else 1
    manifest, outs = [], []
    idxs = [FAMILY_INDEX[f] for f in args.families] if args.families else range(len(FAMILIES))
    for idx in idxs:
        name, a, b, c, h = family_inputs(idx)
        n = a.shape[0]
        ta = torch.from_numpy(a.reshape(n, 256).view(np.int16)).cuda()
        tbt = torch.from_numpy(np.ascontiguousarray(b.transpose(0, 2, 1)).reshape(n, 128)
                               .view(np.int16)).cuda()
        tc = torch.from_numpy(c.reshape(n, 128).view(np.int32)).cuda().view(torch.float32)
        res = []
        for rep in range(2):
            td = torch.full((n, 128), -1, dtype=torch.int32, device="cuda")  # NaN poison
            vals = [ctypes.c_void_p(t.data_ptr()) for t in (ta, tbt, tc, td)] + [ctypes.c_int(n)]
            params = (ctypes.c_void_p * 5)(*[ctypes.addressof(v) for v in vals])
            check(lib.cuLaunchKernel(fn, (n + per_cta - 1) // per_cta, 1, 1, 128, 1, 1, 0, None,
                                     params, None),
                  "launch")
            torch.cuda.synchronize()
            res.append(td.cpu().numpy().view(np.uint32).reshape(n, 16, 8))
        same = bool(np.array_equal(res[0], res[1]))
        print(f"{name:14s} n_mma={n:5d} dots={n * 128:8d} hash={h} deterministic={same}")
        manifest.append({"name": name, "n_mma": n, "hash": h, "deterministic": same})
        outs.append(res[0])
    np.concatenate([o.reshape(-1) for o in outs]).tofile(os.path.join(args.out, "D_all.bin"))
    json.dump({"seed": SEED, "families": manifest}, open(os.path.join(args.out, "manifest.json"),
                                                          "w"), indent=1)
    # A quick on-device score of the two leading hypotheses, in case the files do not come back.
    for idx, o in zip(idxs, outs):
        name, a, b, c, _ = family_inputs(idx)
        if name == "special":
            continue
        k = min(a.shape[0], 512)
        d = o[:k]
        sc = {hy: float(np.mean(run_model(a[:k], b[:k], c[:k], **HYP[hy]) == d))
              for hy in ("published_norm25", "mmasim_raw25")}
        print(f"  {name:14s} " + " ".join(f"{kk}={v:.4f}" for kk, v in sc.items()))


# ----------------------------------------------------------------------------------------------
# Models (exact integer arithmetic, vectorised over dot products).
# ----------------------------------------------------------------------------------------------
NEG_BIG = -100000  # exponent given to zero terms, so that they never set the maximum


def bitlen(x):
    """Bit length of non-negative int64 values."""
    x = x.copy()
    n = np.zeros(x.shape, np.int64)
    for s in (32, 16, 8, 4, 2, 1):
        m = x >= (np.int64(1) << s)
        n += np.where(m, s, 0)
        x = np.where(m, x >> s, x)
    return n + (x > 0)


def dec16(bits):
    """fp16 bits -> (signed integer significand, exponent of its lsb, frexp-style exponent)."""
    bits = bits.astype(np.int64)
    s, e, m = bits >> 15, (bits >> 10) & 0x1F, bits & 0x3FF
    sig = np.where(e > 0, m + 1024, m)
    sig = np.where(s == 1, -sig, sig)
    lsb = np.where(e > 0, e - 25, -24)
    raw = np.where(e > 0, e - 15, -14)
    return sig, lsb, raw


def dec32(bits):
    bits = bits.astype(np.int64)
    s, e, m = bits >> 31, (bits >> 23) & 0xFF, bits & 0x7FFFFF
    sig = np.where(e > 0, m + (1 << 23), m)
    sig = np.where(s == 1, -sig, sig)
    lsb = np.where(e > 0, e - 150, -149)
    raw = np.where(e > 0, e - 127, -126)
    return sig, lsb, raw


def lead(sig, lsb):
    """Exponent of the leading bit (NEG_BIG for zero)."""
    return np.where(sig != 0, lsb + bitlen(np.abs(sig)) - 1, NEG_BIG)


def fused(sig, lsb, aexp, F, cut, zero_in_max=False):
    """Align terms (axis -1) to the largest aexp, cut each to F fractional bits, sum exactly.

    Returns (S, q): the sum is S * 2^q."""
    if not zero_in_max:
        aexp = np.where(sig != 0, aexp, NEG_BIG)
    emax = aexp.max(axis=-1)
    q = emax - F
    sh = lsb - q[..., None]
    left = np.clip(sh, 0, 62)
    right = np.clip(-sh, 0, 62)
    up = sig << left
    if cut == "trunc":
        down = np.sign(sig) * (np.abs(sig) >> right)
    elif cut == "floor":
        down = sig >> right
    else:
        raise ValueError(cut)
    v = np.where(sh >= 0, up, down)
    return v.sum(axis=-1), q


def to_f32(S, q, mode, negzero):
    """Round S * 2^q to f32 bits."""
    mag = np.abs(S)
    n = bitlen(mag)
    lsb = np.maximum(q + n - 24, -149)
    s = lsb - q
    sl = np.clip(-s, 0, 62)
    sr = np.clip(s, 0, 62)
    mant = np.where(s <= 0, mag << sl, mag >> sr)
    rem = np.where(s <= 0, 0, mag - ((mag >> sr) << sr))
    half = np.where(s > 0, np.int64(1) << np.clip(sr - 1, 0, 62), 0)
    neg = S < 0
    if mode == "rz":
        inc = np.zeros(S.shape, bool)
    elif mode == "rne":
        inc = (rem > half) | ((rem == half) & (rem > 0) & ((mant & 1) == 1))
    elif mode == "rna":
        inc = (rem >= half) & (rem > 0)
    elif mode == "rd":  # toward -inf
        inc = neg & (rem > 0)
    elif mode == "ru":
        inc = ~neg & (rem > 0)
    else:
        raise ValueError(mode)
    mant = mant + inc
    val = np.ldexp(mant.astype(np.float64), lsb.astype(np.int32))
    val = np.where(neg, -val, val).astype(np.float32)
    bits = val.view(np.uint32).copy()
    bits[(S == 0) & negzero] = np.uint32(0x80000000)
    bits[(S == 0) & ~negzero] = np.uint32(0)
    return bits


def run_model(a, b, c, structure="fused17", align="raw", F=25, cut="trunc", rnd="rz", F2=None,
              zero_in_max=False, chunk=1024):
    """Model outputs (uint32 bits) for problems a (n,16,16), b (n,16,8), c (n,16,8)."""
    outs = []
    for s0 in range(0, a.shape[0], chunk):
        aa, bb, cc = a[s0:s0 + chunk], b[s0:s0 + chunk], c[s0:s0 + chunk]
        n = aa.shape[0]
        sa, la, ra = dec16(aa)                  # (n,16i,16k)
        sb, lb, rb = dec16(bb.transpose(0, 2, 1))  # (n,8j,16k)
        ps = (sa[:, :, None, :] * sb[:, None, :, :]).reshape(-1, 16)
        pl = (la[:, :, None, :] + lb[:, None, :, :]).reshape(-1, 16)
        pr = (ra[:, :, None, :] + rb[:, None, :, :]).reshape(-1, 16)
        if align == "rawsub":  # raw, but a subnormal fp16 operand counts its leading bit

            ra2 = np.where(sa == 0, ra, np.where((aa.astype(np.int64) >> 10) & 31, ra, lead(sa, la)))
            rb2 = np.where(sb == 0, rb, np.where((bb.transpose(0, 2, 1).astype(np.int64) >> 10) & 31,
                                                  rb, lead(sb, lb)))
            pr = (ra2[:, :, None, :] + rb2[:, None, :, :]).reshape(-1, 16)
        pa = lead(ps, pl) if align == "norm" else pr
        cs, cl, cr = (x.reshape(-1) for x in dec32(cc))
        ca = lead(cs, cl) if align == "norm" else cr
        # Sign of an exact-zero result: -0 only if C and every product are negative zeros.
        a_neg = (aa.astype(np.int64) >> 15) == 1
        b_neg = (bb.transpose(0, 2, 1).astype(np.int64) >> 15) == 1
        pneg = (a_neg[:, :, None, :] ^ b_neg[:, None, :, :]).reshape(-1, 16)
        cneg = (cc.reshape(-1).astype(np.int64) >> 31) == 1
        negzero_all = cneg & (pneg | (ps != 0)).all(axis=-1) & (ps == 0).all(axis=-1)
        if structure == "fused17":
            S, q = fused(np.concatenate([cs[:, None], ps], 1), np.concatenate([cl[:, None], pl], 1),
                         np.concatenate([ca[:, None], pa], 1), F, cut, zero_in_max)
            out = to_f32(S, q, rnd, negzero_all)
        elif structure.startswith("split"):  # C + first G products -> f32 -> + next G ...
            G = int(structure[5:])
            acc = cc.reshape(-1).astype(np.uint32)
            for g0 in range(0, 16, G):
                xs, xl, xr = dec32(acc)
                xa = xr if align == "raw" else lead(xs, xl)
                sl = slice(g0, g0 + G)
                S, q = fused(np.concatenate([xs[:, None], ps[:, sl]], 1),
                             np.concatenate([xl[:, None], pl[:, sl]], 1),
                             np.concatenate([xa[:, None], pa[:, sl]], 1), F, cut)
                acc = to_f32(S, q, rnd, ((acc >> 31) == 1) & (ps[:, sl] == 0).all(-1)
                             & pneg[:, sl].all(-1))
            out = acc
        elif structure == "c_after":  # 16 products fused, then fused with C at F2 bits
            S1, q1 = fused(ps, pl, pa, F, cut)
            emax16 = q1 + F
            a1 = emax16 if align == "raw" else lead(S1, q1)
            S, q = fused(np.stack([cs, S1], 1), np.stack([cl, q1], 1), np.stack([ca, a1], 1),
                         F2 or F, cut)
            out = to_f32(S, q, rnd, negzero_all)
        else:
            raise ValueError(structure)
        outs.append(out.reshape(n, 16, 8))
    return np.concatenate(outs)


HYP = {
    "published_norm25": dict(align="norm", F=25, cut="trunc", rnd="rz"),
    "mmasim_raw25": dict(align="raw", F=25, cut="trunc", rnd="rz"),
}


def exact_rne(a, b, c):
    return run_model(a, b, c, align="norm", F=62 - 25, cut="trunc", rnd="rne")


# ----------------------------------------------------------------------------------------------
# Analysis.
# ----------------------------------------------------------------------------------------------
def special_report(a, b, c, d):
    """Inf/NaN inputs: compare with IEEE semantics of the exact sum (NaN if any NaN, inf*0 or
    inf-inf; else the infinity)."""
    av = a.view(np.float16).astype(np.float64)
    bv = b.view(np.float16).astype(np.float64)
    cv = c.view(np.float32).astype(np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        prod = av[:, :, None, :] * bv.transpose(0, 2, 1)[:, None, :, :]
        ref = prod.sum(-1) + cv
    hw = d.view(np.float32)
    special = ~np.isfinite(ref)
    nan_ok = np.isnan(hw[np.isnan(ref)]).mean()
    inf_ok = (hw[np.isinf(ref)] == ref[np.isinf(ref)]).mean()
    nanbits = np.unique(d[np.isnan(hw)])
    print(f"special: {special.sum()} non-finite expected; NaN where expected {nan_ok:.4f}, "
          f"inf (right sign) where expected {inf_ok:.4f}; NaN bit patterns "
          f"{[hex(int(x)) for x in nanbits[:4]]}; unexpected non-finite "
          f"{int((~np.isfinite(hw) & ~special).sum())}")


def runs(dirs):
    """Every family of the device runs in `dirs`: (name, a, b, c, hardware d), inputs regenerated
    and checked against the run's manifest hashes."""
    for dr in dirs:
        man = json.load(open(os.path.join(dr, "manifest.json")))
        D = np.fromfile(os.path.join(dr, "D_all.bin"), dtype=np.uint32)
        off = 0
        for f in man["families"]:
            name, a, b, c, h = family_inputs(FAMILY_INDEX[f["name"]])
            assert h == f["hash"], f"input mismatch for {name}"
            n = a.shape[0]
            yield name, a, b, c, D[off:off + n * 128].reshape(n, 16, 8)
            off += n * 128
        assert off == D.size


def analyse(args):
    data = []
    for name, a, b, c, d in runs(args.dir):
        if name == "special":
            special_report(a, b, c, d)
            continue
        if args.limit:
            a, b, c, d = a[:args.limit], b[:args.limit], c[:args.limit], d[:args.limit]
        data.append((name, a, b, c, d))
    print("dot products scored:", sum(x[4].size for x in data))
    hyps = dict(HYP)
    if args.sweep:
        hyps["f17 raw F25 trunc rz zero-products-in-max"] = dict(zero_in_max=True)
        for F in (24, 25, 26):
            hyps[f"f17 rawsub F{F} trunc rz"] = dict(align="rawsub", F=F, cut="trunc", rnd="rz")
        for align in ("raw", "norm"):
            for F in range(23, 31):
                for cut in ("trunc", "floor"):
                    for rnd in ("rz", "rne", "rd"):
                        hyps[f"f17 {align} F{F} {cut} {rnd}"] = dict(align=align, F=F, cut=cut,
                                                                     rnd=rnd)
        for st in ("split8", "split4", "c_after"):
            for align in ("raw", "norm"):
                for F in (24, 25, 26):
                    for cut in ("trunc", "floor"):
                        hyps[f"{st} {align} F{F} {cut} rz"] = dict(structure=st, align=align,
                                                                   F=F, cut=cut, rnd="rz")
    if args.hyp:
        hyps = {k: v for k, v in hyps.items() if any(s in k for s in args.hyp)}
    names = [d[0] for d in data]
    rows = []
    for hname, kw in hyps.items():
        rates, total_ok, total = [], 0, 0
        for name, a, b, c, d in data:
            m = run_model(a, b, c, **kw)
            ok = int((m == d).sum())
            rates.append(ok / d.size)
            total_ok += ok
            total += d.size
        rnd_ok = sum(r * data[i][4].size for i, r in enumerate(rates) if names[i].startswith("random"))
        rnd_n = sum(data[i][4].size for i in range(len(names)) if names[i].startswith("random"))
        rows.append((hname, rnd_ok / rnd_n, total_ok / total, rates))
        print(f"{hname:32s} random={rnd_ok / rnd_n:.6f} all={total_ok / total:.6f} " +
              " ".join(f"{n[:8]}={r:.4f}" for n, r in zip(names, rates)), flush=True)
    rows.sort(key=lambda r: -r[2])
    print("\nbest:")
    for r in rows[:10]:
        print(f"{r[0]:32s} random={r[1]:.6f} all={r[2]:.6f}")
    if args.show:
        kw = hyps[args.show]
        for name, a, b, c, d in data:
            m = run_model(a, b, c, **kw)
            bad = np.argwhere(m != d)
            print(f"\n{name}: {len(bad)} mismatches")
            for (p, i, j) in bad[:args.nshow]:
                av = a[p, i, :].view(np.float16).astype(np.float64)
                bv = b[p, :, j].view(np.float16).astype(np.float64)
                cv = c[p, i, j].view(np.float32)
                print(f"  C={float(cv)!r} hw={float(d[p, i, j].view(np.float32))!r} "
                      f"model={float(m[p, i, j].view(np.float32))!r}")
                print("    a=" + ",".join(f"{x:g}" for x in av))
                print("    b=" + ",".join(f"{x:g}" for x in bv))


def export(args):
    """Writes every dot product of the runs as flat little-endian records for the Rust model:
    c (u32 f32 bits), a[16] (u16 fp16 bits), b[16] (u16), d (u32, the hardware's output); and an
    index (family name, record count) as JSON. Scored by crates/model/examples/score_hopper_model.rs."""
    index = []
    with open(args.out, "wb") as out:
        for name, a, b, c, d in runs(args.dir):
            n = a.shape[0]
            # One record per output element (p, i, j): row i of A, column j of B.
            rows = np.broadcast_to(a[:, :, None, :], (n, 16, 8, 16)).astype(np.uint16)
            cols = np.broadcast_to(np.transpose(b, (0, 2, 1))[:, None, :, :], (n, 16, 8, 16)).astype(np.uint16)
            rec = np.zeros((n, 16, 8, 36), dtype=np.uint16)
            rec[..., 0:2] = c.astype(np.uint32)[..., None].view(np.uint16).reshape(n, 16, 8, 2)
            rec[..., 2:18] = rows
            rec[..., 18:34] = cols
            rec[..., 34:36] = d.astype(np.uint32)[..., None].view(np.uint16).reshape(n, 16, 8, 2)
            rec = rec.reshape(-1, 36)
            if args.per_family:
                # An even spread over the family (the outputs of one problem are correlated).
                rec = rec[np.linspace(0, rec.shape[0] - 1, args.per_family).astype(np.int64)]
            rec.tofile(out)
            index.append([name, int(rec.shape[0])])
    json.dump(index, open(args.out + ".json", "w"))
    print(f"wrote {sum(c for _, c in index)} records to {args.out}")


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    d = sub.add_parser("device")
    d.add_argument("--cubin", required=True)
    d.add_argument("--out", required=True)
    d.add_argument("--kernel", default="mma_f16_f32", choices=["mma_f16_f32", "wgmma_f16_f32"],
                   help="the entry point in the cubin (mma_f16_f32.cu or wgmma_f16_f32.cu)")
    d.add_argument("--families", nargs="*")
    an = sub.add_parser("analyse")
    an.add_argument("--dir", required=True, nargs="+")
    an.add_argument("--sweep", action="store_true")
    an.add_argument("--hyp", nargs="*")
    an.add_argument("--limit", type=int, default=0)
    an.add_argument("--show")
    an.add_argument("--nshow", type=int, default=5)
    ex = sub.add_parser("export")
    ex.add_argument("--dir", required=True, nargs="+")
    ex.add_argument("--out", required=True)
    ex.add_argument("--per-family", type=int, default=0, help="keep this many records per family")
    args = ap.parse_args()
    {"device": device, "analyse": analyse, "export": export}[args.cmd](args)


if __name__ == "__main__":
    main()
