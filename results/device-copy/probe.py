"""How long a 512 MB device-to-device copy takes from its enqueue to its end, alone and beside
other work, by the two ways a copy can be made: the driver's copy (cudaMemcpyAsync
device-to-device, what `Pristine::of` calls) and a kernel of elementwise loads and stores.

Beside: a long kernel on another stream that fills every SM with blocks of a few ms (an fp32
matmul, as the GPU reference's tiles do), and host-to-device uploads from pinned memory on
another stream (as the shared runs' buffers made ahead are). Each copy on a stream of default
and of the highest priority. Prints one line per (situation, way, priority): the median of 5.
"""
import statistics
import time

import torch

N = 512 << 20
dev = torch.device("cuda")
src = torch.randint(0, 256, (N,), dtype=torch.uint8, device=dev)
dst = torch.empty_like(src)
src64, dst64 = src.view(torch.int64), dst.view(torch.int64)
a = torch.randn(16384, 16384, device=dev)
b = torch.randn(16384, 16384, device=dev)
torch.backends.cuda.matmul.allow_tf32 = False
pinned = torch.empty(2 << 30, dtype=torch.uint8).pin_memory()
landing = torch.empty(2 << 30, dtype=torch.uint8, device=dev)
busy = torch.cuda.Stream()
streams = {"default": torch.cuda.Stream(), "highest": torch.cuda.Stream(priority=-1)}


def driver_copy():
    dst.copy_(src)


def kernel_copy():
    torch.bitwise_or(src64, 0, out=dst64)


def sm_work():
    with torch.cuda.stream(busy):
        for _ in range(3):
            torch.mm(a, b)


def ce_work():
    with torch.cuda.stream(busy):
        landing.copy_(pinned, non_blocking=True)


def nothing():
    pass


for situation, background in [("idle", nothing), ("beside a matmul", sm_work),
                              ("beside 2 GB of uploads", ce_work)]:
    for way, copy in [("driver copy", driver_copy), ("kernel copy", kernel_copy)]:
        for priority, stream in streams.items():
            times = []
            for _ in range(5):
                torch.cuda.synchronize()
                background()
                time.sleep(0.005)  # the background work has started
                start = time.perf_counter()
                with torch.cuda.stream(stream):
                    copy()
                stream.synchronize()
                times.append(time.perf_counter() - start)
                torch.cuda.synchronize()
                assert torch.equal(src, dst)
                dst.zero_()
            print(f"{situation:24} {way:12} {priority:8} stream: "
                  f"{statistics.median(times) * 1e3:8.2f} ms (min {min(times) * 1e3:.2f})",
                  flush=True)
torch.cuda.synchronize()
start = time.perf_counter()
sm_work()
torch.cuda.synchronize()
print(f"the matmul background alone: {(time.perf_counter() - start) * 1e3:.1f} ms")
start = time.perf_counter()
ce_work()
torch.cuda.synchronize()
print(f"the upload background alone: {(time.perf_counter() - start) * 1e3:.1f} ms")
