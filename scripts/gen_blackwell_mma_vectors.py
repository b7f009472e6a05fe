#!/usr/bin/env python3
"""Vectors for the Blackwell `tcgen05.mma kind::mxf4nvf4` adder model, produced by microsoft/MMA-Sim.

Each vector is one output of one instruction (K = 64): 64 FP4 (e2m1) codes of A's row, 64 of B's
column, the row's and the column's block-scale bytes, C (f32 bits) and MMA-Sim's D (f32 bits).
crates/model/tests/model/blackwell_mmasim_vectors.rs checks both Rust paths (`model::mma::blackwell_block_scaled_step`
and its fast path) against every vector, bit for bit.

    python3 scripts/gen_blackwell_mma_vectors.py --mmasim DIR --out FILE --count N --seed S [--jobs J]

DIR is a copy of MMA-Sim's Python sources (the directory that holds the `mmasim` package; also
read from $MMASIM_DIR). MMA-Sim needs torch (it uses float8_e4m3fn and float8_e8m0fnu); nothing
else is imported beyond the standard library, and no network is used.

How MMA-Sim is called. Its instruction class `mmasim.simulator.nv_ptx.tcgen05mma_block_scale`
accepts only legal shapes (M = 128, N a multiple of 8, K = 64 for kind::mxf4nvf4) and computes
every output of the instruction in Python, one at a time, from row i of A and of scale_A, column
j of B and of scale_B and C[i, j] alone. This script builds the legal instruction (for example
`m128n8k64.block16.f32.e2m1.e2m1.ue4m3`), then sets the object's m and n to 1 so that one call
computes the one output D[0, 0] from 1x32 packed A, 32x1 packed B, 1x1 C and 1x(64/block) /
(64/block)x1 scales, through the same code path (`check_input`, `unpack_fp4_tensor`,
`nv_fused_dot_add_with_block_scale` with its 35 fractional bits). `--verify-full K` (default 24)
checks that shortcut: K vectors are placed at a random (i, j) of a full m128n8 instruction whose
other rows and columns are random, and D[i, j] of the full call must equal the vector's D.

Kinds (instruction qualifiers, all K = 64, A and B e2m1 packed two per byte, D and C f32):
  0  m128n8k64.block16.f32.e2m1.e2m1.ue4m3   NVFP4: 4 UE4M3 scales per row / column
  1  m128n8k64.block32.f32.e2m1.e2m1.ue8m0   MXFP4: 2 UE8M0 scales (bytes 2 and 3 of each 4 are 0)
  2  m128n8k64.block16.f32.e2m1.e2m1.ue8m0   4 UE8M0 scales

File format (version 1), everything little-endian:
  a text header of ASCII lines, each ending in '\\n':
      nvfp4-oracle blackwell-mma-vectors v1
      source <free text: generator, MMA-Sim commit, how it was called>
      kinds <id>=<qualifier> ...
      families <id>=<name> ...
      counts operands=<P> instructions=<I>
      end
  then P operand records of 64 bytes: A's 64 codes then B's 64 codes, two per byte, even K in
  the low nibble (the layout MMA-Sim's packed e2m1 tensors use);
  then I instruction records of 22 bytes:
      u32 operand record index, u8 kind, u8 family,
      u8[4] A's scale bytes (block j covers K 16j..16j+15, or 32j.. for block32; unused bytes 0),
      u8[4] B's scale bytes, u32 C bits, u32 D bits (MMA-Sim's output).
  Several instructions share one operand record (the same A and B under other scales or C).

Instructions on which MMA-Sim raises (C = +-inf: its Python truncates an infinite significand)
are not stored; the summary printed at the end counts them per family.

`--backend model` writes the same file from this script's own reading of MMA-Sim's semantics
(`model_d`, pure Python) instead of MMA-Sim, to test the pipeline without torch; its source line
says so and crates/model/tests/model/blackwell_mmasim_vectors.rs refuses to count such a file as MMA-Sim's.
`--check-model` (with MMA-Sim) also scores `model_d` against MMA-Sim per family.
"""
import argparse
import os
import struct
import sys
import time

MAGIC = "nvfp4-oracle blackwell-mma-vectors v1"
MASK64 = (1 << 64) - 1

