"""A bare CUDA-event loop of one kernel, to set beside bench's median for the same kernel and shape.

    python3 bare_loop.py --submission FILE.py --shape 256x4096x7168 [--shape ...] [--reps 50]
    python3 bare_loop.py --library LIB.so --symbol NAME --shape 256x4096x7168 [--reps 50]
        [--oracle .carry/nvfp4-oracle] [--mode random --mode oracle --mode oracle-gap] [--gap-us 200]
        [--flush kernel|memset|other-process] [--touch-inputs]

No harness: the kernel is imported (or dlopened) in this process, its inputs laid out as the
oracle's worker lays them out (the worker's own `build_data`, imported from
crates/harness/src/worker/submission_worker.py), and each timed call is timed as bench times it:
an untimed warm call on another input set, L2 flushed (a buffer of 4x the L2's size written,
persisting lines demoted), the call between two CUDA events on the current stream. Eight input
sets rotate, so a call's inputs come from DRAM as fresh ones would.

Each --mode (default: random) is one loop per shape. `random`: random bytes (FP4 codes, scale
bytes 0.5 to 0.94). `oracle`: the oracle's own gpumode inputs, the distribution bench times
(`nvfp4-oracle generate` from --oracle, seeds 1 to 8): a tensor core's power, and with it its
clock, depends on the bits it multiplies. `oracle-gap`: the same, the GPU idle --gap-us between
the flush and the timed call, as during bench's request round trip. --flush memset flushes with
the driver's memset, as the oracle's parent does, instead of a fill kernel; --flush
other-process flushes with a fill kernel in a second process (its own CUDA context), as bench's
parent flushes outside the worker; --touch-inputs writes the timed call's inputs again just
before the flush, as bench's parent copies them in.
Prints one JSON line per shape and mode: the median and the other order statistics, in
microseconds.
"""
import argparse
import ctypes
import importlib.util
import json
import struct
import subprocess
import os
import sys
import tempfile
import time
import types

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
WORKER = os.path.join(HERE, "..", "..", "crates", "harness", "src", "worker", "submission_worker.py")
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


def write_oracle_case(directory, oracle, m, n, k, seed):
    """One dual-GEMM case's files from the oracle's own generator (gpumode inputs), through a
    safetensors case file: each tensor's bytes as one .bin file, as CaseFiles writes them."""
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, "case.safetensors")
    subprocess.run([oracle, "generate", "--shape", f"{m}x{n}x{k}", "--seed", str(seed),
                    "--out", path], check=True, stdout=subprocess.DEVNULL)
    with open(path, "rb") as f:
        (length,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(length))
        body = f.read()
    fill = 0
    for name, entry in header.items():
        if name == "__metadata__":
            fill = int(entry.get("padding_fill", 0) or 0)
            continue
        start, end = entry["data_offsets"]
        with open(os.path.join(directory, f"{name}.bin"), "wb") as out:
            out.write(body[start:end])
    os.remove(path)
    return {"problem": "dual-gemm", "m": m, "n": n, "k": k, "l": 1, "groups": [],
            "dir": directory, "poison": 0x7E00, "padding_fill": fill}


class Flush:
    """L2 put into a known state before each call: persisting lines demoted, then a buffer 4x
    the L2 written, by a fill kernel's stores (`kernel`, the default) or by the driver's
    cuMemsetD8Async (`memset`, what the oracle's parent does)."""

    def __init__(self, device, how):
        l2 = torch.cuda.get_device_properties(device).L2_cache_size
        self.buffer = torch.empty(4 * l2, dtype=torch.uint8, device=device)
        self.cuda = ctypes.CDLL("libcuda.so.1")
        self.how = how

    def __call__(self):
        self.cuda.cuCtxResetPersistingL2Cache()
        if self.how == "memset":
            stream = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)
            status = self.cuda.cuMemsetD8Async(ctypes.c_uint64(self.buffer.data_ptr()),
                                               ctypes.c_ubyte(0x5A),
                                               ctypes.c_size_t(self.buffer.numel()), stream)
            if status != 0:
                raise RuntimeError(f"cuMemsetD8Async failed with CUDA driver error {status}")
        else:
            self.buffer.fill_(0x5A)


