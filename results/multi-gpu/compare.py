#!/usr/bin/env python3
"""Checks that each kernel's certificate merged from the per-GPU shards equals its one-GPU
certificate in every field but those a run on other GPUs at another time changes, and prints the
wall-time table from multi-gpu.log. Standard library only; run from this folder:
    python3 compare.py
Exit 1 when a field differs."""
import json
import re
import sys

# What a run on several GPUs is expected to change: when and how long it ran, on which devices,
# as how many shards, and the signature over all of it.
DIFFERENT_BY_DESIGN = {"created", "elapsed_seconds", "devices", "gpu", "merged_shards", "shard",
                       "signature", "machine"}
# At any depth: seconds spent (the sanitizer's and determinism check's, by shape class, by phase).
TIMING = {"seconds", "seconds_by_shape_class", "seconds_by_phase"}


def load(name):
    with open(f"certs/{name}") as file:
        return json.load(file)


def without_timing(value):
    if isinstance(value, dict):
        return {k: without_timing(v) for k, v in value.items() if k not in TIMING}
    if isinstance(value, list):
        return [without_timing(v) for v in value]
    return value


def compared(certificate):
    return without_timing({k: v for k, v in certificate.items() if k not in DIFFERENT_BY_DESIGN})


def main():
    log = open("multi-gpu.log").read()
    seconds = dict(re.findall(r"=== (\S+)\n(?:.*\n)*?exit \d+ \((\d+) s\)", log))
    differs = False
    print("| kernel | cases | verdict | 1 GPU (s) | 2 GPUs, 2 shards merged (s) | speed-up | merged = one-GPU |")
    print("|---|---|---|---|---|---|---|")
    for kernel in ["hopper-warp-specialized", "example-torch"]:
        one = load(f"{kernel}_one_{kernel}.json")
        merged = load(f"{kernel}_all_{kernel}.json")
        a, b = compared(one), compared(merged)
        fields = sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))
        for field in fields:
            print(f"{kernel}: {field} differs:\n  one GPU: {json.dumps(a.get(field))[:400]}\n"
                  f"  merged:  {json.dumps(b.get(field))[:400]}", file=sys.stderr)
        differs |= bool(fields)
        assert merged["merged_shards"] == 2 and len(merged["devices"]) == 2, merged["devices"]
        t1, t2 = int(seconds[f"{kernel}-one-gpu"]), int(seconds[f"{kernel}-gpus-all"])
        print(f"| {kernel} | {one['coverage']['cases']} | {one['status']} | {t1} | {t2} | "
              f"{t1 / t2:.2f}x | {'yes' if not fields else 'NO: ' + ', '.join(fields)} |")
    return 1 if differs else 0


if __name__ == "__main__":
    sys.exit(main())
