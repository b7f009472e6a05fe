#!/usr/bin/env python3
"""Vectors for the Blackwell `tcgen05.mma kind::mxf8f6f4` adder model (FP8 operands, one UE8M0
scale per 32, K = 32), produced by microsoft/MMA-Sim. crates/model/tests/model/blackwell_mmasim_vectors.rs checks
`model::mma::mxf8f6f4` against every vector, bit for bit.

    python3 scripts/gen_blackwell_mxf8f6f4_vectors.py --mmasim DIR --out FILE --count N \
        --seed S [--jobs J] [--verify-full I]

DIR is a copy of MMA-Sim's Python sources (the directory holding its `mmasim` package; a
`COMMIT` file there is recorded). Needs torch and safetensors.

How MMA-Sim is called. Its instruction `tcgen05mma_block_scale("Blackwell",
"m128n8k32.block32.f32.<a>.<b>.ue8m0")` computes each output D[i, j] by one call of
`mmasim.simulator.arithmetic.nv_fused_dot_add(A[i, :], B[:, j], C[i, j], 25, "f32",
scale_A[i, 0], scale_B[0, j])`. This script makes that same call once per vector. `--verify-full
I` (default 8) checks the shortcut: I full m128n8 instructions (random data of every family) are
run through the instruction class, and every one of their 1,024 outputs must equal the call.

Output: a safetensors file, one row per vector:
  a [N, 32] U8, b [N, 32] U8   the operands' FP8 codes (A's row, B's column)
  types [N, 2] U8              A's and B's type: 0 e4m3, 1 e5m2
  scales [N, 2] U8             A's and B's UE8M0 scale bytes
  c [N] I32, d [N] I32         C's f32 bits and MMA-Sim's D bits
  family [N] U8                the family that drew it (names in the metadata)
"""
import argparse
import multiprocessing
import os
import random
import struct
import sys
import time

TYPES = ["e4m3", "e5m2"]
# (name, weight): vectors per family = weight / total * --count.
FAMILIES = [("random", 10), ("wide_scales", 8), ("realistic", 6), ("zeros", 5), ("cancel", 6),
            ("c_dominant", 5), ("c_tiny", 4), ("subnormals", 5), ("specials", 4),
            ("every_scale_byte", 3)]
NAN_CODES = {"e4m3": {0x7F, 0xFF}, "e5m2": {0x7D, 0x7E, 0x7F, 0xFD, 0xFE, 0xFF}}
INF_CODES = {"e4m3": set(), "e5m2": {0x7C, 0xFC}}


def f32_bits(x):
    return struct.unpack("<I", struct.pack("<f", x))[0]


def finite_code(rng, t):
    while True:
        code = rng.randrange(256)
        if code not in NAN_CODES[t] and code not in INF_CODES[t]:
            return code


def small_code(rng, t):
    """A code of magnitude about 2^-3 .. 2^3 (quantized normal data)."""
    exponent = rng.randint(-3, 3) + (7 if t == "e4m3" else 15)
    mantissa_bits = 3 if t == "e4m3" else 2
    return (rng.randrange(2) << 7) | (exponent << mantissa_bits) | rng.randrange(1 << mantissa_bits)


def random_c(rng, low, high):
    if rng.random() < 0.1:
        return 0.0
    x = rng.uniform(1, 2) * 2.0 ** rng.randint(low, high) * rng.choice([-1, 1])
    return struct.unpack("<f", struct.pack("<f", x))[0]


