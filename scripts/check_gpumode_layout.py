#!/usr/bin/env python3
"""Proves that the data tuple nvfp4-oracle's submission worker hands to `custom_kernel` has the
layout of the competition's own: for several shapes, every tensor's dtype, shape, strides and
device compared with what GPU MODE's `generate_input` returns (its reference.py runs on any CUDA
GPU; only the values differ, by design).

Usage, on a CUDA machine with torch (>= 2.8):
    python3 scripts/check_gpumode_layout.py --problem-dir PATH/problems/nvidia/nvfp4_dual_gemm
where PATH is a checkout of gpu-mode/reference-kernels (its reference.py, task.py, utils.py are
imported from there, not copied here). Exit 0 when every tensor matches, 1 otherwise.
"""
import argparse
import importlib.util
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
WORKER = os.path.join(HERE, "..", "src", "kernels", "submission_worker.py")

# Competition shapes (tests and benchmarks) plus the edges the oracle draws: M, N not multiples
# of 128, K not a multiple of 64 (a partial scale atom), L > 1.
SHAPES = [(256, 512, 256, 1), (1536, 512, 7168, 1), (512, 4096, 7168, 1), (1, 1, 16, 1),
          (129, 200, 272, 1), (200, 130, 96, 2), (256, 64, 512, 3)]


def load(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def oracle_tuple(worker, torch, shape, tmp):
    """The worker's tuple, from random bytes written the way the harness writes a case."""
    m, n, k, l = shape
    kb = k // 16
    rest_k = -(-kb // 4)
    sizes = {}
    for name, rows in (("a", m), ("b1", n), ("b2", n)):
        sizes[name] = l * rows * k // 2
        sizes["sf" + name] = l * rows * kb
        sizes["sf" + name + "_permuted"] = l * -(-rows // 128) * rest_k * 512
    for name, size in sizes.items():
        with open(os.path.join(tmp, name + ".bin"), "wb") as f:
            f.write(os.urandom(size))
    case = {"m": m, "n": n, "k": k, "l": l, "dir": tmp, "poison": 0x7D5A}
    case["problem"] = "dual-gemm"
    case["padding_fill"] = 0
    data, _guarded, _ = worker.build_data(torch, case, torch.device("cuda"))
    return data


def describe(t):
    return (str(t.dtype), tuple(t.shape), tuple(t.stride()), t.device.type)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--problem-dir", required=True)
    args = parser.parse_args()
    import torch
    sys.path.insert(0, args.problem_dir)
    load("task", os.path.join(args.problem_dir, "task.py"))
    load("utils", os.path.join(args.problem_dir, "utils.py"))
    reference = load("reference", os.path.join(args.problem_dir, "reference.py"))
    worker = load("submission_worker", WORKER)
    names = ["a", "b1", "b2", "sfa", "sfb1", "sfb2", "sfa_permuted", "sfb1_permuted",
             "sfb2_permuted", "c"]
    mismatches = 0
    print(f"torch {torch.__version__}, {torch.cuda.get_device_name()}")
    print("| shape | tensor | dtype | shape | strides | device | same as generate_input |")
    print("|---|---|---|---|---|---|---|")
    for shape in SHAPES:
        m, n, k, l = shape
        theirs = reference.generate_input(m=m, n=n, k=k, l=l, seed=1111)
        with tempfile.TemporaryDirectory() as tmp:
            ours = oracle_tuple(worker, torch, shape, tmp)
            if len(theirs) != len(ours):
                print(f"tuple length differs: generate_input {len(theirs)}, worker {len(ours)}")
                mismatches += 1
                continue
            for name, t, o in zip(names, theirs, ours):
                same = describe(t) == describe(o)
                mismatches += not same
                dtype, shp, strides, device = describe(o)
                print(f"| {m}x{n}x{k}x{l} | {name} | {dtype} | {shp} | {strides} | {device} | "
                      f"{'yes' if same else 'NO: generate_input has ' + str(describe(t))} |")
    print(f"\n{mismatches} mismatching tensors over {len(SHAPES)} shapes")
    sys.exit(1 if mismatches else 0)


if __name__ == "__main__":
    main()
