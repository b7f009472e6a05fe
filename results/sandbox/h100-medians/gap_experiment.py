"""What, between the untimed warm call and the timed call, makes the timed call slower?

    python3 results/sandbox/h100-medians/gap_experiment.py [SUBMISSION] [M,N,K,L]

One process, the worker's own code (src/worker/submission_worker.py: its input files, guarded
tensors and timing calls), the example torch submission by default at the smallest benchmark
shape. Each variant times REPS calls the way the worker does (synchronize, L2 flush, CUDA events
around the call) and differs only in what happens between the warm call and the timed call:

  back-to-back     nothing
  idle-5ms         the host sleeps 5 ms (device and host idle)
  device-busy-5ms  the device spins 5 ms (torch.cuda._sleep), the host waits for it
  host-spin-5ms    the host runs Python for 5 ms touching little memory
  host-copy        the host copies as many bytes as the case's inputs hold, twice (caches)
  map-only         the case's guarded tensors made from bytes already in host memory
                   (driver mappings, fills and copies to the device; no file read)
  load             the worker's load: the case read from its files (as committed)
  load-then-warm   the load before the warm call (the order before the sandbox)

It prints each variant's median and its ratio to back-to-back.
"""
import importlib.util
import os
import statistics
import sys
import tempfile
import time
import types

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
REPS = 40


def load_module(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def write_case(directory, m, n, k, l, rng):
    """The dual GEMM's input files (random bytes: timing only)."""
    def blocked(rows):
        return l * -(-rows // 128) * -(-(k // 16) // 4) * 512
    sizes = {}
    for name, rows in (("a", m), ("b1", n), ("b2", n)):
        sizes[name] = l * rows * k // 2
        sizes["sf" + name] = l * rows * k // 16
        sizes["sf" + name + "_permuted"] = blocked(rows)
    for key, size in sizes.items():
        data = rng.integers(0, 256, size, dtype=np.uint8)
        if key.startswith("sf"):
            data = rng.integers(0x30, 0x40, size, dtype=np.uint8)  # scales near 1
        data.tofile(os.path.join(directory, key + ".bin"))
    return {"problem": "dual-gemm", "m": m, "n": n, "k": k, "l": l, "groups": [],
            "dir": directory, "poison": 0x7E00, "padding_fill": 0}, sum(sizes.values())


def main():
    submission = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        ROOT, "examples", "submissions", "torch", "submission.py")
    m, n, k, l = (int(x) for x in (sys.argv[2] if len(sys.argv) > 2 else "256,3072,4096,1").split(","))
    worker = load_module("submission_worker", os.path.join(ROOT, "src", "worker", "submission_worker.py"))
    task = types.ModuleType("task")
    task.input_t, task.output_t, task.TestSpec = tuple, torch.Tensor, dict
    sys.modules["task"] = task
    kernel = load_module("submission", submission).custom_kernel
    device = torch.device("cuda")
    trusted = worker.TrustedCuda(torch)
    rng = np.random.default_rng(7)
    scratch = tempfile.mkdtemp()
    cases = []
    for i in range(4):
        d = os.path.join(scratch, f"case{i}")
        os.makedirs(d)
        cases.append(write_case(d, m, n, k, l, rng))
    nbytes = cases[0][1]
    warm_data = worker.build_data(torch, cases[0][0], device)[0]
    l2 = torch.cuda.get_device_properties(device).L2_cache_size
    flush = torch.empty(max(4 * l2, 1 << 20), dtype=torch.uint8, device=device)
    host_a = np.ones(nbytes, dtype=np.uint8)
    host_b = np.empty_like(host_a)
    in_memory = {key: torch.from_file(os.path.join(cases[1][0]["dir"], key + ".bin"), size=os.path.getsize(
        os.path.join(cases[1][0]["dir"], key + ".bin")), dtype=torch.uint8)
        for key in ("a", "b1", "b2", "sfa", "sfb1", "sfb2", "sfa_permuted", "sfb1_permuted", "sfb2_permuted")}
    for _ in range(5):
        kernel(warm_data)
    trusted.synchronize()

    def spin_host(seconds):
        end = time.perf_counter() + seconds
        x = 0
        while time.perf_counter() < end:
            x += 1

    read_file = worker.read_tensor

    def map_only():
        worker.read_tensor = lambda torch, path, n: in_memory[os.path.basename(path)[:-4]]
        try:
            return worker.build_data(torch, cases[1][0], device)
        finally:
            worker.read_tensor = read_file

    between = {
        "back-to-back": lambda: None,
        "idle-5ms": lambda: time.sleep(0.005),
        "device-busy-5ms": lambda: (torch.cuda._sleep(int(5e-3 * 1.98e9)), trusted.synchronize()),
        "host-spin-5ms": lambda: spin_host(0.005),
        "host-copy": lambda: (np.copyto(host_b, host_a), np.copyto(host_a, host_b)),
        "map-only": map_only,
        "load": lambda: worker.build_data(torch, cases[1 + rounds[0] % 3][0], device),
    }
    rounds = [0]
    results = {}
    order = list(between) + ["load-then-warm"]
    for sweep in range(2):
        for name in order:
            samples = []
            for _ in range(REPS):
                rounds[0] += 1
                if name == "load-then-warm":
                    data = worker.build_data(torch, cases[1 + rounds[0] % 3][0], device)[0]
                    kernel(warm_data)
                    trusted.synchronize()
                else:
                    kernel(warm_data)
                    trusted.synchronize()
                    kept = between[name]()
                    data = kept[0] if name in ("load", "map-only") else warm_data
                trusted.synchronize()
                start, end = trusted.event(), trusted.event()
                flush.zero_()
                trusted.record(start)
                kernel(data)
                trusted.record(end)
                samples.append(trusted.elapsed_us(start, end))
                trusted.synchronize()
                del data
            results.setdefault(name, []).append(statistics.median(samples))
    base = statistics.median(results["back-to-back"])
    print(f"{torch.cuda.get_device_name()}, {os.path.basename(os.path.dirname(submission))} "
          f"{m}x{n}x{k}x{l}, {REPS} calls per variant per sweep, inputs {nbytes / 1e6:.1f} MB")
    print("| between warm and timed call | median, sweep 1 (us) | sweep 2 (us) | against back-to-back |")
    print("|---|---|---|---|")
    for name in order:
        a, b = results[name]
        print(f"| {name} | {a:.1f} | {b:.1f} | {statistics.median(results[name]) / base - 1:+.1%} |")


if __name__ == "__main__":
    main()
