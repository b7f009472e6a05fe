"""Standalone GPU self-test of the example submissions (no nvfp4-oracle binary needed).

For a few shapes it builds GPU MODE's dual-GEMM `data` tuple the way the competition (and
nvfp4-oracle's worker) does, runs every submission under examples/submissions/*/ (and */broken/),
and compares with a float64 torch reference: |scale| dequantization, f64 matmul, D rounded to
f32, silu(x1) * x2 in f64, one cast to fp16. It reports the largest difference in fp16 ulps where
the reference is not NaN, and NaN-pattern agreement, then times the good kernels.

    python3 examples/submissions/selftest.py [--log FILE] [--skip-big]

This is a quick sanity check; certification is `nvfp4-oracle certify --manifest .../kernel.toml`.
"""
import argparse
import importlib.util
import os
import subprocess
import sys
import time
import types

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
KERNELS = ["torch", "triton", "cuda_inline"]
FP4 = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0]
START = time.time()
LOG = None


def log(*args):
    line = " ".join(str(a) for a in args)
    print(line, flush=True)
    if LOG:
        LOG.write(line + "\n")
        LOG.flush()


def blocked(sf):
    """Plain scales (L, MN, K/16) uint8 -> the blocked 'permuted' tensor, as GPU MODE builds it."""
    l, mn, kb = sf.shape
    rest_mn, rest_k = -(-mn // 128), -(-kb // 4)
    padded = torch.zeros((l, rest_mn * 128, rest_k * 4), dtype=torch.uint8, device=sf.device)
    padded[:, :mn, :kb] = sf
    atoms = padded.view(l, rest_mn, 4, 32, rest_k, 4).permute(0, 1, 4, 3, 2, 5).contiguous()
    return atoms.view(torch.float8_e4m3fn).permute(3, 4, 1, 5, 2, 0)


def make_case(m, n, k, l, dist, seed, nans):
    g = torch.Generator().manual_seed(seed)
    def fp4(rows):
        return torch.randint(0, 256, (l, rows, k // 2), generator=g, dtype=torch.uint8)
    def scales(rows):
        raw = torch.randint(0, 256, (l, rows, k // 16), generator=g, dtype=torch.uint8)
        if dist == "tame":      # exponent field 0..6: subnormals to ~0.94, random sign bit
            exp = torch.randint(0, 7, raw.shape, generator=g, dtype=torch.uint8)
            raw = (raw & 0x87) | (exp << 3)
        raw[(raw & 0x7F) == 0x7F] = 0x7E                # no accidental NaN...
        for _ in range(nans):                            # ...only planted ones
            i = [int(torch.randint(0, d, (1,), generator=g)) for d in raw.shape]
            raw[i[0], i[1], i[2]] = 0x7F if int(torch.randint(0, 2, (1,), generator=g)) else 0xFF
        return raw
    raw = {"a": fp4(m), "b1": fp4(n), "b2": fp4(n), "sfa": scales(m), "sfb1": scales(n),
           "sfb2": scales(n)}
    raw = {key: t.cuda() for key, t in raw.items()}
    p = lambda t, dtype: t.view(dtype).permute(1, 2, 0)
    c = torch.full((l, m, n), float("nan"), dtype=torch.float16, device="cuda").permute(1, 2, 0)
    data = (p(raw["a"], torch.float4_e2m1fn_x2), p(raw["b1"], torch.float4_e2m1fn_x2),
            p(raw["b2"], torch.float4_e2m1fn_x2), p(raw["sfa"], torch.float8_e4m3fn),
            p(raw["sfb1"], torch.float8_e4m3fn), p(raw["sfb2"], torch.float8_e4m3fn),
            blocked(raw["sfa"]), blocked(raw["sfb1"]), blocked(raw["sfb2"]), c)
    return data, raw


def reference(raw):
    """The f64 reference [M, N, L] fp16, and a per-element tolerance (f64): one fp16 ulp plus
    2^-16 of what an fp32 accumulator's rounding can reach through the epilogue (the sums of
    |terms| S1, S2 carried through silu' and the product), so that cancellation is not a fault."""
    lut = torch.tensor(FP4, dtype=torch.float64, device="cuda")
    def deq(q, s):
        vals = torch.stack((lut[(q & 15).long()], lut[(q >> 4).long()]), -1).flatten(-2)
        sf = s.view(torch.float8_e4m3fn).to(torch.float64).abs().repeat_interleave(16, -1)
        return vals * sf                                  # [L, MN, K]
    a, b1, b2 = deq(raw["a"], raw["sfa"]), deq(raw["b1"], raw["sfb1"]), deq(raw["b2"], raw["sfb2"])
    x1 = (a @ b1.transpose(1, 2)).float().double()
    x2 = (a @ b2.transpose(1, 2)).float().double()
    s1 = a.abs() @ b1.abs().transpose(1, 2)
    s2 = a.abs() @ b2.abs().transpose(1, 2)
    sig = torch.sigmoid(x1)
    silu = x1 * sig
    out = (silu * x2).to(torch.float16)
    slope = (sig * (1 + x1 * (1 - sig))).abs()
    spread = 2.0 ** -16 * (slope * s1 * x2.abs() + silu.abs() * s2)
    mag = out.double().abs().clamp(min=2.0 ** -14)
    ulp = torch.exp2(torch.floor(torch.log2(mag)) - 10)
    return out.permute(1, 2, 0), (ulp + spread).permute(1, 2, 0)


def ordinal(h):
    bits = h.contiguous().view(torch.int16).to(torch.int32)
    return torch.where(bits < 0, -(bits & 0x7FFF), bits)


def compare(out, ref, tol):
    out = out.to(torch.float16)
    on, rn = torch.isnan(out), torch.isnan(ref)
    nan_bad = int((on != rn).sum())
    both = ~on & ~rn
    ulps = (ordinal(out) - ordinal(ref)).abs()[both]
    worst = int(ulps.max()) if ulps.numel() else 0
    over = int((ulps > 2).sum())
    diff = (out.double() - ref.double()).abs()
    diff = torch.where(out == ref, torch.zeros_like(diff), diff)   # inf == inf
    beyond = int((diff > tol)[both].sum())
    return worst, over, beyond, nan_bad


def load(path):
    spec = importlib.util.spec_from_file_location("sub_" + path.replace("/", "_"), path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    if callable(getattr(module, "compile_kernel", None)):
        module.compile_kernel()
    return module


def timed(fn, data, reps=10):
    for _ in range(2):
        fn(data)
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record(); fn(data); e.record(); e.synchronize()
        times.append(s.elapsed_time(e))
    return sorted(times)[len(times) // 2]


def main():
    global LOG
    parser = argparse.ArgumentParser()
    parser.add_argument("--log")
    parser.add_argument("--skip-big", action="store_true")
    args = parser.parse_args()
    if args.log:
        LOG = open(args.log, "w")
    task = types.ModuleType("task")
    task.input_t = task.output_t = object
    sys.modules["task"] = task
    log(f"torch {torch.__version__}, {torch.cuda.get_device_name()}")
    try:
        import triton
        log(f"triton {triton.__version__}")
    except ImportError:
        log("no triton")
    # Build the CUDA extensions in parallel child processes first (each takes ~1 minute).
    builders = []
    for rel in ("cuda_inline/submission.py", "cuda_inline/broken/submission.py"):
        code = ("import sys, types, importlib.util; t = types.ModuleType('task'); "
                "t.input_t = t.output_t = object; sys.modules['task'] = t; "
                f"s = importlib.util.spec_from_file_location('m', {os.path.join(HERE, rel)!r}); "
                "m = importlib.util.module_from_spec(s); s.loader.exec_module(m); m.compile_kernel()")
        builders.append((rel, subprocess.Popen([sys.executable, "-c", code])))

    subs = {}
    for name in KERNELS:
        for rel in (f"{name}/submission.py", f"{name}/broken/submission.py"):
            if not os.path.isfile(os.path.join(HERE, rel)):
                continue
            if rel.startswith("cuda_inline"):
                proc = dict(builders)[rel]
                log(f"waiting for the build of {rel}: rc {proc.wait()} at {time.time() - START:.0f} s")
            try:
                t0 = time.time()
                subs[rel] = load(os.path.join(HERE, rel))
                log(f"loaded {rel} in {time.time() - t0:.1f} s")
            except Exception as exc:
                log(f"LOAD FAILED {rel}: {type(exc).__name__}: {exc}")

    shapes = [(1, 1, 16, 1, "tame", 0), (129, 200, 272, 1, "tame", 3), (200, 130, 96, 2, "tame", 3),
              (64, 48, 1040, 3, "tame", 2), (33, 17, 64, 2, "full", 2)]
    if not args.skip_big:
        shapes.append((256, 4096, 7168, 1, "tame", 2))
    for i, (m, n, k, l, dist, nans) in enumerate(shapes):
        data, raw = make_case(m, n, k, l, dist, 100 + i, nans)
        ref, tol = reference(raw)
        log(f"\n== {m}x{n}x{k} L={l} {dist}: {int(torch.isnan(ref).sum())} NaN and "
            f"{int(torch.isinf(ref).sum())} inf expected of {ref.numel()}")
        for rel, mod in subs.items():
            c = data[-1]
            c.fill_(float("nan"))
            try:
                out = mod.custom_kernel(data)
                torch.cuda.synchronize()
            except Exception as exc:
                log(f"  {rel:36s} RAISED {type(exc).__name__}: {str(exc)[:300]}")
                continue
            worst, over, beyond, nan_bad = compare(out, ref, tol)
            good = "/broken/" not in rel
            ok = beyond == 0 and nan_bad == 0
            verdict = ("ok" if ok else "WRONG") if good else ("caught" if not ok else "not caught here")
            log(f"  {rel:36s} max {worst:6d} ulp, {over:7d} elements > 2 ulp, "
                f"{beyond:7d} beyond tolerance, NaN mismatches {nan_bad:6d} -> {verdict}")

    if not args.skip_big:
        for m, n, k in ((256, 4096, 7168), (512, 4096, 7168)):
            data, _ = make_case(m, n, k, 1, "tame", 7, 0)
            log(f"\n== timing {m}x{n}x{k} L=1 (median of 10, CUDA events)")
            for name in KERNELS:
                mod = subs.get(f"{name}/submission.py")
                if mod is not None:
                    try:
                        log(f"  {name:12s} {timed(mod.custom_kernel, data):9.3f} ms")
                    except Exception as exc:
                        log(f"  {name:12s} RAISED {type(exc).__name__}: {str(exc)[:200]}")
    log(f"\ndone in {time.time() - START:.0f} s")


if __name__ == "__main__":
    main()
