"""A bare CUDA-event loop of one kernel, to set beside bench's median for the same kernel and shape.

    python3 bare_loop.py --submission FILE.py --shape 256x4096x7168 [--reps 50]
    python3 bare_loop.py --library LIB.so --symbol NAME --shape 256x4096x7168 [--reps 50]

No harness: the kernel is imported (or dlopened) in this process, its inputs are random bytes
(FP4 codes, scale bytes in a finite range: the time does not depend on the values) laid out as
the oracle's worker lays them out (the worker's own `build_data`, imported from
src/worker/submission_worker.py), and each timed call is timed as bench times it: an untimed
warm call on another input set, L2 flushed (a buffer of 4x the L2's size written, persisting
lines demoted), the call between two CUDA events on the current stream. Eight input sets rotate,
so a call's inputs come from DRAM as fresh ones would. Prints one JSON line: the median and the
other order statistics of the samples, in microseconds.
"""
import argparse
import ctypes
import importlib.util
import json
import os
import sys
import tempfile
import types

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
WORKER = os.path.join(HERE, "..", "..", "src", "worker", "submission_worker.py")
SETS = 8


def load_worker():
    spec = importlib.util.spec_from_file_location("submission_worker", WORKER)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def write_case(directory, m, n, k, l, generator):
    """One dual-GEMM case's files as the oracle writes them (CaseFiles), random bytes."""
    os.makedirs(directory, exist_ok=True)
    kb = k // 16

    def scale_bytes(count):
        # e4m3 bytes 0x30..0x3f: 0.5 to 0.94, finite and positive.
        return (torch.randint(0x30, 0x40, (count,), generator=generator, dtype=torch.int32)
                .to(torch.uint8).numpy().tobytes())

    for name, rows in (("a", m), ("b1", n), ("b2", n)):
        codes = torch.randint(0, 256, (l * rows * k // 2,), generator=generator, dtype=torch.int32)
        with open(os.path.join(directory, f"{name}.bin"), "wb") as f:
            f.write(codes.to(torch.uint8).numpy().tobytes())
        with open(os.path.join(directory, f"sf{name}.bin"), "wb") as f:
            f.write(scale_bytes(l * rows * kb))
        blocked = l * -(-rows // 128) * -(-kb // 4) * 512
        with open(os.path.join(directory, f"sf{name}_permuted.bin"), "wb") as f:
            f.write(scale_bytes(blocked))
    return {"problem": "dual-gemm", "m": m, "n": n, "k": k, "l": l, "groups": [],
            "dir": directory, "poison": 0x7E00, "padding_fill": 0}


class Flush:
    """L2 put into a known state before each call, as the parent does."""

    def __init__(self, device):
        l2 = torch.cuda.get_device_properties(device).L2_cache_size
        self.buffer = torch.empty(4 * l2, dtype=torch.uint8, device=device)
        self.cuda = ctypes.CDLL("libcuda.so.1")

    def __call__(self):
        self.cuda.cuCtxResetPersistingL2Cache()
        self.buffer.fill_(0x5A)


def library_kernel(path, symbol):
    """custom_kernel(data) over a C-ABI library (include/nvfp4_oracle.h)."""
    class Args(ctypes.Structure):
        _fields_ = [("abi_version", ctypes.c_uint32), ("m", ctypes.c_int32),
                    ("n", ctypes.c_int32), ("k", ctypes.c_int32), ("l", ctypes.c_int32)] + [
            (name, ctypes.c_void_p) for name in
            ("a", "b1", "b2", "sfa", "sfb1", "sfb2", "sfa_permuted", "sfb1_permuted",
             "sfb2_permuted", "c")]

    function = getattr(ctypes.CDLL(os.path.abspath(path)), symbol)
    function.restype = ctypes.c_int
    function.argtypes = [ctypes.POINTER(Args), ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t]
    error = ctypes.create_string_buffer(512)

    def kernel(data):
        a, b1, b2, sfa, sfb1, sfb2, pa, pb1, pb2, c = data
        m, n, l = c.shape
        args = Args(1, m, n, a.shape[1] * 2, l, *[t.data_ptr() for t in
                                                   (a, b1, b2, sfa, sfb1, sfb2, pa, pb1, pb2, c)])
        status = function(ctypes.byref(args), torch.cuda.current_stream().cuda_stream, error, 512)
        if status != 0:
            raise RuntimeError(f"{symbol} returned {status}: {error.value.decode()}")
        return c

    return kernel


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--submission")
    parser.add_argument("--library")
    parser.add_argument("--symbol")
    parser.add_argument("--shape", required=True)
    parser.add_argument("--reps", type=int, default=50)
    args = parser.parse_args()
    m, n, k = (int(x) for x in args.shape.split("x")[:3])
    worker = load_worker()
    device = torch.device("cuda")
    if args.library:
        kernel = library_kernel(args.library, args.symbol)
    else:
        task = types.ModuleType("task")
        task.input_t, task.output_t, task.TestSpec = tuple, torch.Tensor, dict
        sys.modules["task"] = task
        sys.path.insert(0, os.path.dirname(os.path.abspath(args.submission)))
        spec = importlib.util.spec_from_file_location("submission", args.submission)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        if callable(getattr(module, "compile_kernel", None)):
            module.compile_kernel()
        kernel = module.custom_kernel
    generator = torch.Generator().manual_seed(2026)
    with tempfile.TemporaryDirectory() as scratch:
        sets = [worker.build_data(torch, write_case(os.path.join(scratch, str(i)), m, n, k, 1,
                                                    generator), device)[0]
                for i in range(SETS)]
    flush = Flush(device)
    for data in sets:
        kernel(data)
    torch.cuda.synchronize()
    samples = []
    for i in range(args.reps):
        kernel(sets[(2 * i + 1) % SETS])  # the warm call, on another set
        torch.cuda.synchronize()
        flush()
        torch.cuda.synchronize()
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        kernel(sets[(2 * i) % SETS])
        end.record()
        end.synchronize()
        samples.append(start.elapsed_time(end) * 1000.0)
    samples.sort()
    print(json.dumps({"kernel": args.submission or args.library, "shape": args.shape,
                      "reps": args.reps, "median_us": samples[len(samples) // 2],
                      "min_us": samples[0], "p90_us": samples[int(0.9 * len(samples))]}))


if __name__ == "__main__":
    main()
