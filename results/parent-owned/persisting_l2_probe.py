"""Does a worker's persisting-L2 state survive the parent's reset? Two processes, two contexts.

    python3 persisting_l2_probe.py [--trials 20]

The worker process W marks a table persisting (the largest carveout the GPU allows, set with
cuCtxSetLimit, and an access-policy window over the table on one of its streams with hit ratio
1), reads it there, and then, after the parent process P has done one of the steps below in its
own context, times one read of the table on another stream (CUDA events). A fast read means the
table was still in L2. P's steps:

- nothing: the table stays in L2 (the fast reference);
- flush: P writes a buffer 4x the L2's size (what an ordinary flush does);
- reset+flush: P calls cuCtxResetPersistingL2Cache, then writes the buffer: what the oracle's
  parent does before every timed call (crates/harness/src/gpu/l2.rs makes the same reset call;
  its flush is cuMemsetD8Async where this probe's is torch's fill_ kernel);
- W's own flush, in its own context, without a reset (what a harness flushing in the worker
  does);
- and, as the slow reference, W resets and flushes in its own context (cold).

Prints one line per step: the median read time over the trials, in microseconds, and whether
it is nearer the fast or the slow reference.
"""
import argparse
import ctypes
import json
import multiprocessing as mp

CU_LIMIT_PERSISTING_L2_CACHE_SIZE = 0x06
CU_STREAM_ATTRIBUTE_ACCESS_POLICY_WINDOW = 1
CU_ACCESS_PROPERTY_NORMAL, CU_ACCESS_PROPERTY_PERSISTING = 0, 2
CU_DEVICE_ATTRIBUTE_MAX_PERSISTING_L2_CACHE_SIZE = 108
CU_DEVICE_ATTRIBUTE_MAX_ACCESS_POLICY_WINDOW_SIZE = 109


class Window(ctypes.Structure):
    _fields_ = [("base_ptr", ctypes.c_void_p), ("num_bytes", ctypes.c_size_t),
                ("hitRatio", ctypes.c_float), ("hitProp", ctypes.c_int), ("missProp", ctypes.c_int)]


class AttrValue(ctypes.Union):
    # CUstreamAttrValue (CUlaunchAttributeValue): 64 bytes, the window at its start.
    _fields_ = [("window", Window), ("pad", ctypes.c_char * 64)]


def check(what, status):
    if status != 0:
        raise RuntimeError(f"{what} failed: CUresult {status}")


def flush(torch, cuda, buffer, reset):
    if reset:
        check("cuCtxResetPersistingL2Cache", cuda.cuCtxResetPersistingL2Cache())
    buffer.fill_(0x5A)
    torch.cuda.synchronize()


def parent(pipe):
    import torch
    cuda = ctypes.CDLL("libcuda.so.1")
    torch.zeros(1, device="cuda")  # the context, made now
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    buffer = torch.empty(4 * l2, dtype=torch.uint8, device="cuda")
    while True:
        step = pipe.recv()
        if step == "stop":
            return
        if step in ("flush", "reset+flush"):
            flush(torch, cuda, buffer, step == "reset+flush")
        pipe.send("done")


def worker(pipe, trials):
    try:
        measure(pipe, trials)
    finally:
        pipe.send("stop")


def measure(pipe, trials):
    import torch
    cuda = ctypes.CDLL("libcuda.so.1")
    torch.zeros(1, device="cuda")  # the context, made now
    device = ctypes.c_int()
    check("cuCtxGetDevice", cuda.cuCtxGetDevice(ctypes.byref(device)))
    most, window_most = ctypes.c_int(), ctypes.c_int()
    check("cuDeviceGetAttribute", cuda.cuDeviceGetAttribute(
        ctypes.byref(most), CU_DEVICE_ATTRIBUTE_MAX_PERSISTING_L2_CACHE_SIZE, device))
    check("cuDeviceGetAttribute", cuda.cuDeviceGetAttribute(
        ctypes.byref(window_most), CU_DEVICE_ATTRIBUTE_MAX_ACCESS_POLICY_WINDOW_SIZE, device))
    check("cuCtxSetLimit", cuda.cuCtxSetLimit(CU_LIMIT_PERSISTING_L2_CACHE_SIZE,
                                                 ctypes.c_size_t(most.value)))
    size = min(most.value, window_most.value) // 4 * 3 // 4 * 4
    table = torch.ones(size // 4, dtype=torch.float32, device="cuda")
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    own = torch.empty(4 * l2, dtype=torch.uint8, device="cuda")
    marked = torch.cuda.Stream()
    value = AttrValue()
    value.window = Window(table.data_ptr(), size, 1.0, CU_ACCESS_PROPERTY_PERSISTING,
                          CU_ACCESS_PROPERTY_NORMAL)
    check("cuStreamSetAttribute", cuda.cuStreamSetAttribute(
        ctypes.c_void_p(marked.cuda_stream), CU_STREAM_ATTRIBUTE_ACCESS_POLICY_WINDOW,
        ctypes.byref(value)))
    reader = torch.cuda.Stream()
    results = {}
    for step in ("nothing", "flush", "reset+flush", "own flush", "own reset+flush (cold)"):
        times = []
        for _ in range(trials):
            with torch.cuda.stream(marked):
                for _ in range(3):
                    table.sum()
            torch.cuda.synchronize()
            if step.startswith("own"):
                flush(torch, cuda, own, "reset" in step)
            else:
                pipe.send(step)
                pipe.recv()
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            with torch.cuda.stream(reader):
                start.record()
                table.sum()
                end.record()
            end.synchronize()
            times.append(start.elapsed_time(end) * 1000.0)
        times.sort()
        results[step] = times[len(times) // 2]
    hot, cold = results["nothing"], results["own reset+flush (cold)"]
    print(json.dumps({"gpu": torch.cuda.get_device_name(), "table_bytes": size,
                      "max_persisting_l2_bytes": most.value, "trials": trials}))
    for step, us in results.items():
        nearer = "in L2 (survived)" if abs(us - hot) < abs(us - cold) else "evicted"
        print(f"{step:28s} median read {us:8.2f} us  -> {nearer}")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--trials", type=int, default=20)
    args = parser.parse_args()
    mp.set_start_method("spawn")
    ours, theirs = mp.Pipe()
    p = mp.Process(target=parent, args=(theirs,), daemon=True)
    p.start()
    worker(ours, args.trials)
    p.join(timeout=30)


if __name__ == "__main__":
    main()