KINDS = {
    0: ("m128n8k64.block16.f32.e2m1.e2m1.ue4m3", 16, "ue4m3"),
    1: ("m128n8k64.block32.f32.e2m1.e2m1.ue8m0", 32, "ue8m0"),
    2: ("m128n8k64.block16.f32.e2m1.e2m1.ue8m0", 16, "ue8m0"),
}

# (id, name, kind, weight): instructions per family = weight / total * --count.
FAMILIES = [
    (0, "random", 0, 14),
    (1, "random_wide", 0, 10),
    (2, "realistic", 0, 6),
    (3, "zero_blocks_large_scales", 0, 8),
    (4, "cancelling_blocks_large_scales", 0, 5),
    (5, "mixed_scales", 0, 5),
    (6, "nan_scales", 0, 3),
    (7, "subnormal_scales", 0, 6),
    (8, "sign_set_scales", 0, 4),
    (9, "c_zero", 0, 4),
    (10, "c_tiny", 0, 5),
    (11, "c_huge", 0, 5),
    (12, "c_cancel", 0, 6),
    (13, "every_code", 0, 3),
    (14, "code_pairs", 0, 2),
    (15, "single_block", 0, 4),
    (16, "every_scale_byte", 0, 3),
    (17, "c_inf", 0, 0),  # 16 attempts whatever --count: MMA-Sim raises on them
    (20, "mxf4_random", 1, 5),
    (21, "mxf4_wide", 1, 5),
    (22, "mxf4_zero_blocks", 1, 3),
    (23, "mxf4_c_cancel", 1, 2),
    (30, "ue8m0_block16_random", 2, 3),
    (31, "ue8m0_block16_wide", 2, 3),
]

HALF_UNITS = [0, 1, 2, 3, 4, 6, 8, 12]  # e2m1 magnitudes in units of 1/2


# ------------------------------------------------------------------------------------------------
# Deterministic random numbers (splitmix64: the same on every Python and machine).
# ------------------------------------------------------------------------------------------------
class Rng:
    def __init__(self, seed):
        self.state = (seed * 0xD1B54A32D192ED03 + 1) & MASK64

    def next(self):
        self.state = (self.state + 0x9E3779B97F4A7C15) & MASK64
        z = self.state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
        return z ^ (z >> 31)

    def below(self, n):
        return self.next() % n

    def int(self, lo, hi):  # inclusive
        return lo + self.below(hi - lo + 1)

    def chance(self, p):
        return self.next() < p * 2.0**64

    def choice(self, items):
        return items[self.below(len(items))]

    def shuffle(self, items):
        for i in range(len(items) - 1, 0, -1):
            j = self.below(i + 1)
            items[i], items[j] = items[j], items[i]
        return items


# ------------------------------------------------------------------------------------------------
# Exact values (integers times powers of two) and f32 bits.
# ------------------------------------------------------------------------------------------------
def fp4_half(code):
    h = HALF_UNITS[code & 7]
    return -h if code & 8 else h


def f32_parts(bits):
    """(signed integer m, exponent e) with value m * 2^e, and the exponent field's alignment."""
    field = (bits >> 23) & 0xFF
    frac = bits & 0x7FFFFF
    m = frac | (0x800000 if field else 0)
    if bits >> 31:
        m = -m
    return m, max(field, 1) - 150, max(field, 1) - 127


def f32_bits_from_exact(n, e, mode="rne"):
    """n * 2^e as f32 bits, rounded to nearest even or toward zero; overflow to inf / max."""
    if n == 0:
        return 0
    sign = 0x80000000 if n < 0 else 0
    mag = abs(n)
    top = mag.bit_length() - 1 + e
    quantum = max(top - 23, -149)
    shift = quantum - e
    if shift <= 0:
        kept = mag << -shift
    else:
        kept = mag >> shift
        rem = mag - (kept << shift)
        if mode == "rne":
            half = 1 << (shift - 1)
            if rem > half or (rem == half and kept & 1):
                kept += 1
    if kept == 0:
        return sign
    if kept >= 1 << 24:  # carried into the next binade
        kept >>= 1
        quantum += 1
    if kept < 1 << 23:  # subnormal
        return sign | kept
    field = quantum + 23 + 127
    if field >= 255:
        return sign | (0x7F800000 if mode == "rne" else 0x7F7FFFFF)
    return sign | (field << 23) | (kept & 0x7FFFFF)


