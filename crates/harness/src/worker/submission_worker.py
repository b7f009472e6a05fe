"""nvfp4-oracle's worker for GPU MODE submissions (embedded in the nvfp4-oracle binary).

Started by `nvfp4-oracle certify --submission FILE`, once per kernel (and again after a crash or a
hang). It imports the submission as GPU MODE's runner would (a `task` module with `input_t` and
`output_t` provided; `compile_kernel()` called once if defined), then serves one case per request
line on stdin: it builds the competition's `data` tuple from the case's raw tensor files, calls
`custom_kernel(data)`, checks what it can only check here (guard bytes around every tensor, inputs
unchanged, the output's type, shape, dtype and device), and writes the output's bits to a file.

It never sees an expected output or an interval: judging happens in the parent. Replies are JSON on
the original stdout, each line prefixed with the marker below; the submission's own prints go to
stderr (fd 1 is pointed there), which the parent keeps as a log.
"""
import argparse
import ast
import contextlib
import ctypes
import importlib.util
import io
import json
import os
import re
import sys
import tokenize
import traceback
import types

MARKER = "@@nvfp4-oracle-reply@@ "
# Canary bytes before every tensor (and in the alignment slack after it), checked after each call.
CANARY = 4096
CANARY_BYTE = 0xA5
# Where a tensor starts: cudaMalloc's promise, so a kernel may assume what it could assume of
# a torch allocation.
ALIGNMENT = 256
SCALE_BLOCK = 16
# The worker's own mappings up to this length are kept for later cases (CudaVirtualMemory.fenced),
# at most POOL_LIMIT bytes of them: a small case's ten tensors are a granule (2 MiB) each.
POOLED_MAPPING_MAX = 16 << 20
POOL_LIMIT = 512 << 20

_channel = None   # the protocol's reply channel, set up by take_over_stdio()
_requests = None
_input_socket = None  # where shared device memory arrives, set up by take_input_socket()


class Requests:
    """The parent's request lines. Blocking reads, or, once `spin` is set (a timing), reads that
    never sleep: a process woken from a blocking read pays the core's wake-up from its idle
    state, tens to hundreds of microseconds after a long wait, which the parent's clock would
    count against the call (results/parent-owned/)."""

    def __init__(self, fd):
        self.fd, self.pending, self.spin = fd, b"", False

    def __iter__(self):
        return self

    def __next__(self):
        while b"\n" not in self.pending:
            if self.spin:
                os.set_blocking(self.fd, False)
                try:
                    chunk = os.read(self.fd, 1 << 16)
                except BlockingIOError:
                    continue
            else:
                os.set_blocking(self.fd, True)
                chunk = os.read(self.fd, 1 << 16)
            if not chunk:
                if self.pending:
                    line, self.pending = self.pending, b""
                    return line.decode()
                raise StopIteration
            self.pending += chunk
        line, self.pending = self.pending.split(b"\n", 1)
        return line.decode()


def take_over_stdio():
    """The protocol channel becomes a private copy of stdout (and stdin); fd 1 is pointed at stderr
    and fd 0 at /dev/null, so the submission's prints and reads cannot reach the protocol."""
    global _channel, _requests
    _channel = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    _requests = Requests(os.dup(0))
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)


def take_input_socket():
    """The parent's input socket (crates/harness/src/worker/shared_inputs.rs), moved to a private descriptor
    before the submission is imported; None when the parent gave none."""
    global _input_socket
    fd = os.environ.get("NVFP4_ORACLE_INPUT_SOCKET")
    if fd is None:
        return
    try:
        import socket
        private = os.dup(int(fd))
        os.close(int(fd))
        _input_socket = socket.socket(fileno=private)
    except (OSError, ValueError):
        _input_socket = None


def receive_fds(count):
    """`count` file descriptors from the input socket (the parent sends them in messages of at
    most 200)."""
    import socket
    fds = []
    while len(fds) < count:
        _, received, _, _ = socket.recv_fds(_input_socket, 1, count - len(fds))
        if not received:
            raise RuntimeError("the input socket closed before the shared memory arrived")
        fds.extend(received)
    return fds


def reply(message):
    _channel.write(MARKER + json.dumps(message) + "\n")
    _channel.flush()


def start_failed(reason, unavailable=False):
    reply({"StartFailed": {"unavailable": unavailable, "reason": reason}})
    sys.exit(0)


def done(failure=None):
    reply({"Done": {"Ok": None} if failure is None else {"Err": failure}})


def exception_text(exc, submission):
    """The exception and the innermost frame inside the submission (or the last one)."""
    frames = traceback.extract_tb(exc.__traceback__)
    inside = [f for f in frames if os.path.abspath(f.filename) == submission] or frames
    where = f" at {os.path.basename(inside[-1].filename)}:{inside[-1].lineno}" if inside else ""
    return f"{type(exc).__name__}: {exc}{where}"


