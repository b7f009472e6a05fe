"""A bare stream loop of one kernel, to set beside bench's batch figure: no harness, the kernel
imported (or dlopened) in this process, SETS input sets from the oracle's own generator laid
out by the worker's `build_data` (together over 4x the L2 at the benchmark shapes, so a call's
inputs come from DRAM), L2 flushed once, then CALLS calls back to back rotating over the sets
between two CUDA events; the time per call is the batch's over CALLS. Repeated BATCHES times;
prints one JSON line per shape: the median, min and max per call, in microseconds.

    python3 bare_stream.py --submission FILE.py --oracle BIN --shape 256x4096x7168 [--calls-ms 50]
    python3 bare_stream.py --library LIB.so --symbol NAME --oracle BIN --shape ...

Reuses results/parent-owned/bare_loop.py's helpers (the worker's build_data, the oracle's
inputs, the L2 flush, the C-ABI wrapper).
"""
import argparse
import importlib.util
import json
import os
import sys
import tempfile
import types

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
# From the repository root (the device runs it from a carried copy of this folder).
sys.path.insert(0, os.path.join(os.getcwd(), "results", "parent-owned"))
import bare_loop  # noqa: E402

SETS = 8


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--submission")
    parser.add_argument("--library")
    parser.add_argument("--symbol")
    parser.add_argument("--oracle", required=True)
    parser.add_argument("--shape", action="append", required=True)
    parser.add_argument("--batch-ms", type=float, default=50.0)
    parser.add_argument("--batches", type=int, default=5)
    args = parser.parse_args()
    worker = bare_loop.load_worker()
    device = torch.device("cuda")
    if args.library:
        kernel = bare_loop.library_kernel(args.library, args.symbol)
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
    flush = bare_loop.Flush(device, "kernel")
    for shape in args.shape:
        m, n, k = (int(x) for x in shape.split("x")[:3])
        with tempfile.TemporaryDirectory() as scratch:
            cases = [bare_loop.write_oracle_case(os.path.join(scratch, str(i)), args.oracle,
                                                 m, n, k, i + 1) for i in range(SETS)]
            sets = [worker.build_data(torch, case, device)[0] for case in cases]
        for data in sets:
            kernel(data)
        torch.cuda.synchronize()
        # One call's time, to size the batch as bench does (tens of milliseconds).
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for data in sets:
            kernel(data)
        end.record()
        end.synchronize()
        per_call = start.elapsed_time(end) * 1000.0 / SETS
        calls = max(SETS, int(args.batch_ms * 1000.0 / max(per_call, 1.0)))
        figures = []
        for _ in range(args.batches):
            flush()
            torch.cuda.synchronize()
            start.record()
            for i in range(calls):
                kernel(sets[i % SETS])
            end.record()
            end.synchronize()
            figures.append(start.elapsed_time(end) * 1000.0 / calls)
        figures.sort()
        print(json.dumps({"kernel": args.submission or args.library, "shape": shape,
                          "calls": calls, "batches": args.batches,
                          "median_us": figures[len(figures) // 2], "min_us": figures[0],
                          "max_us": figures[-1]}), flush=True)
        del sets
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