def draw(rng, family):
    """One vector: (a_type, b_type, a codes, b codes, sa, sb, c)."""
    ta, tb = rng.choice(TYPES), rng.choice(TYPES)
    a = [finite_code(rng, ta) for _ in range(32)]
    b = [finite_code(rng, tb) for _ in range(32)]
    sa, sb = rng.randint(119, 135), rng.randint(119, 135)
    c = random_c(rng, -20, 20)
    if family == "wide_scales":
        sa, sb = rng.randint(0, 254), rng.randint(0, 254)
        c = random_c(rng, -149, 127)
    elif family == "realistic":
        a = [small_code(rng, ta) for _ in range(32)]
        b = [small_code(rng, tb) for _ in range(32)]
        sa, sb = rng.randint(122, 132), rng.randint(122, 132)
        c = random_c(rng, -4, 8)
    elif family == "zeros":
        a = [x if rng.random() < 0.3 else rng.choice([0x00, 0x80]) for x in a]
        b = [x if rng.random() < 0.3 else rng.choice([0x00, 0x80]) for x in b]
        sa, sb = rng.randint(100, 254), rng.randint(0, 254)
    elif family == "cancel":
        # B's products cancel in pairs, up to the elements' own rounding: the sum is tiny next to
        # its terms, and C decides what survives the cut.
        a = [small_code(rng, ta) for _ in range(32)]
        b = [small_code(rng, tb) for _ in range(16)]
        b = [x for pair in zip(b, [y ^ 0x80 for y in b]) for x in pair]
        a = [x for pair in zip(a[0::2], a[0::2]) for x in pair]
        c = random_c(rng, -40, 4)
    elif family == "c_dominant":
        c = random_c(rng, 10, 60) if rng.random() < 0.8 else random_c(rng, 100, 127)
    elif family == "c_tiny":
        c = random_c(rng, -149, -100)
        sa, sb = rng.randint(0, 40), rng.randint(0, 40)
    elif family == "subnormals":
        mantissa_bits = {"e4m3": 3, "e5m2": 2}
        a = [(rng.randrange(2) << 7) | rng.randrange(1 << mantissa_bits[ta]) if rng.random() < 0.7
             else x for x in a]
        b = [(rng.randrange(2) << 7) | rng.randrange(1 << mantissa_bits[tb]) if rng.random() < 0.7
             else x for x in b]
        sa, sb = rng.randint(0, 254), rng.randint(0, 254)
    elif family == "specials":
        pick = rng.randrange(6)
        if pick == 0:
            a[rng.randrange(32)] = rng.choice(sorted(NAN_CODES[ta]))
        elif pick == 1:
            sa = 0xFF
        elif pick == 2:
            tb = "e5m2"
            b = [finite_code(rng, tb) for _ in range(32)]
            for _ in range(rng.randint(1, 2)):
                b[rng.randrange(32)] = rng.choice([0x7C, 0xFC])
            if rng.random() < 0.5:
                a[rng.randrange(32)] = 0x00
        elif pick == 3:
            c = rng.choice([float("inf"), float("-inf")])
        elif pick == 4:
            c = float("nan")
        else:
            sb = 0xFF
    elif family == "every_scale_byte":
        sa, sb = rng.randrange(256), rng.randrange(256)
    return ta, tb, a, b, sa, sb, c


def load_mmasim(path):
    sys.path.insert(0, path)
    import torch
    from mmasim.simulator.arithmetic import nv_fused_dot_add
    from mmasim.simulator.nv_ptx import tcgen05mma_block_scale
    return torch, nv_fused_dot_add, tcgen05mma_block_scale


def tensors(torch, ta, tb, a, b, sa, sb, c):
    dtype = {"e4m3": torch.float8_e4m3fn, "e5m2": torch.float8_e5m2}
    at = torch.tensor([a], dtype=torch.uint8).view(dtype[ta])
    bt = torch.tensor([b], dtype=torch.uint8).view(dtype[tb]).reshape(32, 1)
    s = torch.tensor([[sa, sb]], dtype=torch.uint8).view(torch.float8_e8m0fnu)
    return at, bt, torch.tensor([[c]], dtype=torch.float32), s[:, 0:1], s[:, 1:2].reshape(1, 1)


def one_output(torch, call, vector):
    at, bt, ct, sat, sbt = tensors(torch, *vector)
    d = call(at[0, :], bt[:, 0], ct[0, 0], 25, "f32", sat[0, 0], sbt[0, 0])
    return d.view(torch.int32).item() & 0xFFFFFFFF


def work(job):
    mmasim, seed, plan = job
    torch, call, _ = load_mmasim(mmasim)
    rng = random.Random(seed)
    rows = []
    for family_id, count in plan:
        for _ in range(count):
            vector = draw(rng, FAMILIES[family_id][0])
            rows.append((family_id, vector, one_output(torch, call, vector)))
    return rows


