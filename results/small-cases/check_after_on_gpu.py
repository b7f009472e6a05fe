"""The worker's joined canary check (check_after in crates/harness/src/worker/submission_worker.py)
on a GPU, on the guarded buffers of real cases: a clean call passes; a byte written just before
an input's body, just before the output's, or inside an input is each named as it was before
(which tensor, which kind). From the repository root: python3 results/small-cases/check_after_on_gpu.py"""
import os
import sys
import tempfile

sys.path.insert(0, "crates/harness/src/worker")
import submission_worker as w  # noqa: E402
import torch  # noqa: E402

device = torch.device("cuda")
root = tempfile.mkdtemp()


def case(m, n, k, l):
    d = tempfile.mkdtemp(dir=root)
    kb = k // 16
    for name, rows in (("a", m), ("b1", n), ("b2", n)):
        for suffix, count in (("", l * rows * k // 2), ("sf", l * rows * kb)):
            torch.randint(0, 256, (count,), dtype=torch.uint8).numpy().tofile(
                os.path.join(d, suffix + name + ".bin"))
        blocked = l * -(-rows // 128) * -(-kb // 4) * 512
        torch.full((blocked,), 0x38, dtype=torch.uint8).numpy().tofile(
            os.path.join(d, "sf" + name + "_permuted.bin"))
    return {"problem": "dual-gemm", "m": m, "n": n, "k": k, "l": l, "groups": [], "dir": d,
            "poison": 0x7E01, "padding_fill": 0x38}


def byte_at(tensor, offset):
    """A one-byte view of `tensor`'s storage at `offset` bytes from the tensor's first byte."""
    start = tensor.storage_offset() * tensor.element_size() + offset
    return torch.empty(0, dtype=torch.uint8, device=tensor.device).set_(
        tensor.untyped_storage(), start, (1,))


def check(shape, damage):
    data, guarded, _ = w.build_data(torch, case(*shape), device)
    damage(data)
    torch.cuda.synchronize()
    return w.check_after(torch, guarded)


print("guard pages:", w.guard_pages(torch, device))
for shape in [(129, 200, 320, 1), (64, 48, 128, 3), (256, 256, 512, 1)]:
    assert check(shape, lambda d: None) is None, shape
    got = check(shape, lambda d: byte_at(d[0], -1).fill_(0))
    assert got == {"ModifiedInputs": "the canary around input a was overwritten"}, got
    got = check(shape, lambda d: byte_at(d[-1], -1).fill_(0))
    assert got == {"OutOfBounds": "the canary around c was overwritten"}, got
    got = check(shape, lambda d: byte_at(d[4], 5).add_(1))
    assert got == {"ModifiedInputs": "input sfb1: its contents changed"}, got
    print(f"{shape}: clean passes; canary before a, canary before c, a changed sfb1 named")
print("check_after on the GPU: all passed")
