"""Does the parent's L2 flush evict what was just written into the worker's inputs?

    python3 flush_probe.py [--trials 30]

Bench's parent copies a timed call's inputs into the shared buffers (a device-to-device copy in
its own context), then flushes L2 in its own context, then the worker's kernel reads the inputs.
If the flush leaves some of the copied lines in L2, the timed call reads warm inputs and bench
reports less than a cold call's time. Two processes, two contexts: the parent P and the worker
W. W owns a 24 MiB table (half the H100's L2; normal lines, no persisting window). Each trial:
P's step, then W times one read of the table (CUDA events). P's steps:

- copy: P writes the table (a device-to-device copy, as `deliver` does; the table is mapped in
  both processes through CUDA IPC, torch's pickling), and nothing else: the warm reference;
- copy + memset flush: then `cuMemsetD8Async` over a buffer 4x the L2 (what `L2Reset` did);
- copy + kernel flush: then a fill kernel's ordinary stores over the same buffer (torch fill_);
- copy + memset flush + kernel flush: both;
- copy + zero flush: torch's `zero_()` over the buffer (what the worker does after loading a
  library's inputs from files; it may be a memset of zeros, and an all-zero line may be
  written without the traffic of another value);
- and, as the cold reference, W flushes with a kernel in its own context after P's copy;
- copy (+ kernel flush), then W touches one byte in every 2 MiB of its own flush buffer: W's
  address translations of its table evicted (if the GPU's TLB is that small), its L2 lines
  not (a hundred lines written). If these read as slowly as the cold reference, what P's flush
  leaves behind is W's translations, not W's lines.

Prints one line per step: the median read time over the trials, in microseconds.
"""
import argparse
import ctypes
import json
import multiprocessing as mp

TABLE_BYTES = 24 << 20


def parent(pipe):
    import torch
    cuda = ctypes.CDLL("libcuda.so.1")
    torch.zeros(1, device="cuda")
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    buffer = torch.empty(4 * l2, dtype=torch.uint8, device="cuda")
    source = torch.full((TABLE_BYTES,), 7, dtype=torch.uint8, device="cuda")
    view = pipe.recv()  # W's table, mapped here by torch's CUDA IPC pickling
    while True:
        step = pipe.recv()
        if step == "stop":
            return
        view.copy_(source)
        torch.cuda.synchronize()
        if "memset" in step:
            status = cuda.cuMemsetD8Async(ctypes.c_uint64(buffer.data_ptr()), ctypes.c_ubyte(0x5A),
                                          ctypes.c_size_t(buffer.numel()), ctypes.c_void_p(0))
            assert status == 0, status
            torch.cuda.synchronize()
        if "zero flush" in step:
            buffer.zero_()
            torch.cuda.synchronize()
        if "kernel flush" in step:
            buffer.fill_(0x5A)
            torch.cuda.synchronize()
        pipe.send("done")


def measure(pipe, trials):
    import torch
    torch.zeros(1, device="cuda")
    table = torch.zeros(TABLE_BYTES, dtype=torch.uint8, device="cuda")
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    own = torch.empty(4 * l2, dtype=torch.uint8, device="cuda")
    pipe.send(table)
    words = table.view(torch.int32)
    results = {}
    steps = ("copy", "copy + memset flush", "copy + kernel flush",
             "copy + memset flush + kernel flush", "copy + zero flush",
             "copy, then W's own kernel flush (cold)",
             "copy, then W touches pages", "copy + kernel flush, then W touches pages")
    for step in steps:
        times = []
        for _ in range(trials):
            pipe.send(step)
            pipe.recv()
            if "own" in step:
                own.fill_(0x5A)
                torch.cuda.synchronize()
            if "touches" in step:
                own[::2 << 20].fill_(1)
                torch.cuda.synchronize()
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            words.sum()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end) * 1000.0)
        times.sort()
        results[step] = times[len(times) // 2]
    print(json.dumps({"gpu": torch.cuda.get_device_name(), "table_bytes": TABLE_BYTES,
                      "l2_bytes": l2, "trials": trials}))
    for step, us in results.items():
        print(f"{step:40s} median read {us:8.2f} us")
    pipe.send("stop")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--trials", type=int, default=30)
    args = parser.parse_args()
    mp.set_start_method("spawn")
    ours, theirs = mp.Pipe()
    p = mp.Process(target=parent, args=(theirs,), daemon=True)
    p.start()
    measure(ours, args.trials)
    p.join(timeout=30)


if __name__ == "__main__":
    main()
