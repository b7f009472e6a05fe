"""Does a small transfer in the parent wait behind another thread's large pageable copy in the
same CUDA context? Thread B times a small pageable upload and a tiny kernel, each with a
synchronize of its own stream: alone, beside thread A's 256 MB pageable uploads on another
stream, and beside the same uploads from pinned memory. From the repository root on the GPU:
    python3 results/shared-inputs/pageable_contention.py"""
import threading
import time

import torch

torch.empty(1, device="cuda")
big_pageable = torch.full((256 << 20,), 7, dtype=torch.uint8)
big_pinned = big_pageable.pin_memory()
big_device = torch.empty_like(big_pageable, device="cuda")
small = torch.arange(1024, dtype=torch.int32)
x = torch.zeros(1024, device="cuda")


def copies(source, stop):
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        while not stop.is_set():
            big_device.copy_(source, non_blocking=source.is_pinned())
            stream.synchronize()


def small_steps(n=200):
    stream = torch.cuda.Stream()
    upload, launch = [], []
    with torch.cuda.stream(stream):
        for _ in range(n):
            t = time.perf_counter()
            small.to("cuda")
            stream.synchronize()
            upload.append(time.perf_counter() - t)
            t = time.perf_counter()
            x.add_(1)
            stream.synchronize()
            launch.append(time.perf_counter() - t)
    med = lambda v: sorted(v)[len(v) // 2] * 1e3
    return med(upload), med(launch), max(upload) * 1e3


for name, source in (("alone", None), ("beside pageable 256 MB uploads", big_pageable),
                     ("beside pinned 256 MB uploads", big_pinned)):
    stop = threading.Event()
    thread = None
    if source is not None:
        thread = threading.Thread(target=copies, args=(source, stop))
        thread.start()
        time.sleep(0.2)
    up, la, worst = small_steps()
    stop.set()
    if thread:
        thread.join()
    print(f"{name}: small pageable upload {up:.3f} ms (median; worst {worst:.1f} ms), "
          f"tiny kernel {la:.3f} ms")
t = time.perf_counter()
for _ in range(5):
    big_device.copy_(big_pageable)
torch.cuda.synchronize()
pageable_rate = 5 * 256 / 1024 / (time.perf_counter() - t)
t = time.perf_counter()
for _ in range(5):
    big_device.copy_(big_pinned, non_blocking=True)
torch.cuda.synchronize()
print(f"256 MB uploads alone: pageable {pageable_rate:.1f} GB/s, "
      f"pinned {5 * 256 / 1024 / (time.perf_counter() - t):.1f} GB/s")