def rand_f32(rng, lo, hi, sign=None):
    """A random f32 with exponent uniform in [lo, hi] (clamped to f32: subnormal below -126)."""
    e = rng.int(lo, hi)
    s = rng.below(2) if sign is None else sign
    frac = rng.below(1 << 23)
    if e < -149:
        e = -149
    if e > 127:
        e = 127
    if e < -126:  # subnormal: a random value below 2^(e+1)
        m = (1 << (e + 149)) | rng.below(1 << (e + 149))
        return (s << 31) | min(m, 0x7FFFFF)
    return (s << 31) | ((e + 127) << 23) | frac


def decode_scale(kind, byte):
    """(significand, exponent, alignment) with value significand * 2^exponent, or None for NaN:
    this script's reading of MMA-Sim's extract_significand_exponent on a scale."""
    if KINDS[kind][2] == "ue4m3":
        mag = byte & 0x7F
        if mag == 0x7F:
            return None
        field, man = mag >> 3, mag & 7
        if field == 0:
            return (man, -9, -6 if man else -126)
        return (8 | man, field - 10, field - 7)
    if byte == 0xFF:
        return None
    return (1, byte - 127, byte - 127)


def exact_terms(kind, a, b, sfa, sfb):
    """The block terms as (integer, exponent, alignment), or None if a scale is NaN."""
    block = KINDS[kind][1]
    used = 64 // block
    sa = [decode_scale(kind, x) for x in sfa[:used]]
    sb = [decode_scale(kind, x) for x in sfb[:used]]
    if any(x is None for x in sa + sb):
        return None
    terms = []
    for g in range(4):
        s = sum(fp4_half(a[k]) * fp4_half(b[k]) for k in range(16 * g, 16 * g + 16))
        x, y = sa[16 * g // block], sb[16 * g // block]
        terms.append((s * x[0] * y[0], x[1] + y[1] - 2, x[2] + y[2]))
    return terms


def model_d(kind, a, b, sfa, sfb, c_bits):
    """This script's own reading of MMA-Sim's mxf4nvf4 adder (not MMA-Sim's code): D bits, or
    None where MMA-Sim raises (C infinite)."""
    terms = exact_terms(kind, a, b, sfa, sfb)
    c_field = (c_bits >> 23) & 0xFF
    if terms is None or (c_field == 0xFF and c_bits & 0x7FFFFF):
        return 0x7FFFFFFF
    if c_field == 0xFF:
        return None
    cm, ce, calign = f32_parts(c_bits)
    everything = [(cm, ce, calign)] + terms
    emax = max(t[2] for t in everything)
    q = emax - 35
    total = 0
    for n, e, _ in everything:
        shift = e - q
        if shift >= 0:
            total += n << shift
        else:
            mag = abs(n) >> -shift
            total += -mag if n < 0 else mag
    if total == 0:
        return 0
    if abs(total).bit_length() - 1 + q >= 128:
        return 0xFF800000 if total < 0 else 0x7F800000
    bits = f32_bits_from_exact(total, q, "rz")
    return 0 if bits == 0x80000000 else bits


def exact_sum(kind, a, b, sfa, sfb):
    """The exact sum of the products as (integer, exponent), or None for NaN scales."""
    terms = exact_terms(kind, a, b, sfa, sfb)
    if terms is None:
        return None
    e = min(t[1] for t in terms)
    return sum(t[0] << (t[1] - e) for t in terms), e


# ------------------------------------------------------------------------------------------------
# Families: each yields groups (a codes, b codes, [(kind, family, sfa, sfb, c_bits), ...]).
# ------------------------------------------------------------------------------------------------
def random_codes(rng, n=64):
    return [rng.below(16) for _ in range(n)]


def zero_code(rng):
    return rng.choice([0, 8])


def e4m3_band(rng, lo, hi, sign_bits=False):
    byte = rng.int(lo, hi)
    if sign_bits and rng.below(2):
        byte |= 0x80
    return byte


def e4m3_any_finite(rng):
    while True:
        byte = rng.below(256)
        if byte & 0x7F != 0x7F:
            return byte


def scale_log2(kind, sfa, sfb):
    """The largest block alignment (sum of scale exponents) over blocks with non-zero, non-NaN
    scales, 0 if none: a rough log2 magnitude of the products, for choosing C."""
    aligns = []
    for j in range(64 // KINDS[kind][1]):
        x, y = decode_scale(kind, sfa[j]), decode_scale(kind, sfb[j])
        if x and y and x[0] and y[0]:
            aligns.append(x[2] + y[2])
    return max(aligns, default=0)


def c_mix(rng, kind, a, b, sfa, sfb):
    """A C for a random family: zero, comparable to the products, tiny, huge, or cancelling."""
    base = scale_log2(kind, sfa, sfb)
    r = rng.below(20)
    if r < 3:
        return rng.choice([0, 0x80000000])
    if r < 12:
        return rand_f32(rng, base - 8, base + 8)
    if r < 15:
        return rand_f32(rng, base - 60, base - 20)
    if r < 17:
        return rand_f32(rng, base + 20, base + 60)
    return c_cancel(rng, kind, a, b, sfa, sfb)


def c_cancel(rng, kind, a, b, sfa, sfb):
    s = exact_sum(kind, a, b, sfa, sfb)
    if s is None or s[0] == 0:
        return rand_f32(rng, -30, 10)
    n, e = s
    bits = f32_bits_from_exact(-n, e, rng.choice(["rne", "rz"]))
    if bits & 0x7F800000 == 0x7F800000:
        return rand_f32(rng, -30, 10)
    delta = rng.choice([0, 0, 0, 1, -1, 2, -3])
    nb = bits + delta
    if (nb & 0x7FFFFFFF) >= 0x7F800000 or (nb ^ bits) >> 31:
        nb = bits
    return nb


def gen_family(rng, fid, kind, count):
    """Groups of one family, about `count` instructions in all."""
    groups = []
    made = 0

    def add(a, b, insts):
        nonlocal made
        groups.append((a, b, insts))
        made += len(insts)

    name = {f[0]: f[1] for f in FAMILIES}[fid]
    nsc = 64 // KINDS[kind][1]

    def pad(scales):
        return list(scales) + [0] * (4 - len(scales))

    if name == "c_inf":
        for _ in range(4):
            a, b = random_codes(rng), random_codes(rng)
            insts = []
            for c in [0x7F800000, 0xFF800000, 0x7F800000, 0xFF800000]:
                sfa = [e4m3_band(rng, 0x30, 0x48) for _ in range(4)]
                sfb = [e4m3_band(rng, 0x30, 0x48) for _ in range(4)]
                insts.append((kind, fid, sfa, sfb, c))
            add(a, b, insts)
        return groups

    pair = 0
    scale_byte = 0
    while made < count:
        if name in ("random", "random_wide", "realistic", "every_code", "c_zero", "c_tiny",
                    "c_huge", "c_cancel", "nan_scales", "subnormal_scales", "sign_set_scales",
                    "mixed_scales", "every_scale_byte"):
            if name == "every_code":
                a, b = [], []
                for _ in range(4):
                    a += rng.shuffle(list(range(16)))
                    b += rng.shuffle(list(range(16)))
            elif name == "realistic":
                # Quantized-looking blocks: every block holds a +-6 (its amax), others spread.
                a, b = [], []
                for _ in range(4):
                    for v in (a, b):
                        blk = [rng.choice([0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 6, 7]) | (rng.below(2) << 3)
                               for _ in range(16)]
                        blk[rng.below(16)] = 7 | (rng.below(2) << 3)
                        v += blk
            else:
                a, b = random_codes(rng), random_codes(rng)
            insts = []
            for r in range(4):
                if name == "random_wide":
                    sfa = [e4m3_any_finite(rng) for _ in range(4)]
                    sfb = [e4m3_any_finite(rng) for _ in range(4)]
                elif name == "realistic":
                    sfa = [e4m3_band(rng, 0x10, 0x40) for _ in range(4)]
                    sfb = [e4m3_band(rng, 0x10, 0x40) for _ in range(4)]
                elif name == "nan_scales":
                    sfa = [e4m3_band(rng, 0x28, 0x50) for _ in range(4)]
                    sfb = [e4m3_band(rng, 0x28, 0x50) for _ in range(4)]
                    for _ in range(rng.int(1, 2)):
                        side = sfa if rng.below(2) else sfb
                        side[rng.below(4)] = rng.choice([0x7F, 0xFF])
                elif name == "subnormal_scales":
                    pick = lambda: (rng.choice([rng.int(0, 7), rng.int(0, 7), rng.int(8, 0x20),
                                                rng.int(0x30, 0x48)])
                                    | (0x80 if rng.chance(0.25) else 0))
                    sfa = [pick() for _ in range(4)]
                    sfb = [pick() for _ in range(4)]
                elif name == "sign_set_scales":
                    sfa = [e4m3_band(rng, 0x20, 0x58) | 0x80 for _ in range(4)]
                    sfb = [e4m3_band(rng, 0x20, 0x58) | (0x80 * rng.below(2)) for _ in range(4)]
                    if rng.chance(0.2):
                        (sfa if rng.below(2) else sfb)[rng.below(4)] = 0x80  # -0: zero scale
                elif name == "mixed_scales":
                    sfa = [e4m3_band(rng, 0x01, 0x28) for _ in range(4)]
                    sfb = [e4m3_band(rng, 0x01, 0x28) for _ in range(4)]
                    j = rng.below(4)
                    sfa[j] = e4m3_band(rng, 0x60, 0x7E)
                    sfb[j] = e4m3_band(rng, 0x60, 0x7E)
                elif name == "every_scale_byte":
                    sfa = [e4m3_band(rng, 0x30, 0x48) for _ in range(4)]
                    sfb = [e4m3_band(rng, 0x30, 0x48) for _ in range(4)]
                    side = sfa if (scale_byte >> 8) & 1 == 0 else sfb
                    side[rng.below(4)] = scale_byte & 0xFF
                    scale_byte += 1
                else:
                    sfa = [e4m3_band(rng, 0x30, 0x48) for _ in range(4)]
                    sfb = [e4m3_band(rng, 0x30, 0x48) for _ in range(4)]
                if name == "c_zero":
                    c = rng.choice([0, 0x80000000])
                elif name == "c_tiny":
                    base = scale_log2(kind, sfa, sfb)
                    c = rng.choice([rand_f32(rng, -149, -127), rand_f32(rng, -126, -100),
                                    rand_f32(rng, base - 60, base - 25),
                                    rand_f32(rng, base - 40, base - 30)])
                elif name == "c_huge":
                    base = scale_log2(kind, sfa, sfb)
                    c = rng.choice([rand_f32(rng, base + 20, base + 40),
                                    rand_f32(rng, base + 30, 127), 0x7F7FFFFF, 0xFF7FFFFF,
                                    rand_f32(rng, 120, 127)])
                elif name == "c_cancel":
                    c = c_cancel(rng, kind, a, b, sfa, sfb)
                else:
                    c = c_mix(rng, kind, a, b, sfa, sfb)
                insts.append((kind, fid, sfa, sfb, c))
            add(a, b, insts)
        elif name in ("zero_blocks_large_scales", "cancelling_blocks_large_scales",
                      "mxf4_zero_blocks"):
            a, b = random_codes(rng), random_codes(rng)
            groups_n = 4
            special = rng.shuffle(list(range(groups_n)))[: rng.int(1, 3)]
            for g in special:
                for k in range(16 * g, 16 * g + 16):
                    if name == "cancelling_blocks_large_scales":
                        continue
                    which = rng.below(3)  # zero A, zero B, or both
                    if which != 1:
                        a[k] = zero_code(rng)
                    if which != 0:
                        b[k] = zero_code(rng)
                if name == "cancelling_blocks_large_scales":
                    # products k and k + 8 cancel exactly
                    for k in range(16 * g, 16 * g + 8):
                        a[k + 8] = a[k]
                        b[k + 8] = b[k] ^ 8
            insts = []
            for r in range(4):
                if kind == 0:
                    sfa = [e4m3_band(rng, 0x01, 0x40) for _ in range(4)]
                    sfb = [e4m3_band(rng, 0x01, 0x40) for _ in range(4)]
                    for g in special:
                        sfa[g] = e4m3_band(rng, 0x68, 0x7E)
                        sfb[g] = e4m3_band(rng, 0x68, 0x7E)
                else:
                    sfa = [rng.int(100, 130) for _ in range(nsc)]
                    sfb = [rng.int(100, 130) for _ in range(nsc)]
                    for g in special:
                        sfa[16 * g // 32] = rng.int(140, 200)
                        sfb[16 * g // 32] = rng.int(140, 200)
                    sfa, sfb = pad(sfa), pad(sfb)
                c = rng.choice([0, 0, rand_f32(rng, -30, 10), rand_f32(rng, -60, -20)])
                insts.append((kind, fid, sfa, sfb, c))
            add(a, b, insts)
        elif name == "code_pairs":
            ca, cb = pair & 15, pair >> 4 & 15
            pair = (pair + 1) % 256
            a, b = [0] * 64, [0] * 64
            k = rng.below(64)
            a[k], b[k] = ca, cb
            insts = []
            for r in range(4):
                sfa = [e4m3_band(rng, 0x01, 0x7E) for _ in range(4)]
                sfb = [e4m3_band(rng, 0x01, 0x7E) for _ in range(4)]
                if r == 0:
                    c = rng.choice([0, 0x80000000])
                elif r == 1:
                    c = c_cancel(rng, kind, a, b, sfa, sfb)
                else:
                    c = c_mix(rng, kind, a, b, sfa, sfb)
                insts.append((kind, fid, sfa, sfb, c))
            add(a, b, insts)
        elif name == "single_block":
            a, b = [0] * 64, [0] * 64
            g = rng.below(4)
            for k in range(16 * g, 16 * g + 16):
                a[k], b[k] = rng.below(16), rng.below(16)
            insts = []
            for r in range(4):
                sfa = [e4m3_any_finite(rng) for _ in range(4)]
                sfb = [e4m3_any_finite(rng) for _ in range(4)]
                base = scale_log2(kind, sfa, sfb)
                c = rng.choice([0, rand_f32(rng, base - 45, base + 45),
                                rand_f32(rng, base - 45, base + 45)])
                insts.append((kind, fid, sfa, sfb, c))
            add(a, b, insts)
        elif name in ("mxf4_random", "mxf4_wide", "mxf4_c_cancel", "ue8m0_block16_random",
                      "ue8m0_block16_wide"):
            a, b = random_codes(rng), random_codes(rng)
            insts = []
            for r in range(4):
                if name.endswith("wide"):
                    pick = lambda: rng.choice([rng.int(0, 254), rng.int(0, 30), rng.int(220, 254),
                                               rng.int(100, 154), 0xFF if rng.chance(0.1)
                                               else rng.int(0, 254)])
                else:
                    pick = lambda: rng.int(119, 135)
                sfa = pad([pick() for _ in range(nsc)])
                sfb = pad([pick() for _ in range(nsc)])
                if name == "mxf4_c_cancel":
                    c = c_cancel(rng, kind, a, b, sfa, sfb)
                elif name.endswith("wide"):
                    c = rng.choice([0, 0x80000000, rand_f32(rng, -149, 127),
                                    rand_f32(rng, -149, 127), c_mix(rng, kind, a, b, sfa, sfb)])
                else:
                    c = c_mix(rng, kind, a, b, sfa, sfb)
                insts.append((kind, fid, sfa, sfb, c))
            add(a, b, insts)
        else:
            raise ValueError(name)
    return groups


def generate(count, seed):
    total_weight = sum(f[3] for f in FAMILIES)
    groups = []
    for fid, name, kind, weight in FAMILIES:
        n = 16 if name == "c_inf" else max(4, round(count * weight / total_weight))
        rng = Rng(seed * 1000003 + fid)
        groups += gen_family(rng, fid, kind, n)
    return groups


# ------------------------------------------------------------------------------------------------
# MMA-Sim.
# ------------------------------------------------------------------------------------------------
_SIM = {}


def pack(codes):
    return bytes(codes[2 * i] | codes[2 * i + 1] << 4 for i in range(32))


def mmasim_setup(path):
    sys.path.insert(0, os.path.abspath(path))
    import torch  # noqa: F401
    from mmasim.simulator.nv_ptx import tcgen05mma_block_scale

    torch.set_num_threads(1)
    for kind, (qualifier, _, _) in KINDS.items():
        sim = tcgen05mma_block_scale("Blackwell", qualifier)
        full = tcgen05mma_block_scale("Blackwell", qualifier)
        sim.m, sim.n = 1, 1  # one output: see the module docstring
        _SIM[kind] = (sim, full)


def _tensors(kind, a_rows, b_cols, c_matrix, sfa_rows, sfb_cols):
    """Torch operands of an m x n instruction from per-row / per-column lists."""
    import torch

    s_dtype = torch.float8_e4m3fn if KINDS[kind][2] == "ue4m3" else torch.float8_e8m0fnu
    nsc = 64 // KINDS[kind][1]
    A = torch.tensor([list(pack(r)) for r in a_rows], dtype=torch.uint8)
    B = torch.tensor([list(pack(c)) for c in b_cols], dtype=torch.uint8).T.contiguous()
    C = torch.tensor(
        [[x - (1 << 32) if x >> 31 else x for x in row] for row in c_matrix], dtype=torch.int32
    ).view(torch.float32)
    SA = torch.tensor([list(s[:nsc]) for s in sfa_rows], dtype=torch.uint8).view(s_dtype)
    SB = torch.tensor([list(s[:nsc]) for s in sfb_cols], dtype=torch.uint8).view(s_dtype).T
    return A, B, C, SA, SB.contiguous()


def mmasim_d(kind, a, b, sfa, sfb, c):
    import torch

    sim = _SIM[kind][0]
    D = sim(*_tensors(kind, [a], [b], [[c]], [sfa], [sfb]))
    return D.view(torch.int32)[0, 0].item() & 0xFFFFFFFF


def mmasim_full_check(kind, a, b, sfa, sfb, c, seed):
    """D[i, j] of a full m128n8 instruction with this vector at (i, j) and random elsewhere."""
    import torch

    full = _SIM[kind][1]
    rng = Rng(seed)
    nsc = 64 // KINDS[kind][1]
    i, j = rng.below(full.m), rng.below(full.n)
    scale = (lambda: e4m3_band(rng, 0x30, 0x48)) if kind == 0 else (lambda: rng.int(119, 135))
    a_rows = [random_codes(rng) for _ in range(full.m)]
    b_cols = [random_codes(rng) for _ in range(full.n)]
    sfa_rows = [[scale() for _ in range(nsc)] for _ in range(full.m)]
    sfb_cols = [[scale() for _ in range(nsc)] for _ in range(full.n)]
    cm = [[rand_f32(rng, -10, 10) for _ in range(full.n)] for _ in range(full.m)]
    a_rows[i], b_cols[j], sfa_rows[i], sfb_cols[j], cm[i][j] = a, b, sfa[:nsc], sfb[:nsc], c
    D = full(*_tensors(kind, a_rows, b_cols, cm, sfa_rows, sfb_cols))
    bits = D.view(torch.int32)
    # A second output, (i2, j2), computed by the one-output shortcut too.
    i2, j2 = (i + 1) % full.m, (j + 3) % full.n
    other = mmasim_d(kind, a_rows[i2], b_cols[j2], sfa_rows[i2] + [0] * (4 - nsc),
                     sfb_cols[j2] + [0] * (4 - nsc), cm[i2][j2])
    return bits[i, j].item() & 0xFFFFFFFF, (bits[i2, j2].item() & 0xFFFFFFFF) == other


def _full(task):
    return mmasim_full_check(*task[:6], seed=task[6])


def _work(args):
    backend, check_model, chunk = args
    out = []
    for a, b, insts in chunk:
        res = []
        for kind, fid, sfa, sfb, c in insts:
            if backend == "model":
                d, err = model_d(kind, a, b, sfa, sfb, c), None
                if d is None:
                    err = "model: C infinite is not covered"
            else:
                try:
                    d, err = mmasim_d(kind, a, b, sfa, sfb, c), None
                except Exception as e:  # MMA-Sim raising is a result to count, not a crash
                    d, err = None, f"{type(e).__name__}: {e}"
            m = model_d(kind, a, b, sfa, sfb, c) if check_model else None
            res.append((d, err, m))
        out.append(res)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mmasim", default=os.environ.get("MMASIM_DIR"),
                    help="directory holding MMA-Sim's `mmasim` package (or $MMASIM_DIR)")
    ap.add_argument("--out", required=True)
    ap.add_argument("--count", type=int, default=120_000, help="instructions, about")
    ap.add_argument("--seed", type=int, default=2026)
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--backend", choices=["mmasim", "model"], default="mmasim")
    ap.add_argument("--check-model", action="store_true",
                    help="also score this script's own reading of the semantics against MMA-Sim")
    ap.add_argument("--verify-full", type=int, default=24,
                    help="vectors re-run inside a full m128n8 instruction")
    args = ap.parse_args()

    t0 = time.time()
    groups = generate(args.count, args.seed)
    n_inst = sum(len(g[2]) for g in groups)
    print(f"generated {len(groups)} operand pairs, {n_inst} instructions "
          f"({time.time() - t0:.1f} s)", flush=True)

    if args.backend == "mmasim":
        if not args.mmasim:
            sys.exit("--mmasim DIR (or $MMASIM_DIR) is required for the mmasim backend")
        mmasim_setup(args.mmasim)
        commit = "unknown"
        head = os.path.join(args.mmasim, "COMMIT")
        if os.path.exists(head):
            commit = open(head).read().strip()
        import torch

        source = (f"microsoft/MMA-Sim {commit} (torch {torch.__version__}) "
                  "tcgen05mma_block_scale Blackwell, legal m128n8k64 instruction shrunk to m=n=1; "
                  f"scripts/gen_blackwell_mma_vectors.py --count {args.count} --seed {args.seed}")
    else:
        source = ("python model_d of scripts/gen_blackwell_mma_vectors.py, NOT MMA-Sim "
                  f"(pipeline self-test) --count {args.count} --seed {args.seed}")

    chunks = [groups[i:i + 64] for i in range(0, len(groups), 64)]
    work = [(args.backend, args.check_model, ch) for ch in chunks]
    pool = None
    if args.jobs > 1:
        import multiprocessing as mp

        pool = mp.get_context("fork").Pool(args.jobs)
        results = []
        for k, r in enumerate(pool.imap(_work, work)):
            results.append(r)
            if k % 50 == 0:
                print(f"  {k + 1}/{len(work)} chunks, {time.time() - t0:.0f} s", flush=True)
    else:
        results = [_work(w) for w in work]
    results = [r for chunk in results for r in chunk]
    print(f"simulated, {time.time() - t0:.0f} s", flush=True)

    # Summary per family; the stored records.
    names = {f[0]: f[1] for f in FAMILIES}
    stats = {fid: [0, 0, 0, 0, None] for fid in names}  # stored, raised, model agrees, checked
    operands = []
    records = []
    sample = []
    for (a, b, insts), res in zip(groups, results):
        index = None
        for (kind, fid, sfa, sfb, c), (d, err, m) in zip(insts, res):
            st = stats[fid]
            if err is not None:
                st[1] += 1
                st[4] = st[4] or err
                continue
            if index is None:
                index = len(operands)
                operands.append(pack(a) + pack(b))
            st[0] += 1
            if args.check_model:
                st[3] += 1
                st[2] += m == d
            records.append(struct.pack("<IBB4s4sII", index, kind, fid, bytes(sfa), bytes(sfb),
                                       c, d))
            sample.append((kind, a, b, sfa, sfb, c, d))

    if args.backend == "mmasim" and args.verify_full:
        step = max(1, len(sample) // args.verify_full)
        tasks = [v[:6] + (args.seed + t,) for t, v in enumerate(sample[::step][: args.verify_full])]
        full = pool.map(_full, tasks) if pool else [_full(t) for t in tasks]
        bad = sum((d_full != v[6]) + (not other_ok)
                  for (d_full, other_ok), v in zip(full, sample[::step]))
        print(f"full m128n8 check: {len(tasks)} vectors, {bad} differences "
              f"({time.time() - t0:.0f} s)", flush=True)
        if bad:
            sys.exit("the one-output shortcut differs from the full instruction")
    if pool:
        pool.close()

    header = "\n".join([
        MAGIC,
        "source " + source,
        "kinds " + " ".join(f"{k}={v[0]}" for k, v in KINDS.items()),
        "families " + " ".join(f"{f[0]}={f[1]}" for f in FAMILIES),
        f"counts operands={len(operands)} instructions={len(records)}",
        "end",
        "",
    ]).encode()
    with open(args.out, "wb") as f:
        f.write(header)
        f.write(b"".join(operands))
        f.write(b"".join(records))
    size = os.path.getsize(args.out)
    print(f"{args.out}: {len(records)} instructions, {len(operands)} operand pairs, {size} bytes, "
          f"{time.time() - t0:.0f} s")
    print(f"{'family':34} {'stored':>8} {'raised':>7}" + ("  model agrees" if args.check_model
                                                          else ""))
    for fid, (stored, raised, agree, checked, err) in stats.items():
        line = f"{names[fid]:34} {stored:8} {raised:7}"
        if args.check_model:
            line += f"  {agree}/{checked}"
        if err:
            line += f"  first error: {err[:100]}"
        print(line)


if __name__ == "__main__":
    main()
