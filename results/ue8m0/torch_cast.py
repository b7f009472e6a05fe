"""torch's float8_e8m0fnu cast against ml_dtypes' (the committed vectors), on the CPU and on the
GPU: which inputs they disagree on. From the repository root on the GPU machine:

    python3 results/ue8m0/torch_cast.py golden/conformance > results/ue8m0/torch-cast.log

and writes torch's codes for the committed inputs, index for index, into the folder named
(ue8m0_torch_cpu.bin and ue8m0_torch_cuda.bin, one byte each), for crates/model/tests/model/conformance_formats.rs.
"""
import sys
import json
import struct

import torch

path = "golden/conformance/ue8m0_encode.safetensors"
raw = open(path, "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
header = json.loads(raw[8:8 + n])
data = raw[8 + n:]


def tensor(name, dtype):
    start, end = header[name]["data_offsets"]
    return torch.frombuffer(bytearray(data[start:end]), dtype=dtype)


x = tensor("input", torch.float32)
expected = tensor("code", torch.uint8)
print(f"torch {torch.__version__}, {len(x)} inputs, device {torch.cuda.get_device_name()}")
for device in ["cpu", "cuda"]:
    got = x.to(device).to(torch.float8_e8m0fnu).view(torch.uint8).cpu()
    if len(sys.argv) > 1:
        with open(f"{sys.argv[1]}/ue8m0_torch_{device}.bin", "wb") as out:
            out.write(bytes(got.tolist()))
    differ = (got != expected).nonzero().flatten()
    print(f"\n{device}: {len(differ)} of {len(x)} differ from ml_dtypes")
    kinds = {}
    for i in differ.tolist():
        v = x[i].item()
        kind = ("nan" if v != v else "inf" if abs(v) == float("inf") else "zero" if v == 0
                else "negative" if v < 0 else "subnormal" if abs(v) < 2.0 ** -126 else "normal")
        kinds.setdefault(kind, []).append(i)
    for kind, rows in sorted(kinds.items()):
        print(f"  {kind}: {len(rows)}")
        # The torch codes this kind gets, and a few inputs spread over it.
        codes = sorted({got[i].item() for i in rows})
        print(f"    torch gives {[hex(c) for c in codes[:8]]}{' ...' if len(codes) > 8 else ''}")
        for i in rows[:: max(1, len(rows) // 5)][:6]:
            bits = x[i:i + 1].view(torch.int32).item() & 0xFFFFFFFF
            print(f"    {x[i].item()!r} ({bits:#010x}): torch {got[i].item():#04x}, "
                  f"ml_dtypes {expected[i].item():#04x}")
