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
import importlib.util
import json
import os
import sys
import traceback
import types

MARKER = "@@nvfp4-oracle-reply@@ "
CANARY = 4096          # guard bytes before and after every tensor
CANARY_BYTE = 0xA5
SCALE_BLOCK = 16

_channel = None   # the protocol's reply channel, set up by take_over_stdio()
_requests = None


def take_over_stdio():
    """The protocol channel becomes a private copy of stdout (and stdin); fd 1 is pointed at stderr
    and fd 0 at /dev/null, so the submission's prints and reads cannot reach the protocol."""
    global _channel, _requests
    _channel = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    _requests = os.fdopen(os.dup(0), "r")
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)


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


class Guarded:
    """One tensor's bytes inside a larger CUDA allocation with canary bytes on both sides."""

    def __init__(self, torch, body, device):
        self.n = body.numel()
        self.host = body
        self.buffer = torch.full((self.n + 2 * CANARY,), CANARY_BYTE, dtype=torch.uint8, device=device)
        self.buffer[CANARY:CANARY + self.n].copy_(body)

    def body(self):
        return self.buffer[CANARY:CANARY + self.n]

    def canaries_intact(self, torch):
        return bool((self.buffer[:CANARY] == CANARY_BYTE).all()) and bool(
            (self.buffer[CANARY + self.n:] == CANARY_BYTE).all())


def read_tensor(torch, path, n):
    if n == 0:
        return torch.empty(0, dtype=torch.uint8)
    data = torch.from_file(path, shared=False, size=n, dtype=torch.uint8)
    return data


