"""The same 512 MB device-to-device copy as probe.py, made as the harness makes a shared run's
output copy (`Pristine::of`): from memory of the driver's virtual memory API made exportable
(the output the worker wrote) into memory freshly created and mapped for the copy
(cuMemCreate, cuMemMap), with cuMemcpyDtoDAsync, beside a matmul on another stream. Prints the
host time of the allocation and the time from the copy's enqueue to its stream's end, median
of 5, for a destination made fresh each time or made once, on a stream of default or highest
priority.
"""
import ctypes
import statistics
import time

import torch

N = 512 << 20
cu = ctypes.CDLL("libcuda.so.1")
u64 = ctypes.c_uint64


def check(name, rc):
    if rc != 0:
        raise RuntimeError(f"{name}: CUresult {rc}")


def prop(exportable):
    raw = (ctypes.c_int * 8)()
    raw[0] = 1  # CU_MEM_ALLOCATION_TYPE_PINNED
    raw[1] = 1 if exportable else 0  # CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR
    raw[2] = 1  # CU_MEM_LOCATION_TYPE_DEVICE
    raw[3] = torch.cuda.current_device()
    return raw


def vmm(size, exportable):
    p = prop(exportable)
    gran = ctypes.c_size_t()
    check("granularity", cu.cuMemGetAllocationGranularity(ctypes.byref(gran), p, 0))
    size = -(-size // gran.value) * gran.value
    handle = u64()
    check("cuMemCreate", cu.cuMemCreate(ctypes.byref(handle), ctypes.c_size_t(size), p, u64(0)))
    ptr = u64()
    check("reserve", cu.cuMemAddressReserve(ctypes.byref(ptr), ctypes.c_size_t(size),
                                            ctypes.c_size_t(0), u64(0), u64(0)))
    check("cuMemMap", cu.cuMemMap(ptr, ctypes.c_size_t(size), ctypes.c_size_t(0), handle, u64(0)))
    desc = (ctypes.c_int * 3)(1, torch.cuda.current_device(), 3)
    check("cuMemSetAccess", cu.cuMemSetAccess(ptr, ctypes.c_size_t(size), desc, ctypes.c_size_t(1)))
    return ptr.value, size, handle.value


def free(buffer):
    ptr, size, handle = buffer
    check("unmap", cu.cuMemUnmap(u64(ptr), ctypes.c_size_t(size)))
    check("release", cu.cuMemRelease(u64(handle)))
    check("free", cu.cuMemAddressFree(u64(ptr), ctypes.c_size_t(size)))


dev = torch.device("cuda")
torch.zeros(1, device=dev)
src = vmm(N, True)
seed = torch.randint(0, 256, (N,), dtype=torch.uint8, device=dev)
check("fill", cu.cuMemcpyDtoD_v2(u64(src[0]), u64(seed.data_ptr()), ctypes.c_size_t(N)))
torch.cuda.synchronize()
a = torch.randn(16384, 16384, device=dev)
b = torch.randn(16384, 16384, device=dev)
torch.backends.cuda.matmul.allow_tf32 = False
busy = torch.cuda.Stream()
streams = {"default": torch.cuda.Stream(), "highest": torch.cuda.Stream(priority=-1)}
once = vmm(N, False)

for beside in ["idle", "beside a matmul"]:
    for destination in ["fresh", "made once"]:
        for priority, stream in streams.items():
            allocs, waits = [], []
            for _ in range(5):
                torch.cuda.synchronize()
                if beside != "idle":
                    with torch.cuda.stream(busy):
                        for _ in range(3):
                            torch.mm(a, b)
                time.sleep(0.005)
                start = time.perf_counter()
                dst = vmm(N, False) if destination == "fresh" else once
                enqueued = time.perf_counter()
                check("copy", cu.cuMemcpyDtoDAsync_v2(u64(dst[0]), u64(src[0]), ctypes.c_size_t(N),
                                                      ctypes.c_void_p(stream.cuda_stream)))
                stream.synchronize()
                allocs.append(enqueued - start)
                waits.append(time.perf_counter() - enqueued)
                torch.cuda.synchronize()
                back = torch.empty(N, dtype=torch.uint8, device=dev)
                check("back", cu.cuMemcpyDtoD_v2(u64(back.data_ptr()), u64(dst[0]), ctypes.c_size_t(N)))
                assert torch.equal(back, seed)
                del back
                if destination == "fresh":
                    free(dst)
            print(f"{beside:16} {destination:9} {priority:8} stream: allocation "
                  f"{statistics.median(allocs) * 1e3:7.2f} ms, copy {statistics.median(waits) * 1e3:8.2f} ms",
                  flush=True)
