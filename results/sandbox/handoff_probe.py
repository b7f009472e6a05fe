"""Can device memory filled by one process be handed to a sandboxed worker as a file descriptor?

    python3 results/sandbox/handoff_probe.py [LAUNCHER...]

The parent (this process) creates CUDA virtual memory whose handle can be exported as a POSIX
file descriptor, fills it, and sends the descriptor over a Unix socketpair to a child, which
imports it, maps it into its own address space with an unmapped granule after it, and checks the
bytes. The child is started plainly and, when LAUNCHER is given (e.g. `.carry/nvfp4-oracle
sandbox --`), inside it. It prints what each step took: the import and mapping is all the worker
would do between the untimed warm call and the timed call.
"""
import ctypes
import os
import socket
import subprocess
import sys
import time

POSIX_FD, PINNED, ON_DEVICE, READ_WRITE = 1, 1, 1, 3


class Location(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int), ("id", ctypes.c_int)]


class AllocFlags(ctypes.Structure):
    _fields_ = [("compressionType", ctypes.c_ubyte), ("gpuDirectRDMACapable", ctypes.c_ubyte),
                ("usage", ctypes.c_ushort), ("reserved", ctypes.c_ubyte * 4)]


class Prop(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int), ("requestedHandleTypes", ctypes.c_int),
                ("location", Location), ("win32HandleMetaData", ctypes.c_void_p),
                ("allocFlags", AllocFlags)]


class Access(ctypes.Structure):
    _fields_ = [("location", Location), ("flags", ctypes.c_int)]


def driver():
    import torch
    torch.empty(1, device="cuda")  # the primary context, current on this thread
    cuda = ctypes.CDLL("libcuda.so.1")
    prop = Prop()
    prop.type, prop.requestedHandleTypes = PINNED, POSIX_FD
    prop.location.type, prop.location.id = ON_DEVICE, 0
    access = Access()
    access.location.type, access.location.id, access.flags = ON_DEVICE, 0, READ_WRITE
    g = ctypes.c_size_t()
    check("granularity", cuda.cuMemGetAllocationGranularity(ctypes.byref(g), ctypes.byref(prop), 0))
    return torch, cuda, prop, access, g.value


def check(what, status):
    if status != 0:
        raise SystemExit(f"{what} failed: CUDA driver error {status}")


def map_fenced(cuda, access, handle, size, g):
    va = ctypes.c_uint64()
    check("reserve", cuda.cuMemAddressReserve(ctypes.byref(va), ctypes.c_size_t(size + 2 * g),
                                              ctypes.c_size_t(0), ctypes.c_uint64(0), ctypes.c_uint64(0)))
    base = va.value + g
    check("map", cuda.cuMemMap(ctypes.c_uint64(base), ctypes.c_size_t(size), ctypes.c_size_t(0),
                               handle, ctypes.c_uint64(0)))
    check("access", cuda.cuMemSetAccess(ctypes.c_uint64(base), ctypes.c_size_t(size),
                                        ctypes.byref(access), ctypes.c_size_t(1)))
    return base


class View:
    def __init__(self, base, n):
        self.__cuda_array_interface__ = {"shape": (n,), "typestr": "|u1", "data": (base, False),
                                         "version": 2, "strides": None}


def child(fd_number, count, size):
    torch, cuda, prop, access, g = driver()
    sock = socket.socket(fileno=fd_number)
    for i in range(count):
        _, fds, _, _ = socket.recv_fds(sock, 16, 1)
        started = time.perf_counter()
        handle = ctypes.c_uint64()
        check("import", cuda.cuMemImportFromShareableHandle(
            ctypes.byref(handle), ctypes.c_void_p(fds[0]), POSIX_FD))
        os.close(fds[0])
        base = map_fenced(cuda, access, handle, size, g)
        tensor = torch.as_tensor(View(base, size), device="cuda")
        took = (time.perf_counter() - started) * 1e6
        expected = (i * 7 + 3) % 256
        ok = bool((tensor == expected).all())
        print(f"child {os.getpid()} uid {os.getuid()}: buffer {i}: import+map+wrap {took:.1f} us, "
              f"bytes {'as filled' if ok else 'WRONG'}", flush=True)
        sock.send(b"k")


def parent(launcher):
    torch, cuda, prop, access, g = driver()
    size = 16 << 20
    count = 5
    for how, prefix in (("plain", []), ("launcher", launcher)):
        if how == "launcher" and not launcher:
            continue
        ours, theirs = socket.socketpair()
        proc = subprocess.Popen(prefix + [sys.executable, os.path.abspath(__file__), "--child",
                                          str(theirs.fileno()), str(count), str(size)],
                                pass_fds=(theirs.fileno(),))
        theirs.close()
        for i in range(count):
            started = time.perf_counter()
            handle = ctypes.c_uint64()
            check("create", cuda.cuMemCreate(ctypes.byref(handle), ctypes.c_size_t(size),
                                             ctypes.byref(prop), ctypes.c_uint64(0)))
            base = map_fenced(cuda, access, handle, size, g)
            torch.as_tensor(View(base, size), device="cuda").fill_((i * 7 + 3) % 256)
            torch.cuda.synchronize()
            fd = ctypes.c_int(-1)
            check("export", cuda.cuMemExportToShareableHandle(ctypes.byref(fd), handle, POSIX_FD,
                                                              ctypes.c_uint64(0)))
            made = (time.perf_counter() - started) * 1e6
            socket.send_fds(ours, [b"x"], [fd.value])
            os.close(fd.value)
            reply = ours.recv(1)
            print(f"parent ({how}): buffer {i}: create+fill+export {made:.1f} us, child "
                  f"{'answered' if reply == b'k' else 'did not answer'}", flush=True)
            cuda.cuMemUnmap(ctypes.c_uint64(base), ctypes.c_size_t(size))
            cuda.cuMemRelease(handle)
        print(f"{how}: child exited {proc.wait()}", flush=True)


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child(int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]))
    else:
        parent(sys.argv[1:])