def dual_gemm_data(torch, case, device):
    """The GPU MODE nvfp4 dual-GEMM tuple, each tensor a view of a guarded allocation.

    Strides, dtypes and permutes follow the competition's generate_input: tensors are made in
    (L, MN, ...) storage and permuted so that L is the last logical dimension.
    """
    m, n, k, l = case["m"], case["n"], case["k"], case["l"]
    kb = k // SCALE_BLOCK
    rest_k = -(-kb // 4)
    fp4 = torch.float4_e2m1fn_x2
    e4m3 = torch.float8_e4m3fn
    rest = {"a": -(-m // 128), "b1": -(-n // 128), "b2": -(-n // 128)}
    rows = {"a": m, "b1": n, "b2": n}
    guarded = {}
    views = {}
    for name in ("a", "b1", "b2"):
        for tensor, shape, dtype in (
            (name, (l, rows[name], k // 2), fp4),
            ("sf" + name, (l, rows[name], kb), e4m3),
            ("sf" + name + "_permuted", (l, rest[name], rest_k, 32, 4, 4), e4m3),
        ):
            count = 1
            for d in shape:
                count *= d
            g = Guarded(torch, read_tensor(torch, os.path.join(case["dir"], tensor + ".bin"), count), device)
            guarded[tensor] = g
            storage = g.body().view(dtype).view(shape)
            if tensor.endswith("_permuted"):
                views[tensor] = storage.permute(3, 4, 1, 5, 2, 0)
            else:
                views[tensor] = storage.permute(1, 2, 0)
    poison = torch.tensor([case["poison"]], dtype=torch.int32).to(torch.int16)
    c_bytes = poison.view(torch.uint8).repeat(l * m * n)
    gc = Guarded(torch, c_bytes, device)
    guarded["c"] = gc
    views["c"] = gc.body().view(torch.float16).view(l, m, n).permute(1, 2, 0)
    order = ("a", "b1", "b2", "sfa", "sfb1", "sfb2", "sfa_permuted", "sfb1_permuted",
             "sfb2_permuted", "c")
    return tuple(views[name] for name in order), guarded, (m, n, l)


def check_after(torch, guarded):
    """None, or the failure the buffers show: a canary overwritten, an input changed."""
    for name, g in guarded.items():
        if not g.canaries_intact(torch):
            where = "c" if name == "c" else "input " + name
            kind = "OutOfBounds" if name == "c" else "ModifiedInputs"
            return {kind: f"the canary around {where} was overwritten"}
    for name, g in guarded.items():
        if name != "c" and not torch.equal(g.body().cpu(), g.host):
            return {"ModifiedInputs": f"input {name}: its contents changed"}
    return None


def output_bytes(torch, out, expected_shape, device):
    """The output's [M, N, L] fp16 bits, or a BadOutput failure."""
    if isinstance(out, (tuple, list)) and len(out) == 1:
        out = out[0]
    if not isinstance(out, torch.Tensor):
        return None, {"BadOutput": f"custom_kernel returned {type(out).__name__}, not a torch.Tensor"}
    if out.dtype != torch.float16:
        return None, {"BadOutput": f"output dtype is {out.dtype}, expected torch.float16"}
    if out.device.type != "cuda":
        return None, {"BadOutput": f"output is on {out.device}, expected the CUDA device"}
    if tuple(out.shape) != expected_shape:
        return None, {"BadOutput": f"output shape is {tuple(out.shape)}, expected {expected_shape} (M, N, L)"}
    host = out.detach().contiguous().cpu().view(torch.int16)
    try:
        return host.numpy().tobytes(), None
    except Exception:  # torch without numpy
        return b"".join(int(v).to_bytes(2, "little", signed=True) for v in host.flatten().tolist()), None


def time_calls(torch, kernel, request, device, submission):
    """Times `reps` calls with CUDA events, L2 flushed before each, rotating over the input sets;
    the calls at the `fresh` positions get inputs never seen before, and their outputs are saved
    for the parent to judge. Returns {"Ok": {...}} or {"Err": failure}."""
    sets = [dual_gemm_data(torch, case, device)[0] for case in request["sets"]]
    fresh = {f["at_rep"]: (dual_gemm_data(torch, f["case"], device), f["output"])
             for f in request["fresh"]}
    l2 = torch.cuda.get_device_properties(device).L2_cache_size
    flush = torch.empty(max(4 * l2, 1 << 20), dtype=torch.uint8, device=device)
    start = torch.cuda.Event(enable_timing=True)
    end = torch.cuda.Event(enable_timing=True)
    samples = []
    import time as _time
    try:
        for i in range(request["warmup"]):
            kernel(sets[i % len(sets)])
        torch.cuda.synchronize()
        wall_start = _time.perf_counter()
        for rep in range(request["reps"]):
            if rep in fresh:
                (data, _guarded, shape), _ = fresh[rep]
            else:
                data = sets[rep % len(sets)]
            flush.zero_()
            start.record()
            out = kernel(data)
            end.record()
            end.synchronize()
            samples.append(start.elapsed_time(end) * 1000.0)
            if rep in fresh:
                torch.cuda.synchronize()
                body, failure = output_bytes(torch, out, shape, device)
                if failure is not None:
                    return {"Err": failure}
                with open(fresh[rep][1], "wb") as f:
                    f.write(body)
        wall_us = (_time.perf_counter() - wall_start) * 1e6
    except Exception as exc:
        return {"Err": {"Raised": exception_text(exc, submission)}}
    return {"Ok": {"samples_us": samples, "wall_us": wall_us}}


def main():
    take_over_stdio()
    parser = argparse.ArgumentParser()
    parser.add_argument("--submission", required=True)
    parser.add_argument("--problem", default="dual-gemm")
    parser.add_argument("--arch")
    args = parser.parse_args()
    submission = os.path.abspath(args.submission)
    if args.problem != "dual-gemm":
        start_failed(f"problem {args.problem}: this worker serves dual-gemm only")

    try:
        import torch
    except Exception as exc:
        start_failed(f"torch is not installed for {sys.executable} ({type(exc).__name__}: {exc}); "
                     f"install torch, or name another interpreter with NVFP4_ORACLE_PYTHON")
    versions = {"python": sys.version.split()[0], "torch": torch.__version__,
                "torch_cuda": torch.version.cuda}
    if not hasattr(torch, "float4_e2m1fn_x2") or not hasattr(torch, "float8_e4m3fn"):
        start_failed(f"torch {torch.__version__} has no float4_e2m1fn_x2 / float8_e4m3fn dtypes "
                     f"(GPU MODE's NVFP4 problems need torch 2.8 or later)")

    try:
        with open(submission, "rb") as f:
            source = f.read()
        compile(source, submission, "exec")
    except SyntaxError as exc:
        start_failed(f"{submission}:{exc.lineno}: syntax error: {exc.msg}")
    except OSError as exc:
        start_failed(f"{submission}: cannot read: {exc}")

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

    try:
        spec = importlib.util.spec_from_file_location("submission", submission)
        module = importlib.util.module_from_spec(spec)
        sys.modules["submission"] = module
        spec.loader.exec_module(module)
    except ModuleNotFoundError as exc:
        if exc.name and exc.name.split(".")[0] not in ("task", "submission"):
            start_failed(f"{submission} needs the Python module '{exc.name}', which is not "
                         f"installed for {sys.executable}", unavailable=True)
        start_failed(f"{submission}: importing it raised {exception_text(exc, submission)}")
    except Exception as exc:
        start_failed(f"{submission}: importing it raised {exception_text(exc, submission)}")
    kernel = getattr(module, "custom_kernel", None)
    if not callable(kernel):
        start_failed(f"{submission} defines no custom_kernel(data) function")
    compile_kernel = getattr(module, "compile_kernel", None)
    if callable(compile_kernel):
        try:
            compile_kernel()
            torch.cuda.synchronize()
        except Exception as exc:
            start_failed(f"{submission}: compile_kernel() raised {exception_text(exc, submission)}")

    device = torch.device("cuda")
    reply({"Ready": {"environment": versions}})

    for line in _requests:
        request = json.loads(line)
        if "Time" in request:
            reply({"Timed": time_calls(torch, kernel, request["Time"], device, submission)})
            continue
        run = request["Run"]
        case = run["case"]
        data, guarded, (m, n, l) = dual_gemm_data(torch, case, device)
        torch.cuda.synchronize()
        try:
            out = kernel(data)
            torch.cuda.synchronize()
        except Exception as exc:
            text = exception_text(exc, submission)
            try:
                torch.cuda.synchronize()
            except Exception:
                done({"Crashed": f"CUDA error: {text}"})
                return  # the context is unusable
            done({"Raised": text})
            continue
        failure = check_after(torch, guarded)
        if failure is None:
            body, failure = output_bytes(torch, out, (m, n, l), device)
        if failure is None:
            with open(run["output"], "wb") as f:
                f.write(body)
        done(failure)
        del data, guarded, out


if __name__ == "__main__":
    main()
