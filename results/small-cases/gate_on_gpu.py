"""The delivery gate (DeliveryGate in crates/harness/src/worker/submission_worker.py) on a GPU:
closed and opened at once, the caller's stream goes on at once; closed and never opened (a call
that waits for its own stream inside), the stream goes on after the bound (DELIVERY_DELAY_CYCLES,
about 2 ms), not never; and the inputs a call reads on that stream are the real ones, while work
on a stream that does not wait reads canary bytes. From the repository root:
    python3 results/small-cases/gate_on_gpu.py"""
import sys
import time

sys.path.insert(0, "crates/harness/src/worker")
import submission_worker as w  # noqa: E402
import torch  # noqa: E402

torch.empty(1, device="cuda")
gate = w.delivery_gate()
assert gate is not None, "no gate could be made on this machine"
stream = torch.cuda.current_stream()


def timed(open_at_once):
    torch.cuda.synchronize()
    started = time.perf_counter()
    gate.close(stream)
    if open_at_once:
        gate.open()
    torch.cuda.synchronize()
    return (time.perf_counter() - started) * 1e3


opened = min(timed(True) for _ in range(20))
bounded = min(timed(False) for _ in range(5))
print(f"opened at once: {opened:.3f} ms; never opened: {bounded:.3f} ms")
assert opened < 0.5, opened
assert 0.5 < bounded < 20, bounded

# The inputs arrive behind the gate: the caller's stream sees them, a side stream does not.
body = torch.arange(256, dtype=torch.int32, device="cuda").view(torch.uint8)
saved = body.clone()
body.fill_(w.CANARY_BYTE)
# The side stream and its buffer made, and the canary bytes in place, before the gate closes:
# the side stream's read must start within the gate's ~2 ms bound (a first allocation on a new
# stream can take longer: two runs on the H200 read the inputs, after the bound).
side = torch.cuda.Stream()
with torch.cuda.stream(side):
    early = torch.empty_like(body)
torch.cuda.synchronize()
gate.close(stream)
body.copy_(saved)
with torch.cuda.stream(side):
    early.copy_(body)  # does not wait for the caller's stream
on_stream = body.clone()  # ordered after the gate and the copy
side.synchronize()
gate.open()
torch.cuda.synchronize()
assert torch.equal(on_stream, saved)
assert bool((early == w.CANARY_BYTE).all()), "the side stream read the inputs before they arrived"
print("the caller's stream reads the inputs; a side stream reads canary bytes: passed")