class CudaVirtualMemory:
    """CUDA's virtual memory management through the driver API (libcuda, which torch has
    loaded): a range of addresses is reserved, physical memory mapped into part of it, and the
    rest left unmapped, so that an access there faults like a segmentation fault on the CPU.
    None of torch's allocators can place a tensor's end at such a boundary."""

    class Location(ctypes.Structure):
        _fields_ = [("type", ctypes.c_int), ("id", ctypes.c_int)]

    class AllocFlags(ctypes.Structure):
        _fields_ = [("compressionType", ctypes.c_ubyte), ("gpuDirectRDMACapable", ctypes.c_ubyte),
                    ("usage", ctypes.c_ushort), ("reserved", ctypes.c_ubyte * 4)]

    class AllocationProp(ctypes.Structure):
        pass

    class AccessDesc(ctypes.Structure):
        pass

    AllocationProp._fields_ = [("type", ctypes.c_int), ("requestedHandleTypes", ctypes.c_int),
                               ("location", Location), ("win32HandleMetaData", ctypes.c_void_p),
                               ("allocFlags", AllocFlags)]
    AccessDesc._fields_ = [("location", Location), ("flags", ctypes.c_int)]
    PINNED, ON_DEVICE, READ_WRITE, POSIX_FILE_DESCRIPTOR = 1, 1, 3, 1

    def __init__(self, device_index):
        self.cuda = ctypes.CDLL("libcuda.so.1")
        for name in ("cuMemGetAllocationGranularity", "cuMemAddressReserve", "cuMemCreate",
                     "cuMemMap", "cuMemSetAccess", "cuMemUnmap", "cuMemRelease",
                     "cuMemAddressFree", "cuMemImportFromShareableHandle"):
            getattr(self.cuda, name).restype = ctypes.c_int
        self.prop = self.AllocationProp()
        self.prop.type = self.PINNED
        self.prop.location.type = self.ON_DEVICE
        self.prop.location.id = device_index
        self.access = self.AccessDesc()
        self.access.location.type = self.ON_DEVICE
        self.access.location.id = device_index
        self.access.flags = self.READ_WRITE
        granularity = ctypes.c_size_t()
        self.check("cuMemGetAllocationGranularity", self.cuda.cuMemGetAllocationGranularity(
            ctypes.byref(granularity), ctypes.byref(self.prop), 0))
        self.granularity = granularity.value
        # Mappings released by earlier cases, by mapped length: (base, release) each.
        self.pool = {}
        self.pooled_bytes = 0

    def check(self, what, status):
        if status != 0:
            # The driver's name for it (CUDA_ERROR_OUT_OF_MEMORY, ...): the reader's first question.
            name = ctypes.c_char_p()
            self.cuda.cuGetErrorName(status, ctypes.byref(name))
            named = f" ({name.value.decode()})" if name.value else ""
            raise RuntimeError(f"{what} failed with CUDA driver error {status}{named}")

    def fenced(self, body_len):
        """(base address, mapped length, release function) of a mapping of at least `CANARY` +
        `body_len` bytes with one unmapped granule before it and one after it. A small mapping
        is taken from the pool where one of its length is free, and goes back there when
        released: mapping and unmapping cost seven driver calls, and a small case has ten
        tensors. A pooled mapping is handed out only once nothing views it any more (its
        release runs when the last tensor on it is freed), and its bytes are rewritten (canaries,
        then the body) before each use."""
        g = self.granularity
        mapped = -(-(CANARY + body_len + ALIGNMENT) // g) * g
        free = self.pool.get(mapped)
        if free:
            base, release = free.pop()
            self.pooled_bytes -= mapped
            return base, mapped, self.returning(base, mapped, release)
        handle = ctypes.c_uint64()
        status = self.cuda.cuMemCreate(ctypes.byref(handle), ctypes.c_size_t(mapped),
                                       ctypes.byref(self.prop), ctypes.c_uint64(0))
        if status != 0 and self.pooled_bytes:
            self.drain_pool()  # the pool's memory may be what this allocation needs
            status = self.cuda.cuMemCreate(ctypes.byref(handle), ctypes.c_size_t(mapped),
                                           ctypes.byref(self.prop), ctypes.c_uint64(0))
        self.check("cuMemCreate", status)
        base, mapped, release = self.map_fenced(handle, mapped)
        if mapped > POOLED_MAPPING_MAX:
            return base, mapped, release
        return base, mapped, self.returning(base, mapped, release)

    def returning(self, base, mapped, release):
        """A release function that puts the mapping back in the pool while the pool is under
        its limit, else releases it."""
        def give_back():
            if self.pooled_bytes + mapped <= POOL_LIMIT:
                self.pool.setdefault(mapped, []).append((base, release))
                self.pooled_bytes += mapped
            else:
                release()
        return give_back

    def drain_pool(self):
        for free in self.pool.values():
            for _, release in free:
                release()
        self.pool.clear()
        self.pooled_bytes = 0

    def imported(self, fd, mapped):
        """The same for memory another process exported as file descriptor `fd` (closed here),
        `mapped` bytes long."""
        handle = ctypes.c_uint64()
        try:
            self.check("cuMemImportFromShareableHandle", self.cuda.cuMemImportFromShareableHandle(
                ctypes.byref(handle), ctypes.c_void_p(fd), self.POSIX_FILE_DESCRIPTOR))
        finally:
            os.close(fd)
        return self.map_fenced(handle, mapped)

    def map_fenced(self, handle, mapped):
        """Maps allocation `handle` (released with the mapping) between two unmapped granules."""
        g = self.granularity
        reserved = mapped + 2 * g
        va = ctypes.c_uint64()
        try:
            self.check("cuMemAddressReserve", self.cuda.cuMemAddressReserve(
                ctypes.byref(va), ctypes.c_size_t(reserved), ctypes.c_size_t(0),
                ctypes.c_uint64(0), ctypes.c_uint64(0)))
        except RuntimeError:
            self.cuda.cuMemRelease(handle)
            raise
        base = va.value + g
        release = lambda cuda=self.cuda: (
            cuda.cuMemUnmap(ctypes.c_uint64(base), ctypes.c_size_t(mapped)),
            cuda.cuMemRelease(handle),
            cuda.cuMemAddressFree(va, ctypes.c_size_t(reserved)))
        try:
            self.check("cuMemMap", self.cuda.cuMemMap(
                ctypes.c_uint64(base), ctypes.c_size_t(mapped), ctypes.c_size_t(0), handle,
                ctypes.c_uint64(0)))
            self.check("cuMemSetAccess", self.cuda.cuMemSetAccess(
                ctypes.c_uint64(base), ctypes.c_size_t(mapped), ctypes.byref(self.access),
                ctypes.c_size_t(1)))
        except RuntimeError:
            release()
            raise
        return base, mapped, release


class FencedBytes:
    """Device memory torch can wrap (CUDA array interface), freed when the last tensor viewing
    it goes: torch holds this object until then."""

    def __init__(self, base, length, release):
        self.release = release
        self.__cuda_array_interface__ = {"shape": (length,), "typestr": "|u1",
                                         "data": (base, False), "version": 2, "strides": None}

    def __del__(self):
        self.release()


_virtual_memory = {}


def virtual_memory(torch, device):
    """The device's CudaVirtualMemory, or the reason there is none (then tensors get torch
    allocations with canaries only)."""
    # The grouped GEMM's plain scales are host tensors, named by the string "cpu".
    device = torch.device(device)
    if device.type != "cuda":
        return "not a CUDA device"
    index = device.index if device.index is not None else torch.cuda.current_device()
    if index not in _virtual_memory:
        try:
            torch.empty(1, device=device)  # the primary context, current on this thread
            _virtual_memory[index] = CudaVirtualMemory(index)
        except Exception as exc:
            _virtual_memory[index] = f"{type(exc).__name__}: {exc}"
    return _virtual_memory[index]


def guard_pages(torch, device):
    """How tensors are placed on `device`, in words (the worker reports it once)."""
    memory = virtual_memory(torch, device)
    if isinstance(memory, str):
        return f"canaries only (no guard pages: {memory})"
    return (f"every tensor ends within {ALIGNMENT - 1} bytes of an unmapped page "
            f"(canaries before it and in the gap)")


class Guarded:
    """One tensor's bytes placed so that the tensor ends just before unmapped memory (a read or
    write past it faults), with canary bytes before it and in the few bytes of alignment slack
    after it. Without CUDA virtual memory (a CPU tensor, an old driver), canaries on both sides
    of an ordinary allocation."""

    def __init__(self, torch, body, device):
        self.n = body.numel()
        self.host = body
        memory = virtual_memory(torch, device)
        if isinstance(memory, str):
            self.buffer = torch.full((self.n + 2 * CANARY,), CANARY_BYTE, dtype=torch.uint8,
                                     device=device)
            self.start = CANARY
        else:
            base, mapped, release = memory.fenced(self.n)
            self.buffer = torch.as_tensor(FencedBytes(base, mapped, release), device=device)
            self.buffer.fill_(CANARY_BYTE)
            self.start = mapped - (-(-self.n // ALIGNMENT) * ALIGNMENT)
        self.buffer[self.start:self.start + self.n].copy_(body)

    def body(self):
        return self.buffer[self.start:self.start + self.n]

    def canary_regions(self):
        """The bytes around the body that must still hold CANARY_BYTE."""
        return [self.buffer[:self.start], self.buffer[self.start + self.n:]]

    def canaries_intact(self, torch):
        """Whether the canaries are intact (one read per region)."""
        return all(bool((region == CANARY_BYTE).all()) for region in self.canary_regions())


class BatchSlot:
    """Slot i of a tensor in a timed batch's shared memory (crates/harness/src/worker/protocol.rs,
    PrepareBatch): the slot's bytes inside the tensor's mapping, at the body's start plus i
    strides; the last slot ends at the unmapped granule."""

    def __init__(self, mapped, n, start):
        self.buffer, self.n, self.start, self.host = mapped.buffer, n, start, None

    def body(self):
        return self.buffer[self.start:self.start + self.n]


def slot_stride(n):
    """protocol.rs's slot_stride: a slot's length rounded up to 256 bytes."""
    return max(1, -(-n // 256)) * 256


class SharedGuarded(Guarded):
    """A tensor in device memory the parent shares (crates/harness/src/worker/shared_inputs.rs), mapped once:
    the parent lays it out as Guarded lays out its own (the body ends at unmapped memory,
    canaries before it) and copies each call's bytes in just before the call."""

    def __init__(self, torch, layout, fd, device):
        memory = virtual_memory(torch, device)
        if isinstance(memory, str):
            os.close(fd)
            raise RuntimeError(f"shared inputs need CUDA virtual memory: {memory}")
        base, mapped, release = memory.imported(fd, layout["mapped"])
        self.n, self.host, self.start = layout["len"], None, layout["start"]
        self.buffer = torch.as_tensor(FencedBytes(base, mapped, release), device=device)


def read_tensor(torch, path, n):
    if n == 0:
        return torch.empty(0, dtype=torch.uint8)
    return torch.from_file(path, shared=False, size=n, dtype=torch.uint8)


def ceil_div(a, b):
    return -(-a // b)


class Builder:
    """Makes the tensors of one case as GPU MODE's generate_input makes them: each is created in
    (L, rows, ...) storage and permuted so that L is the last logical dimension; every tensor is
    a view into its own guarded allocation."""

    def __init__(self, torch, case, device, shared=None):
        self.torch, self.case, self.device = torch, case, device
        self.shared = shared
        self.guarded = {}

    def tensor(self, key, host, storage_shape, dtype, permute, device=None):
        if self.shared is not None:
            g = self.shared[key]
        else:
            g = Guarded(self.torch, host, device or self.device)
        self.guarded[key] = g
        return g.body().view(dtype).view(storage_shape).permute(*permute)

    def operand(self, name, rows, k, l, pad_rows=None, plain_scales_device=None):
        """(data, plain scales, permuted scales) of operand `name`; with `pad_rows`, the data and
        plain scales are padded with the case's padding byte to that many rows (GEMV's b)."""
        torch = self.torch
        kb = k // SCALE_BLOCK
        stored_rows = pad_rows or rows
        rest = (l, ceil_div(stored_rows, 128), ceil_div(kb, 4), 32, 4, 4)
        if self.shared is not None:
            # In shared memory already, padded by the parent.
            data = scales = blocked = None
        else:
            data, scales, blocked = self.host_operand(name, rows, k, l, pad_rows, rest)
        return (
            self.tensor(name, data, (l, stored_rows, k // 2), torch.float4_e2m1fn_x2, (1, 2, 0)),
            self.tensor("sf" + name, scales, (l, stored_rows, kb), torch.float8_e4m3fn, (1, 2, 0),
                        device=plain_scales_device),
            self.tensor("sf" + name + "_permuted", blocked, rest, torch.float8_e4m3fn, (3, 4, 1, 5, 2, 0)),
        )

    def host_operand(self, name, rows, k, l, pad_rows, rest):
        """Operand `name`'s data, plain scales and blocked scales read from the case's files."""
        torch = self.torch
        kb = k // SCALE_BLOCK
        read = lambda f, n: read_tensor(torch, os.path.join(self.case["dir"], f + ".bin"), n)
        data = read(name, l * rows * k // 2)
        scales = read("sf" + name, l * rows * kb)
        if pad_rows:
            fill = self.case["padding_fill"]
            padded = torch.full((l, pad_rows, k // 2), fill, dtype=torch.uint8)
            padded[:, :rows] = data.view(l, rows, k // 2)
            data = padded.flatten()
            padded = torch.full((l, pad_rows, kb), fill, dtype=torch.uint8)
            padded[:, :rows] = scales.view(l, rows, kb)
            scales = padded.flatten()
        blocked = read("sf" + name + "_permuted", l * rest[1] * rest[2] * 512)
        return data, scales, blocked

    def output(self, key, m, n, l):
        """An fp16 [M, N, L] output made as (L, M, N), poisoned (by the parent, when shared)."""
        torch = self.torch
        host = None
        if self.shared is None:
            poison = torch.tensor([self.case["poison"]], dtype=torch.int32).to(torch.int16)
            host = poison.view(torch.uint8).repeat(l * m * n)
        return self.tensor(key, host, (l, m, n), torch.float16, (1, 2, 0))


def build_data(torch, case, device, shared=None):
    """The competition's data tuple for the case's problem, the guarded buffers behind it, and
    the output shapes expected (one per output tensor). With `shared` (key -> SharedGuarded),
    the tensors are views of the shared memory, nothing is read."""
    b = Builder(torch, case, device, shared)
    m, n, k, l = case["m"], case["n"], case["k"], case["l"]
    problem = case["problem"]
    if problem == "dual-gemm":
        a, sfa, pa = b.operand("a", m, k, l)
        b1, sfb1, pb1 = b.operand("b1", n, k, l)
        b2, sfb2, pb2 = b.operand("b2", n, k, l)
        c = b.output("c", m, n, l)
        return (a, b1, b2, sfa, sfb1, sfb2, pa, pb1, pb2, c), b.guarded, [(m, n, l)]
    if problem in ("gemm", "gemv"):
        a, sfa, pa = b.operand("a", m, k, l)
        # GPU MODE's GEMV pads b (and its scales) to 128 rows; c is [M, 1, L].
        bb, sfb, pb = b.operand("b", n, k, l, pad_rows=128 if problem == "gemv" else None)
        c = b.output("c", m, n, l)
        return (a, bb, sfa, sfb, pa, pb, c), b.guarded, [(m, n, l)]
    if problem == "group-gemm":
        abc, sfasfb, reordered, sizes, shapes = [], [], [], [], []
        for g, (gm, gn, gk) in enumerate(case["groups"]):
            # The grouped GEMM's plain scales stay on the CPU, as in its generate_input.
            a, sfa, pa = b.operand(f"a{g}", gm, gk, 1, plain_scales_device="cpu")
            bb, sfb, pb = b.operand(f"b{g}", gn, gk, 1, plain_scales_device="cpu")
            c = b.output(f"c{g}", gm, gn, 1)
            abc.append((a, bb, c))
            sfasfb.append((sfa, sfb))
            reordered.append((pa, pb))
            sizes.append((gm, gn, gk, 1))
            shapes.append((gm, gn, 1))
        return (abc, sfasfb, reordered, sizes), b.guarded, shapes
    raise ValueError(f"unknown problem {problem}")


def check_after(torch, guarded):
    """None, or the failure the buffers show: a canary overwritten, an input changed. Every
    canary region is compared on its device in one pass (the regions of a device joined), and
    the verdicts and every input's bytes come back in one read per device: a small case's ten
    tensors would otherwise cost fifty launches and ten reads."""
    outputs = [name for name in guarded if name.startswith("c")]
    names = list(guarded)
    inputs = [n for n in names if n not in outputs]
    by_device = {}
    for name in names:
        for region in guarded[name].canary_regions():
            by_device.setdefault(region.device, []).append(region)
    verdicts = [(torch.cat(regions) != CANARY_BYTE).any().to(torch.uint8).view(1)
                for regions in by_device.values()]
    read = read_together(torch, verdicts + [guarded[n].body() for n in inputs])
    if any(int(verdict[0]) for verdict in read[:len(verdicts)]):
        return overwritten_canary(torch, guarded, names, outputs)
    for name, body in zip(inputs, read[len(verdicts):]):
        if not torch.equal(body, guarded[name].host):
            return {"ModifiedInputs": f"input {name}: its contents changed"}
    return None


def overwritten_canary(torch, guarded, names, outputs):
    """The failure that names the first tensor whose canary was overwritten (read one tensor
    at a time: only after the joined check found one)."""
    for name in names:
        if not bool(guarded[name].canaries_intact(torch)):
            if name in outputs:
                return {"OutOfBounds": f"the canary around {name} was overwritten"}
            return {"ModifiedInputs": f"the canary around input {name} was overwritten"}
    return {"ModifiedInputs": "a canary was overwritten, then restored while it was read"}


def read_together(torch, tensors):
    """The flat tensors on the host, those on one device concatenated there and copied in one
    read (the same bytes as reading each)."""
    host = [None] * len(tensors)
    by_device = {}
    for i, t in enumerate(tensors):
        if t.is_cuda:
            by_device.setdefault(t.device, []).append(i)
        else:
            host[i] = t
    for indices in by_device.values():
        parts = [tensors[i].reshape(-1) for i in indices]
        joined = torch.cat(parts).cpu() if parts else None
        at = 0
        for i, part in zip(indices, parts):
            host[i] = joined[at:at + part.numel()]
            at += part.numel()
    return host


def tensor_bytes(torch, out):
    host = out.detach().contiguous().cpu().view(torch.int16)
    try:
        return host.numpy().tobytes()
    except Exception:  # torch without numpy
        return b"".join(int(v).to_bytes(2, "little", signed=True) for v in host.flatten().tolist())


def output_failure(torch, out, expected_shapes):
    """None, or the BadOutput failure of an output that breaks the contract (its type, count,
    dtype, device or shape)."""
    grouped = len(expected_shapes) > 1 or isinstance(out, (list, tuple))
    outs = list(out) if isinstance(out, (list, tuple)) else [out]
    if len(outs) != len(expected_shapes):
        what = f"{len(outs)} tensors" if grouped else type(out).__name__
        return {"BadOutput": f"custom_kernel returned {what}, expected {len(expected_shapes)} "
                             f"output tensor{'s' if len(expected_shapes) > 1 else ''}"}
    for i, (t, shape) in enumerate(zip(outs, expected_shapes)):
        which = f"output {i}" if len(expected_shapes) > 1 else "output"
        # The exact type, checked before anything else touches it: a subclass's methods are the
        # submission's code, which must not run in the checker (a lazy result computed there).
        if type(t) is not torch.Tensor:
            return {"BadOutput": f"{which} is a {type(t).__name__}, not a torch.Tensor"}
        if t.dtype != torch.float16:
            return {"BadOutput": f"{which} dtype is {t.dtype}, expected torch.float16"}
        if t.device.type != "cuda":
            return {"BadOutput": f"{which} is on {t.device}, expected the CUDA device"}
        if tuple(t.shape) != tuple(shape):
            return {"BadOutput": f"{which} shape is {tuple(t.shape)}, expected {tuple(shape)} (M, N, L)"}
    return None


def output_bytes(torch, out, expected_shapes, device):
    """The output's fp16 bits ([M, N, L], L fastest; a grouped GEMM's groups one after another),
    or a BadOutput failure."""
    failure = output_failure(torch, out, expected_shapes)
    if failure is not None:
        return None, failure
    outs = list(out) if isinstance(out, (list, tuple)) else [out]
    return b"".join(tensor_bytes(torch, t) for t in outs), None


def output_tensors(torch, out):
    outs = list(out) if isinstance(out, (list, tuple)) else [out]
    return [t if type(t) is torch.Tensor and t.dtype == torch.float16 else None for t in outs]


# The longest the caller's stream stays busy before the inputs arrive (GPU clock cycles, about
# 2 ms on a Hopper GPU): longer than it takes Python to launch a submission's first kernels.
DELIVERY_DELAY_CYCLES = 4_000_000

# The gate: one thread that spins on the caller's stream until a word of pinned host memory
# reaches its value (the worker writes it when the call returns) or DELIVERY_DELAY_CYCLES have
# passed, whichever comes first. PTX, compiled by the driver: the worker needs no compiler.
GATE_PTX = b"""
.version 7.0
.target sm_70
.address_size 64
.visible .entry nvfp4_oracle_gate(.param .u64 flag, .param .u32 value, .param .u64 cycles)
{
    .reg .pred %p<3>;
    .reg .b32 %r<4>;
    .reg .b64 %rd<6>;
    ld.param.u64 %rd1, [flag];
    ld.param.u32 %r1, [value];
    ld.param.u64 %rd2, [cycles];
    mov.u64 %rd3, %clock64;
$LOOP:
    ld.volatile.global.u32 %r2, [%rd1];
    sub.s32 %r3, %r2, %r1;
    setp.ge.s32 %p1, %r3, 0;
    @%p1 bra $DONE;
    mov.u64 %rd4, %clock64;
    sub.s64 %rd5, %rd4, %rd3;
    setp.lt.s64 %p2, %rd5, %rd2;
    @%p2 bra $LOOP;
$DONE:
    ret;
}
\0"""


class DeliveryGate:
    """Holds the caller's stream closed while a call runs, so that the inputs arrive behind it
    as a calling program's do, and opens it when the call returns: the fixed delay it replaces
    (torch.cuda._sleep) cost every small case its whole length, however fast the call. The
    delay stays the upper bound, so a call that waits for its own stream inside (.item(), a
    synchronize) still goes on after it, as before."""

    def __init__(self):
        cuda = ctypes.CDLL("libcuda.so.1")
        for name in ("cuMemHostAlloc", "cuMemHostGetDevicePointer_v2", "cuModuleLoadData",
                     "cuModuleGetFunction", "cuLaunchKernel"):
            getattr(cuda, name).restype = ctypes.c_int
        host, device = ctypes.c_void_p(), ctypes.c_uint64()
        module, function = ctypes.c_void_p(), ctypes.c_void_p()
        device_map = 0x02  # CU_MEMHOSTALLOC_DEVICEMAP
        for what, status in (
                ("cuMemHostAlloc", lambda: cuda.cuMemHostAlloc(ctypes.byref(host),
                                                               ctypes.c_size_t(4), device_map)),
                ("cuMemHostGetDevicePointer", lambda: cuda.cuMemHostGetDevicePointer_v2(
                    ctypes.byref(device), host, 0)),
                ("cuModuleLoadData", lambda: cuda.cuModuleLoadData(ctypes.byref(module),
                                                                   ctypes.c_char_p(GATE_PTX))),
                ("cuModuleGetFunction", lambda: cuda.cuModuleGetFunction(
                    ctypes.byref(function), module, b"nvfp4_oracle_gate"))):
            code = status()
            if code != 0:
                raise RuntimeError(f"{what} failed with CUDA driver error {code}")
        self.cuda, self.function = cuda, function
        self.word = ctypes.c_uint32.from_address(host.value)
        self.word.value = 0
        self.flag = ctypes.c_uint64(device.value)
        self.value = ctypes.c_uint32(0)
        self.cycles = ctypes.c_uint64(DELIVERY_DELAY_CYCLES)
        self.params = (ctypes.c_void_p * 3)(*[ctypes.cast(ctypes.byref(v), ctypes.c_void_p)
                                              for v in (self.flag, self.value, self.cycles)])

    def close(self, stream):
        """Enqueues the gate on `stream` (a torch stream), closed until `open`."""
        self.value.value = (self.value.value + 1) & 0xFFFFFFFF
        code = self.cuda.cuLaunchKernel(self.function, 1, 1, 1, 1, 1, 1, 0,
                                        ctypes.c_void_p(stream.cuda_stream), self.params, None)
        if code != 0:
            raise RuntimeError(f"cuLaunchKernel (the delivery gate) failed with CUDA driver "
                               f"error {code}")

    def open(self):
        self.word.value = self.value.value


_gate = []


def delivery_gate():
    """The process's DeliveryGate, or None where one cannot be made (then the fixed delay)."""
    if not _gate:
        try:
            _gate.append(DeliveryGate())
        except Exception:
            _gate.append(None)
    return _gate[0]


def deliver_on_stream(torch, trusted, guarded, gated=False):
    """Makes the inputs arrive the way a calling program's do: written by work still queued on
    its stream when the call begins. The input bytes are hidden (canary bytes) and written back
    behind the delivery gate (or a fixed delay) on the caller's stream, so a kernel whose work
    does not wait for that stream reads the canary bytes and computes a wrong output. An honest
    kernel (its work on the current stream, or on a stream made to wait for it) sees no
    difference. The gate (`gated`) serves the small cases of a `RunBatch`, where the fixed
    delay was most of a case's cost; every other call (a single case, and so every call a
    check's tool or the determinism check makes) keeps the fixed delay. Returns what opens the
    gate, to be called when the call has returned."""
    sleep = getattr(torch.cuda, "_sleep", None)
    with trusted.on_stream(trusted.stream):
        inputs = [g for name, g in guarded.items() if not name.startswith("c") and g.n]
        if not inputs:
            return lambda: None
        gate = delivery_gate() if gated else None
        if gate is None and sleep is None:
            return lambda: None
        saved = [g.body().clone() for g in inputs if g.buffer.is_cuda]
        for g in inputs:
            if g.buffer.is_cuda:
                g.body().fill_(CANARY_BYTE)
        if gate is not None:
            try:
                gate.close(trusted.stream)
            except RuntimeError:
                # The launch failed (the current context is not the gate's, say): this call
                # gets the fixed delay, and its failure is not put on the kernel.
                gate = None
        if gate is None and sleep is not None:
            sleep(DELIVERY_DELAY_CYCLES)
        for g, body in zip([g for g in inputs if g.buffer.is_cuda], saved):
            g.body().copy_(body)
    return gate.open if gate is not None else (lambda: None)


def ordered_copy(torch, trusted, out):
    """Copies of the fp16 output tensors, enqueued on the caller's stream (captured before the
    submission was imported) right after the call returned."""
    with trusted.on_stream(trusted.stream):
        return [t.detach().clone() if t is not None else None for t in output_tensors(torch, out)]


def unordered(torch, early, out):
    """None, or the failure when the output changed after the caller's stream had finished."""
    for i, (before, after) in enumerate(zip(early, output_tensors(torch, out))):
        if before is None or after is None or before.shape != after.shape:
            continue
        changed = before.view(torch.int16) != after.detach().view(torch.int16)
        if bool(changed.any()):
            which = f"output {i}" if len(early) > 1 else "the output"
            return {"Unordered": f"{int(changed.sum())} of {changed.numel()} elements of {which} "
                                 f"changed after the caller's stream had finished: the kernel's "
                                 f"work continued on another stream"}
    return None


def around(torch, trusted, conditions, device):
    """The determinism checks' conditions (RunConditions in crates/harness/src/kernels/interface.rs), made with
    torch: a GEMM on operands made of the fill byte leaves that byte in the shared memory its
    tiles were staged in (much of it, not all: the Rust worker fills all of it); a large GEMM on
    another stream is other work running while the kernel runs. The device-wide synchronize
    after the call waits for both."""
    fill = conditions.get("shared_memory_fill")
    if fill is not None:
        operand = torch.full((2048, 4096), fill, dtype=torch.uint8, device=device).view(torch.float16)
        torch.matmul(operand, operand)
    if conditions.get("concurrent_load"):
        side = torch.cuda.Stream(device=device)
        load = torch.ones((8192, 8192), dtype=torch.float16, device=device)
        side.wait_stream(trusted.stream)
        with trusted.on_stream(side):
            torch.matmul(load, load)
        load.record_stream(side)


class TrustedCuda:
    """The CUDA calls the worker times and synchronizes with, captured before the submission is
    imported: a submission that later replaces torch.cuda.synchronize, torch.cuda.Event or its
    methods, or the clock, changes what it calls, not what the worker calls."""

    def __init__(self, torch):
        import time
        base = getattr(torch._C, "_CudaEventBase", None)
        self.Event = torch.cuda.Event
        self._record = getattr(base, "record", None) or torch.cuda.Event.record
        self._wait = getattr(base, "synchronize", None) or torch.cuda.Event.synchronize
        self._elapsed = getattr(base, "elapsed_time", None) or torch.cuda.Event.elapsed_time
        self.synchronize = getattr(torch._C, "_cuda_synchronize", None) or torch.cuda.synchronize
        self.perf_counter = time.perf_counter
        self.current_frames = sys._current_frames
        self.stream = torch.cuda.current_stream()
        # torch.cuda.stream(...) looks torch.cuda.current_stream up again on entry and restores
        # what it returns on exit: a submission that replaced it would have its own stream made
        # current. The functions themselves are held here instead.
        self._current_stream = torch.cuda.current_stream
        self._set_stream = torch.cuda.set_stream

    @contextlib.contextmanager
    def on_stream(self, stream):
        """Work enqueued inside goes on `stream`; the current stream is put back."""
        previous = self._current_stream()
        self._set_stream(stream)
        try:
            yield
        finally:
            self._set_stream(previous)

    def event(self):
        return self.Event(enable_timing=True)

    def record(self, event):
        self._record(event, self.stream)

    def elapsed_us(self, start, end):
        self._wait(end)
        return self._elapsed(start, end) * 1000.0


class Timing:
    """The worker's side of a timing (crates/harness/src/bench/per_call.rs drives it). Nothing here is trusted:
    it runs in the kernel's process, and every fact the verdict rests on is held by the parent
    (the outputs it copies out of shared memory after each reply, its own clock around each
    request, the L2 state it resets before each call, the requests without the kernel that a
    clean worker of its own serves). Requests: the warm-up sets loaded (and the parent's shared
    device memory mapped, when it shares some) and run; then, per timed call, one untimed call
    on a warm-up set (`Warm`) and the call itself (`Call`) between CUDA events, its output put
    where the parent reads it (the shared output buffer, or a file named in the request), then
    a device-wide synchronize whose duration is reported."""

    def __init__(self, torch, kernel, device, trusted, submission):
        self.torch, self.kernel, self.device = torch, kernel, device
        self.cuda, self.submission = trusted, submission
        self.sets, self.flush, self.calls = [], None, 0
        self.shared, self.scratch, self.received = None, None, 0.0
        self.batch_slots, self.batch_memory = [], None
        self.lone_flush = None

    def serve(self, name, body):
        try:
            if name == "Prepare":
                if _requests is not None:
                    _requests.spin = bool(body.get("spin"))
                layout = body.get("shared") or []
                if layout:
                    fds = receive_fds(len(layout))
                    self.shared = {t["key"]: SharedGuarded(self.torch, t, fd, self.device)
                                   for t, fd in zip(layout, fds)}
                self.sets = [build_data(self.torch, case, self.device)
                             for case in body["sets"][:body["warmup"]]]
                return {"Done": {"Ok": None}}
            if name == "Warmup":
                for data, _, _ in self.sets:
                    self.kernel(data)
                self.cuda.synchronize()
                return {"Done": {"Ok": None}}
            if name == "Warm":
                # The untimed call before a timed one, so that an honest call does not pay for
                # cold caches and clocks; its own request, so that a call without the kernel
                # runs no code of the kernel's.
                if self.sets:
                    self.kernel(self.sets[self.calls % len(self.sets)][0])
                self.calls += 1
                self.cuda.synchronize()
                return {"Done": {"Ok": None}}
            if name == "PrepareBatch":
                self.prepare_batch(body)
                return {"Done": {"Ok": None}}
            if name == "TimedBatch":
                if body.get("lone"):
                    return {"Timed": self.lone_batch(bool(body["null"]))}
                return {"Timed": self.batch(bool(body["null"]))}
            if name == "Call":
                self.received = self.cuda.perf_counter()
                shared = self.shared if body.get("shared") else None
                if body.get("shared") and shared is None:
                    raise RuntimeError("a call on shared inputs before any were shared")
                return {"Timed": self.call(body["set"], body["null"], shared, body.get("output"))}
        except Exception as exc:
            failure = {"Raised": exception_text(exc, self.submission)}
            timed = name in ("Call", "TimedBatch")
            return {"Timed": {"Err": failure}} if timed else {"Done": {"Err": failure}}
        return {"Done": {"Err": {"Crashed": f"unknown timing request {name}"}}}

    def prepare_batch(self, body):
        """Maps a batch's shared memory and builds every slot's data tuple once, so that the
        timed batch runs nothing of the worker's between calls but the loop."""
        layout, slots, case = body["shared"], body["slots"], body["set"]
        fds = receive_fds(len(layout))
        mapped = {t["key"]: SharedGuarded(self.torch, t, fd, self.device)
                  for t, fd in zip(layout, fds)}
        self.batch_slots = []
        for i in range(slots):
            views = {t["key"]: BatchSlot(mapped[t["key"]], t["len"],
                                         t["start"] + i * slot_stride(t["len"]))
                     for t in layout}
            data, _, shapes = build_data(self.torch, case, self.device, views)
            self.batch_slots.append((data, shapes))
        self.batch_memory = mapped

    def batch(self, null):
        """Every slot's call in order on the caller's stream, no synchronize between them; an
        output that is not the slot's own buffer is copied there on the same stream."""
        torch, cuda = self.torch, self.cuda
        received = cuda.perf_counter()
        slots = self.batch_slots
        if not slots:
            raise RuntimeError("a batch before its memory was shared")
        threads = len(cuda.current_frames()) - 1
        start, end = cuda.event(), cuda.event()
        cuda.record(start)
        if not null:
            for data, shapes in slots:
                out = self.kernel(data)
                c = data[-1]
                if not (isinstance(out, torch.Tensor) and out.data_ptr() == c.data_ptr()
                        and out.stride() == c.stride()):
                    failure = output_failure(torch, out, shapes)
                    if failure is not None:
                        return {"Err": failure}
                    with cuda.on_stream(cuda.stream):
                        c.copy_(out)
        cuda.record(end)
        sample = cuda.elapsed_us(start, end)
        after = cuda.perf_counter()
        cuda.synchronize()
        after_end = (cuda.perf_counter() - after) * 1e6
        return {"Ok": {"samples_us": [sample], "wall_us": (cuda.perf_counter() - received) * 1e6,
                       "after_end_us": [after_end], "other_threads": [threads]}}

    def lone_batch(self, null):
        """A lone-call batch (protocol.rs, TimedBatch with `lone`): per slot, the worker's flush
        buffer (4x the L2) written on the caller's stream and the device synchronized, the call
        alone between CUDA events (the kernel's word, one sample a call), one copy of the
        output's size (the kernel's output into the slot's `c`, or `c` into a scratch buffer
        where the kernel wrote `c` itself, and without the kernel), and the device synchronized:
        every call alone, and both workers doing the same work around it."""
        torch, cuda = self.torch, self.cuda
        received = cuda.perf_counter()
        slots = self.batch_slots
        if not slots:
            raise RuntimeError("a batch before its memory was shared")
        threads = len(cuda.current_frames()) - 1
        if self.lone_flush is None:
            l2 = torch.cuda.get_device_properties(self.device).L2_cache_size
            self.lone_flush = torch.empty(max(4 * l2, 1 << 20), dtype=torch.uint8,
                                          device=self.device)
        start, end = cuda.event(), cuda.event()
        samples = []
        for data, shapes in slots:
            c = data[-1]
            with cuda.on_stream(cuda.stream):
                self.lone_flush.zero_()
            cuda.synchronize()
            cuda.record(start)
            out = c if null else self.kernel(data)
            cuda.record(end)
            samples.append(cuda.elapsed_us(start, end))
            with cuda.on_stream(cuda.stream):
                if null or (isinstance(out, torch.Tensor) and out.data_ptr() == c.data_ptr()
                            and out.stride() == c.stride()):
                    if self.scratch is None or self.scratch.shape != c.shape:
                        self.scratch = torch.empty_like(c)
                    self.scratch.copy_(c)
                else:
                    failure = output_failure(torch, out, shapes)
                    if failure is not None:
                        return {"Err": failure}
                    c.copy_(out)
            cuda.synchronize()
        return {"Ok": {"samples_us": samples, "wall_us": (cuda.perf_counter() - received) * 1e6,
                       "after_end_us": [0.0], "other_threads": [threads]}}

    def call(self, case, null, shared, output):
        torch, cuda = self.torch, self.cuda
        data, _, shapes = build_data(torch, case, self.device, shared)
        if shared is None and self.flush is None:
            l2 = torch.cuda.get_device_properties(self.device).L2_cache_size
            self.flush = torch.empty(max(4 * l2, 1 << 20), dtype=torch.uint8, device=self.device)
        # Python threads of the kernel's, alive beside its call, could work on the inputs
        # while the worker loads and synchronizes, outside the timed call.
        threads = len(cuda.current_frames()) - 1
        cuda.synchronize()
        start, end = cuda.event(), cuda.event()
        if shared is None:
            # Inputs loaded from files passed through L2 just now; with shared inputs the
            # parent has flushed L2 after copying them in.
            self.flush.zero_()
        cuda.record(start)
        out = data[-1] if null else self.kernel(data)
        cuda.record(end)
        sample = cuda.elapsed_us(start, end)
        failure = self.place_output(data, out, shapes, null, shared, output)
        if failure is not None:
            return {"Err": failure}
        # Anything still running on the device now was left behind by the call.
        after = cuda.perf_counter()
        cuda.synchronize()
        after_end = (cuda.perf_counter() - after) * 1e6
        del data, out
        # From the request's arrival: the parent's clock less this is the pipe's round trip.
        return {"Ok": {"samples_us": [sample], "wall_us": (cuda.perf_counter() - self.received) * 1e6,
                       "after_end_us": [after_end], "other_threads": [threads]}}

    def place_output(self, data, out, shapes, null, shared, output):
        """Puts the call's output where the parent reads it right after the reply: the shared
        output buffer (copied there on the caller's stream unless the kernel returned that
        buffer itself), or the file the request names. A call without the kernel copies a
        buffer of the same size, so that its request costs what a timed one costs."""
        torch, cuda = self.torch, self.cuda
        c = data[-1]
        if shared is not None:
            with cuda.on_stream(cuda.stream):
                if null:
                    if self.scratch is None or self.scratch.shape != c.shape:
                        self.scratch = torch.empty_like(c)
                    self.scratch.copy_(c)
                    return None
                failure = output_failure(torch, out, shapes)
                if failure is not None:
                    return failure
                if not (out.data_ptr() == c.data_ptr() and out.stride() == c.stride()):
                    c.copy_(out)
            return None
        if null or output is None:
            return None
        body, failure = output_bytes(torch, out, shapes, self.device)
        if failure is None:
            with open(output, "wb") as f:
                f.write(body)
        return failure


def required_parameters(function):
    """The parameters a call must give (GPU MODE's grouped-GEMM compile_kernel takes the
    problem sizes: such a submission compiles itself from custom_kernel, and is left to)."""
    import inspect
    try:
        return [p for p in inspect.signature(function).parameters.values()
                if p.default is p.empty and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        return []


# What only Blackwell has (its tensor-core instructions and CuTe DSL's helpers for them), and
# what a submission with a Hopper path would name too.
BLACKWELL_ONLY = ("tcgen05", "blackwell_helpers", "sm100_utils", "MmaMXF4NVF4Op",
                  "kind::mxf4nvf4", "sm_100")
HOPPER_PATH = ("wgmma", "sm_90", "sm90", "hopper_helpers", "warpgroup")


def code_pieces(source):
    """The submission's code, as (line, text) pieces, that the markers are looked for in: Python
    comments and string-only statements (docstrings) dropped, and C and C++ comments dropped from
    the strings kept (a CUDA source handed to load_inline is code). A word in a comment never
    decides what a submission needs."""
    tokens = [t for t in tokenize.generate_tokens(io.StringIO(source).readline)
              if t.type not in (tokenize.COMMENT, tokenize.NL)]
    statement_ends = (tokenize.NEWLINE, tokenize.ENDMARKER, tokenize.DEDENT)
    statement_starts = (tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT, tokenize.ENCODING)
    pieces, i = [], 0
    while i < len(tokens):
        run = i
        while run < len(tokens) and tokens[run].type == tokenize.STRING:
            run += 1
        if run > i:
            alone = ((i == 0 or tokens[i - 1].type in statement_starts)
                     and (run == len(tokens) or tokens[run].type in statement_ends))
            if not alone:
                for token in tokens[i:run]:
                    # A comment's line breaks kept, so that each line keeps its number.
                    text = C_COMMENT.sub(lambda c: "\n" * c.group().count("\n"), token.string)
                    pieces.extend((token.start[0] + n, line)
                                  for n, line in enumerate(text.split("\n")))
            i = run
            continue
        pieces.append((tokens[i].start[0], tokens[i].string))
        i += 1
    return pieces


C_COMMENT = re.compile(r"/\*.*?\*/|//[^\n]*", re.S)


def blackwell_only(source):
    """Where a submission's code shows Blackwell-only code and no Hopper path: the first
    marker and its line, else None. A kernel like that cannot run on an older GPU (it fails
    at its first compile), and `nvfp4-oracle preflight --submission` is what can read it."""
    try:
        pieces = code_pieces(source)
    except (tokenize.TokenError, SyntaxError):
        return None
    if any(marker in text for _, text in pieces for marker in HOPPER_PATH):
        return None
    for number, text in pieces:
        for marker in BLACKWELL_ONLY:
            if marker in text:
                return f"`{marker}` (line {number})"
    return None


# Top-level modules of packages only a GPU platform has: a submission importing one where it
# is missing cannot run here (exit 4). Any other module missing is the submission's to fix (a
# typo, a helper file not beside it, a package to install).
PLATFORM_MODULES = ("torch", "triton", "cutlass", "cuda", "cupy", "pycuda", "nvidia", "tilelang",
                    "tvm", "flashinfer", "deep_gemm", "tensorrt", "thunderkittens", "quack",
                    "cuda_bindings", "torchao", "nvmath", "numba")


def missing_module_failure(exc, submission):
    """What a ModuleNotFoundError raised by importing the submission says, and whether it is
    this machine's (a GPU platform's package is missing) rather than the submission's."""
    top = (exc.name or "").split(".")[0]
    if top in PLATFORM_MODULES:
        return (f"{submission} needs the Python module '{exc.name}', which is not installed for "
                f"{sys.executable}"), True
    beside = os.path.join(os.path.dirname(submission), top + ".py")
    return (f"{submission}: importing it raised {exception_text(exc, submission)}: '{top}' is "
            f"neither beside it ({beside} does not exist) nor installed for {sys.executable}: "
            f"a misspelt name, a helper file to put beside it, or a package to install"), False


def read_checked_source(submission):
    """The submission's bytes, once they are known to compile and to name a custom_kernel;
    otherwise a start failure blaming the file (a usage error, not this machine)."""
    try:
        with open(submission, "rb") as f:
            source = f.read()
        tree = compile(source, submission, "exec", flags=ast.PyCF_ONLY_AST)
        compile(tree, submission, "exec")
    except SyntaxError as exc:
        start_failed(f"{submission}:{exc.lineno}: syntax error: {exc.msg}")
    except ValueError as exc:  # null bytes in the source
        start_failed(f"{submission}: not Python source: {exc}")
    except OSError as exc:
        start_failed(f"{submission}: cannot read: {exc}")
    if not may_define_custom_kernel(tree):
        start_failed(f"{submission} defines no custom_kernel(data) function"
                     + (" (the file is empty)" if not source.strip() else ""))
    return source


def may_define_custom_kernel(tree):
    """Whether the module's code could bind `custom_kernel`: the name appears in it (a def, an
    assignment, an import, even a string handed to exec), or a star import could bring it. Only
    a file where none of these holds is refused before it is imported."""
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and any(a.name == "*" for a in node.names):
            return True
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) \
                and node.name == "custom_kernel":
            return True
        if isinstance(node, ast.Name) and node.id == "custom_kernel":
            return True
        if isinstance(node, ast.alias) and "custom_kernel" in (node.name, node.asname):
            return True
        if isinstance(node, ast.Constant) and isinstance(node.value, str) \
                and "custom_kernel" in node.value:
            return True
        if isinstance(node, ast.Attribute) and node.attr == "custom_kernel":
            return True
    return False


def main():
    take_over_stdio()
    take_input_socket()
    parser = argparse.ArgumentParser()
    parser.add_argument("--submission", required=True)
    parser.add_argument("--problem", default="dual-gemm")
    parser.add_argument("--arch")
    args = parser.parse_args()
    submission = os.path.abspath(args.submission)

    # What is wrong with the file itself is the author's to fix on any machine: said before torch
    # is asked for, so that a machine without torch does not hide it as "cannot run here".
    source = read_checked_source(submission)

    try:
        import torch
    except Exception as exc:
        start_failed(f"torch is not installed for {sys.executable} ({type(exc).__name__}: {exc}); "
                     f"install torch, or name another interpreter with NVFP4_ORACLE_PYTHON",
                     unavailable=True)
    versions = {"python": sys.version.split()[0], "torch": torch.__version__,
                "torch_cuda": torch.version.cuda}
    if not hasattr(torch, "float4_e2m1fn_x2") or not hasattr(torch, "float8_e4m3fn"):
        start_failed(f"torch {torch.__version__} has no float4_e2m1fn_x2 / float8_e4m3fn dtypes "
                     f"(GPU MODE's NVFP4 problems need torch 2.8 or later)", unavailable=True)

    if torch.cuda.is_available():
        trusted = TrustedCuda(torch)

    # The `task` module GPU MODE's submissions import (the real one holds type aliases only).
    task = types.ModuleType("task")
    task.input_t = tuple
    task.output_t = torch.Tensor
    task.TestSpec = dict
    sys.modules["task"] = task
    sys.path.insert(0, os.path.dirname(submission))

    if not torch.cuda.is_available():
        start_failed("torch sees no CUDA GPU", unavailable=True)
    major, minor = torch.cuda.get_device_capability()
    if args.arch:
        digits = args.arch[3:].rstrip("a")
        need = (int(digits[:-1]), int(digits[-1]))
        exact = args.arch.endswith("a")
        if (exact and (major, minor) != need) or (not exact and (major, minor) < need):
            start_failed(f"needs {args.arch}; this GPU is sm_{major}{minor}", unavailable=True)
    elif major < 10:
        blackwell = blackwell_only(source.decode("utf-8", "replace"))
        if blackwell:
            start_failed(f"needs sm_100a: its code uses {blackwell}, which only Blackwell has, "
                         f"and shows no Hopper path; this GPU is sm_{major}{minor}",
                         unavailable=True)

    # The delivery gate's driver calls are taken before the import, as the trusted CUDA calls
    # are (a submission that replaced ctypes or torch.cuda._sleep reaches neither).
    torch.empty(1, device="cuda")
    delivery_gate()

    try:
        spec = importlib.util.spec_from_file_location("submission", submission)
        module = importlib.util.module_from_spec(spec)
        sys.modules["submission"] = module
        spec.loader.exec_module(module)
    except ModuleNotFoundError as exc:
        start_failed(*missing_module_failure(exc, submission))
    except Exception as exc:
        start_failed(f"{submission}: importing it raised {exception_text(exc, submission)}")
    kernel = getattr(module, "custom_kernel", None)
    if not callable(kernel):
        start_failed(f"{submission} defines no custom_kernel(data) function")
    compile_kernel = getattr(module, "compile_kernel", None)
    if callable(compile_kernel) and not required_parameters(compile_kernel):
        try:
            compile_kernel()
            torch.cuda.synchronize()
        except Exception as exc:
            start_failed(f"{submission}: compile_kernel() raised {exception_text(exc, submission)}")

    device = torch.device("cuda")
    versions["guard_pages"] = guard_pages(torch, device)
    versions["shared_inputs"] = (_input_socket is not None
                                 and not isinstance(virtual_memory(torch, device), str))
    versions["batches"] = True
    reply({"Ready": {"environment": versions}})

    timing = Timing(torch, kernel, device, trusted, submission)
    for line in _requests:
        request = json.loads(line)
        # serde's external tagging: {"Name": body}, or "Name" for a request without fields.
        name, body = (request, None) if isinstance(request, str) else next(iter(request.items()))
        if name not in ("Run", "RunShared", "RunBatch"):
            reply(timing.serve(name, body))
            continue
        if name == "RunBatch":
            # Small cases, one after another, answered once (protocol.rs: RunBatch).
            results, fatal = [], False
            for run in body["runs"]:
                failure, fatal = run_on_files(torch, trusted, kernel, run, device, submission,
                                              gated=True)
                results.append({"Ok": None} if failure is None else {"Err": failure})
                if fatal:
                    break
            reply({"Batch": results})
            if fatal:
                return  # the context is unusable
            continue
        if name == "RunShared":
            failure, fatal = run_on_shared_memory(torch, trusted, kernel, body, device, submission)
        else:
            failure, fatal = run_on_files(torch, trusted, kernel, body, device, submission)
        done(failure)
        if fatal:
            return  # the context is unusable


def call_kernel(torch, trusted, kernel, data, guarded, conditions, device, submission,
                gated=False):
    """One campaign call, as a calling program makes it: (output, its copy ordered on the
    caller's stream, failure, fatal). A failure is the kernel's exception; fatal when the CUDA
    context is left unusable."""
    trusted.synchronize()
    try:
        around(torch, trusted, conditions, device)
        open_gate = deliver_on_stream(torch, trusted, guarded, gated)
        try:
            out = kernel(data)
        finally:
            open_gate()
        # Read the output as the calling program would: a copy enqueued on the caller's
        # stream right after the call returns sees only the work ordered before it.
        early = ordered_copy(torch, trusted, out)
        trusted.synchronize()
    except Exception as exc:
        text = exception_text(exc, submission)
        try:
            trusted.synchronize()
        except Exception:
            return None, None, {"Crashed": f"CUDA error: {text}"}, True
        return None, None, {"Raised": text}, False
    return out, early, None, False


def run_on_files(torch, trusted, kernel, run, device, submission, gated=False):
    """A `Run` request (or one case of a `RunBatch`, `gated`): the case's inputs from its files
    into guarded buffers of the worker's, the output written to the file the request names.
    (failure, fatal)."""
    data, guarded, shapes = build_data(torch, run["case"], device)
    out, early, failure, fatal = call_kernel(torch, trusted, kernel, data, guarded,
                                             run.get("conditions") or {}, device, submission,
                                             gated)
    if failure is not None:
        return failure, fatal
    failure = check_after(torch, guarded)
    if failure is None:
        body, failure = output_bytes(torch, out, shapes, device)
    if failure is None:
        failure = unordered(torch, early, out)
    if failure is None:
        with open(run["output"], "wb") as f:
            f.write(body)
    return failure, False


def run_on_shared_memory(torch, trusted, kernel, run, device, submission):
    """A `RunShared` request (crates/harness/src/worker/shared_run.rs): the case's tensors are
    views of device memory the parent shares, inputs in place and the output `c` poisoned; the
    output goes into `c` (copied there on the caller's stream unless the kernel returned `c`
    itself). The parent reads `c` and checks every input and canary itself after the reply;
    every mapping is released before it. (failure, fatal)."""
    layout = run["shared"]
    try:
        fds = receive_fds(len(layout))
        shared = {t["key"]: SharedGuarded(torch, t, fd, device) for t, fd in zip(layout, fds)}
        data, guarded, shapes = build_data(torch, run["set"], device, shared)
    except Exception as exc:
        return {"Crashed": f"mapping the shared memory: {type(exc).__name__}: {exc}"}, False
    out, early, failure, fatal = call_kernel(torch, trusted, kernel, data, guarded, {}, device,
                                             submission)
    if failure is None:
        failure = output_failure(torch, out, shapes) or unordered(torch, early, out)
    if failure is None:
        c = data[-1]
        if not (out.data_ptr() == c.data_ptr() and out.stride() == c.stride()):
            with trusted.on_stream(trusted.stream):
                c.copy_(out)
        trusted.synchronize()
    # The mappings go with the last tensor viewing them: none is kept past the reply.
    del data, guarded, shared, out, early
    return failure, fatal

if __name__ == "__main__":
    main()
