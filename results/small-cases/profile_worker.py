"""Where a Python submission's small campaign case goes, phase by phase, in the worker's own
code (crates/harness/src/worker/submission_worker.py) driven directly, without the parent:
the case's files read, the guarded tensors made, the delivery behind the delay, the kernel,
the ordered copy and synchronize, the checks, the output's bytes and file. From the repository
root on the GPU machine:
    python3 results/small-cases/profile_worker.py [SUBMISSION] [CASES]
Prints the mean milliseconds of each phase over CASES cases (default 300) at the campaign's
small shapes (129x200x320, 256x64x512, 200x130x128x2, 64x48x128)."""
import importlib.util
import inspect
import os
import sys
import tempfile
import time
import types

# WORKER_DIR: another copy of the worker to profile (an older one, to compare).
sys.path.insert(0, os.environ.get("WORKER_DIR", "crates/harness/src/worker"))
import submission_worker as w  # noqa: E402
import torch  # noqa: E402

submission = sys.argv[1] if len(sys.argv) > 1 else "examples/submissions/torch/submission.py"
cases = int(sys.argv[2]) if len(sys.argv) > 2 else 300
task = types.ModuleType("task")
task.input_t, task.output_t, task.TestSpec = tuple, torch.Tensor, dict
sys.modules["task"] = task
sys.path.insert(0, os.path.dirname(os.path.abspath(submission)))
spec = importlib.util.spec_from_file_location("submission", submission)
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
kernel = module.custom_kernel
trusted = w.TrustedCuda(torch)
device = torch.device("cuda")
root = tempfile.mkdtemp()


def write_case(i, m, n, k, l):
    d = os.path.join(root, str(i))
    os.makedirs(d)
    g = torch.Generator().manual_seed(i)
    kb = k // 16
    for name, rows in (("a", m), ("b1", n), ("b2", n)):
        rand = lambda count, lo, hi: torch.randint(lo, hi, (count,), generator=g, dtype=torch.uint8)
        rand(l * rows * k // 2, 0, 256).numpy().tofile(os.path.join(d, name + ".bin"))
        rand(l * rows * kb, 0x30, 0x40).numpy().tofile(os.path.join(d, "sf" + name + ".bin"))
        blocked = l * -(-rows // 128) * -(-kb // 4) * 512
        rand(blocked, 0x30, 0x40).numpy().tofile(os.path.join(d, "sf" + name + "_permuted.bin"))
    return {"problem": "dual-gemm", "m": m, "n": n, "k": k, "l": l, "groups": [], "dir": d,
            "poison": 0x7E01, "padding_fill": 0x38}, os.path.join(d, "c.out")


shapes = [(129, 200, 320, 1), (256, 64, 512, 1), (200, 130, 128, 2), (64, 48, 128, 1)]
made = [write_case(i, *shapes[i % len(shapes)]) for i in range(cases)]
phases = {}


def timed(name, f, *args):
    torch.cuda.synchronize()
    t = time.perf_counter()
    r = f(*args)
    torch.cuda.synchronize()
    phases[name] = phases.get(name, 0.0) + time.perf_counter() - t
    return r


# The worker's batches deliver behind the gate (a worker from before it takes no such argument).
gated = {"gated": True} if "gated" in inspect.signature(w.run_on_files).parameters else {}
for warm in (True, False):
    if not warm:
        phases.clear()
    started = time.perf_counter()
    for case, output in made[: 20 if warm else cases]:
        data, guarded, shapes_ = timed("build_data (files read, guarded tensors)", w.build_data,
                                       torch, case, device)
        timed("around", w.around, torch, trusted, {}, device)

        def delivered_call():
            # No synchronize between the delivery and the call: the gate opens when it returns.
            opened = w.deliver_on_stream(torch, trusted, guarded, **gated)
            try:
                return kernel(data)
            finally:
                if callable(opened):
                    opened()
        out = timed("deliver_on_stream and custom_kernel (the delay included)", delivered_call)
        early = timed("ordered_copy", w.ordered_copy, torch, trusted, out)
        timed("check_after", w.check_after, torch, guarded)
        body, failure = timed("output_bytes", w.output_bytes, torch, out, shapes_, device)
        timed("unordered", w.unordered, torch, early, out)

        def write():
            with open(output, "wb") as f:
                f.write(body)
        timed("write the output file", write)
        timed("release (del)", lambda: None)
        del data, guarded, out, early
    total = time.perf_counter() - started
print(f"worker {w.__file__}")
print(f"{submission}: {cases} small cases, {1000 * total / cases:.2f} ms a case in all")
for name, seconds in phases.items():
    print(f"  {1000 * seconds / cases:7.3f} ms  {name}")
# The same path as the worker runs it (run_on_files), for the whole figure.
started = time.perf_counter()
for case, output in made:
    run = {"case": case, "output": output}
    failure, fatal = w.run_on_files(torch, trusted, kernel, run, device, submission, **gated)
    assert failure is None, failure
print(f"  run_on_files as served: {1000 * (time.perf_counter() - started) / cases:.2f} ms a case")