def verify_full(job):
    """One full m128n8k32 instruction through MMA-Sim's class against the per-output call."""
    mmasim, seed = job
    torch, call, instruction = load_mmasim(mmasim)
    rng = random.Random(seed)
    ta, tb = rng.choice(TYPES), rng.choice(TYPES)
    dtype = {"e4m3": torch.float8_e4m3fn, "e5m2": torch.float8_e5m2}
    family = FAMILIES[rng.randrange(len(FAMILIES))][0]
    rows_a, cols_b, sa, sb, c = [], [], [], [], []
    for i in range(128):
        v = draw(rng, family)
        rows_a.append(v[2] if v[0] == ta else [finite_code(rng, ta) for _ in range(32)])
        sa.append(v[4])
        c.append([random_c(rng, -20, 20) for _ in range(8)])
    for j in range(8):
        v = draw(rng, family)
        cols_b.append(v[3] if v[1] == tb else [finite_code(rng, tb) for _ in range(32)])
        sb.append(v[5])
    A = torch.tensor(rows_a, dtype=torch.uint8).view(dtype[ta])
    B = torch.tensor(cols_b, dtype=torch.uint8).view(dtype[tb]).t().contiguous()
    C = torch.tensor(c, dtype=torch.float32)
    SA = torch.tensor([[x] for x in sa], dtype=torch.uint8).view(torch.float8_e8m0fnu)
    SB = torch.tensor([sb], dtype=torch.uint8).view(torch.float8_e8m0fnu)
    D = instruction("Blackwell", f"m128n8k32.block32.f32.{ta}.{tb}.ue8m0")(A, B, C, SA, SB)
    mismatches = 0
    for i in range(128):
        for j in range(8):
            vector = (ta, tb, rows_a[i], cols_b[j], sa[i], sb[j], c[i][j])
            full = D[i, j].view(torch.int32).item() & 0xFFFFFFFF
            mismatches += full != one_output(torch, call, vector)
    return f"{ta}.{tb} {family}", mismatches


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mmasim", default=os.environ.get("MMASIM_DIR"), required=False)
    parser.add_argument("--out", required=True)
    parser.add_argument("--count", type=int, default=40000)
    parser.add_argument("--seed", type=int, default=2026)
    parser.add_argument("--jobs", type=int, default=os.cpu_count())
    parser.add_argument("--verify-full", type=int, default=8)
    args = parser.parse_args()
    if not args.mmasim:
        parser.error("--mmasim DIR (or MMASIM_DIR) is required")
    started = time.time()
    total = sum(w for _, w in FAMILIES)
    counts = [round(args.count * w / total) for _, w in FAMILIES]
    jobs = []
    for part in range(args.jobs):
        plan = [(f, n // args.jobs + (part < n % args.jobs)) for f, n in enumerate(counts)]
        jobs.append((args.mmasim, args.seed * 1000 + part, plan))
    with multiprocessing.Pool(args.jobs) as pool:
        checks = pool.map(verify_full, [(args.mmasim, args.seed * 7919 + i)
                                        for i in range(args.verify_full)])
        parts = pool.map(work, jobs)
    for name, mismatches in checks:
        print(f"full instruction {name}: {mismatches} of 1024 outputs differ from the call")
    if any(m for _, m in checks):
        sys.exit("the per-output call does not reproduce the instruction: no file written")
    torch, _, _ = load_mmasim(args.mmasim)
    from safetensors.torch import save_file
    rows = [row for part in parts for row in part]
    u8 = lambda x: torch.tensor(x, dtype=torch.uint8)
    bits = lambda x: torch.tensor([v - (1 << 32) if v >= 1 << 31 else v for v in x],
                                  dtype=torch.int32)
    commit_file = os.path.join(args.mmasim, "COMMIT")
    commit = open(commit_file).read().strip() if os.path.exists(commit_file) else "unknown"
    save_file({
        "a": u8([v[2] for _, v, _ in rows]),
        "b": u8([v[3] for _, v, _ in rows]),
        "types": u8([[TYPES.index(v[0]), TYPES.index(v[1])] for _, v, _ in rows]),
        "scales": u8([[v[4], v[5]] for _, v, _ in rows]),
        "c": bits([f32_bits(v[6]) for _, v, _ in rows]),
        "d": bits([d for _, _, d in rows]),
        "family": u8([f for f, _, _ in rows]),
    }, args.out, metadata={
        "generator": "scripts/gen_blackwell_mxf8f6f4_vectors.py",
        "source": f"microsoft/MMA-Sim {commit}, nv_fused_dot_add per output",
        "families": ",".join(name for name, _ in FAMILIES),
        "seed": str(args.seed),
        "torch_version": torch.__version__,
    })
    print(f"{args.out}: {len(rows)} vectors, {args.jobs} processes, {time.time() - started:.0f} s")


if __name__ == "__main__":
    main()