def flush_server(pipe):
    """The second process of --flush other-process: flushes with a fill kernel in its own
    context each time it is asked, and answers when its flush has ended."""
    import torch as torch_here
    l2 = torch_here.cuda.get_device_properties(0).L2_cache_size
    buffer = torch_here.empty(4 * l2, dtype=torch_here.uint8, device="cuda")
    cuda = ctypes.CDLL("libcuda.so.1")
    pipe.send("ready")
    while pipe.recv() == "flush":
        cuda.cuCtxResetPersistingL2Cache()
        buffer.fill_(0x5A)
        torch_here.cuda.synchronize()
        pipe.send("done")


class OtherProcessFlush:
    """The flush done by another process, as bench's parent does it."""

    def __init__(self):
        import multiprocessing as mp
        context = mp.get_context("spawn")
        self.pipe, theirs = context.Pipe()
        self.process = context.Process(target=flush_server, args=(theirs,), daemon=True)
        self.process.start()
        self.pipe.recv()

    def __call__(self):
        self.pipe.send("flush")
        self.pipe.recv()


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


def time_shape(kernel, worker, device, flush, shape, mode, args):
    m, n, k = (int(x) for x in shape.split("x")[:3])
    generator = torch.Generator().manual_seed(2026)
    oracle = mode.startswith("oracle")
    gap_us = args.gap_us if mode == "oracle-gap" else 0.0
    with tempfile.TemporaryDirectory() as scratch:
        cases = [write_oracle_case(os.path.join(scratch, str(i)), args.oracle, m, n, k, i + 1)
                 if oracle else
                 write_case(os.path.join(scratch, str(i)), m, n, k, 1, generator)
                 for i in range(SETS)]
        sets = [worker.build_data(torch, case, device)[0] for case in cases]
    # With --touch-inputs each timed call's inputs are written again just before the flush,
    # from a pristine copy, as bench's parent copies them into the shared buffers.
    inputs = [[t for t in data[:-1] if isinstance(t, torch.Tensor) and t.is_cuda] for data in sets]
    pristine = [[t.view(torch.uint8).clone() for t in ts] for ts in inputs] if args.touch_inputs else []
    for data in sets:
        kernel(data)
    torch.cuda.synchronize()
    samples = []
    for i in range(args.reps):
        kernel(sets[(2 * i + 1) % SETS])  # the warm call, on another set
        torch.cuda.synchronize()
        if args.touch_inputs:
            for tensor, copy in zip(inputs[(2 * i) % SETS], pristine[(2 * i) % SETS]):
                tensor.view(torch.uint8).copy_(copy)
            torch.cuda.synchronize()
        flush()
        torch.cuda.synchronize()
        if gap_us:
            time.sleep(gap_us / 1e6)
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        kernel(sets[(2 * i) % SETS])
        end.record()
        end.synchronize()
        samples.append(start.elapsed_time(end) * 1000.0)
    samples.sort()
    print(json.dumps({"kernel": args.submission or args.library, "shape": shape,
                      "mode": mode, "gap_us": gap_us, "flush": args.flush,
                      "touch_inputs": args.touch_inputs,
                      "reps": args.reps, "median_us": samples[len(samples) // 2],
                      "min_us": samples[0], "p90_us": samples[int(0.9 * len(samples))]}),
          flush=True)
    del sets
    torch.cuda.empty_cache()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--submission")
    parser.add_argument("--library")
    parser.add_argument("--symbol")
    parser.add_argument("--shape", action="append", required=True)
    parser.add_argument("--reps", type=int, default=50)
    parser.add_argument("--oracle", help="the oracle's binary: its gpumode inputs, not random bytes")
    parser.add_argument("--mode", action="append", choices=("random", "oracle", "oracle-gap"))
    parser.add_argument("--gap-us", type=float, default=200.0)
    parser.add_argument("--flush", choices=("kernel", "memset", "other-process"),
                        default="kernel")
    parser.add_argument("--touch-inputs", action="store_true")
    args = parser.parse_args()
    modes = args.mode or ["random"]
    if any(mode.startswith("oracle") for mode in modes) and not args.oracle:
        parser.error("--mode oracle and oracle-gap need --oracle (the oracle's binary)")
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
    flush = OtherProcessFlush() if args.flush == "other-process" else Flush(device, args.flush)
    for shape in args.shape:
        for mode in modes:
            time_shape(kernel, worker, device, flush, shape, mode, args)


if __name__ == "__main__":
    main()
