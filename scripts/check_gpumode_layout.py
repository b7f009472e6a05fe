#!/usr/bin/env python3
"""Proves that the data tuples nvfp4-oracle's submission worker hands to `custom_kernel` have the
layouts of the competition's own: for several shapes of each NVFP4 problem, every tensor's dtype,
shape, strides and device (and the tuple's nesting) compared with what GPU MODE's
`generate_input` returns (its reference.py runs on any CUDA GPU; only the values differ, by
design).

Usage, on a CUDA machine with torch (>= 2.8):
    python3 scripts/check_gpumode_layout.py --problems-dir PATH/problems/nvidia
where PATH is a checkout of gpu-mode/reference-kernels (each problem's reference.py, task.py and
utils.py are imported from there, not copied here). Exit 0 when every tensor matches, else 1.
"""
import argparse
import importlib.util
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
WORKER = os.path.join(HERE, "..", "src", "worker", "submission_worker.py")

# Per problem: the competition's shapes plus edges the oracle draws (M, N not multiples of 128, K
# not a multiple of 64, L > 1). Group GEMM: (ms, ns, ks).
CASES = {
    "nvfp4_dual_gemm": [(256, 512, 256, 1), (1536, 512, 7168, 1), (512, 4096, 7168, 1),
                        (1, 1, 16, 1), (129, 200, 272, 1), (200, 130, 96, 2), (256, 64, 512, 3)],
    "nvfp4_gemm": [(128, 7168, 2048, 1), (256, 384, 512, 1), (1, 1, 16, 1), (129, 200, 272, 2)],
    "nvfp4_gemv": [(128, 1, 256, 1), (512, 1, 1536, 2), (1, 1, 16, 1), (200, 1, 96, 3)],
    "nvfp4_group_gemm": [((96, 128), (128, 256), (256, 512)), ((256, 72), (512, 384), (256, 256)),
                         ((40, 72, 104), (4096,) * 3, (7168,) * 3), ((1, 3), (5, 7), (16, 32))],
}
PROBLEM = {"nvfp4_dual_gemm": "dual-gemm", "nvfp4_gemm": "gemm", "nvfp4_gemv": "gemv",
           "nvfp4_group_gemm": "group-gemm"}


def load(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def write_operand(tmp, name, rows, k, l):
    kb = k // 16
    for suffix, size in (("", l * rows * k // 2), ("sf", l * rows * kb),
                         ("_permuted", l * -(-rows // 128) * -(-kb // 4) * 512)):
        file = ("sf" + name + "_permuted") if suffix == "_permuted" else (suffix + name)
        with open(os.path.join(tmp, file + ".bin"), "wb") as f:
            f.write(os.urandom(size))


def oracle_tuple(worker, torch, problem, case_shape, tmp):
    """The worker's tuple, from random bytes written the way the harness writes a case."""
    case = {"problem": problem, "dir": tmp, "poison": 0x7D5A, "padding_fill": 0, "groups": []}
    if problem == "group-gemm":
        ms, ns, ks = case_shape
        for g, (m, n, k) in enumerate(zip(ms, ns, ks)):
            write_operand(tmp, f"a{g}", m, k, 1)
            write_operand(tmp, f"b{g}", n, k, 1)
            case["groups"].append([m, n, k])
        case.update(m=ms[0], n=ns[0], k=ks[0], l=len(ms))
    else:
        m, n, k, l = case_shape
        names = {"dual-gemm": [("a", m), ("b1", n), ("b2", n)]}.get(problem, [("a", m), ("b", n)])
        for name, rows in names:
            write_operand(tmp, name, rows, k, l)
        case.update(m=m, n=n, k=k, l=l)
    return worker.build_data(torch, case, torch.device("cuda"))[0]


def flatten(prefix, value):
    """(path, tensor or value) leaves of a nested tuple/list."""
    if isinstance(value, (tuple, list)):
        out = [(f"{prefix} ({type(value).__name__} of {len(value)})", None)]
        for i, item in enumerate(value):
            out += flatten(f"{prefix}[{i}]", item)
        return out
    return [(prefix, value)]


def describe(torch, x):
    if isinstance(x, torch.Tensor):
        return (str(x.dtype), tuple(x.shape), tuple(x.stride()), x.device.type)
    return repr(x)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--problems-dir", required=True)
    args = parser.parse_args()
    import torch
    worker = load("submission_worker", WORKER)
    print(f"torch {torch.__version__}, {torch.cuda.get_device_name()}\n")
    mismatches = compared = 0
    for folder, shapes in CASES.items():
        directory = os.path.join(args.problems_dir, folder)
        for module in ("task", "utils", "reference"):
            sys.modules.pop(module, None)
        sys.path.insert(0, directory)
        load("task", os.path.join(directory, "task.py"))
        if os.path.exists(os.path.join(directory, "utils.py")):
            load("utils", os.path.join(directory, "utils.py"))
        elif os.path.exists(os.path.join(args.problems_dir, "utils.py")):
            load("utils", os.path.join(args.problems_dir, "utils.py"))
        reference = load("reference", os.path.join(directory, "reference.py"))
        sys.path.remove(directory)
        problem = PROBLEM[folder]
        print(f"## {problem}\n\n| case | element | dtype, shape, strides, device | same as generate_input |\n|---|---|---|---|")
        for shape in shapes:
            if problem == "group-gemm":
                ms, ns, ks = shape
                theirs = reference.generate_input(m=ms, n=ns, k=ks, g=len(ms), seed=1111)
                label = "groups " + ", ".join(f"{m}x{n}x{k}" for m, n, k in zip(ms, ns, ks))
            elif problem == "gemv":
                m, _, k, l = shape
                theirs = reference.generate_input(m=m, k=k, l=l, seed=1111)
                label = f"{m}x{k}x{l}"
            else:
                m, n, k, l = shape
                theirs = reference.generate_input(m=m, n=n, k=k, l=l, seed=1111)
                label = f"{m}x{n}x{k}x{l}"
            with tempfile.TemporaryDirectory() as tmp:
                ours = oracle_tuple(worker, torch, problem, shape, tmp)
                a, b = flatten("data", theirs), flatten("data", ours)
                if [p for p, _ in a] != [p for p, _ in b]:
                    print(f"| {label} | structure | {[p for p, _ in b]} | NO: generate_input has {[p for p, _ in a]} |")
                    mismatches += 1
                    continue
                for (path, t), (_, o) in zip(a, b):
                    if t is None:
                        continue
                    compared += 1
                    same = describe(torch, t) == describe(torch, o)
                    mismatches += not same
                    print(f"| {label} | {path} | {describe(torch, o)} | "
                          f"{'yes' if same else 'NO: ' + str(describe(torch, t))} |")
        print()
    print(f"{mismatches} mismatches in {compared} elements compared")
    sys.exit(1 if mismatches else 0)


if __name__ == "__main__":
    main()
