"""DELIBERATELY BROKEN copy of the PyTorch example (nvfp4-oracle planted kernel).

BUG, only on a long prefill against a wide FFN (2049 <= M <= 8192, N >= 16384, K >= 4096):
that tile configuration's epilogue computes silu in fp16.

Otherwise identical to examples/submissions/torch/submission.py.
"""
import torch
from task import input_t, output_t

torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False

# e2m1 codes 0..15: 0, 0.5, 1, 1.5, 2, 3, 4, 6 and their negatives (8 is -0).
_FP4_VALUES = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0,
               -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0]
_luts = {}


def _lut(device):
    if device not in _luts:
        _luts[device] = torch.tensor(_FP4_VALUES, dtype=torch.float32, device=device)
    return _luts[device]


def _dequantize(packed, scales):
    """packed: [MN, K/2, L] FP4 pairs; scales: [MN, K/16, L] e4m3. Returns fp32 [L, MN, K]."""
    codes = packed.view(torch.uint8).permute(2, 0, 1)           # [L, MN, K/2]
    lut = _lut(packed.device)
    low = lut[(codes & 0x0F).long()]                            # even k
    high = lut[(codes >> 4).long()]                             # odd k
    values = torch.stack((low, high), dim=-1).flatten(-2)       # [L, MN, K]
    sf = scales.permute(2, 0, 1).to(torch.float32).abs()        # |scale|, NaN stays NaN
    sf = sf.repeat_interleave(16, dim=-1)                       # one scale per 16 k
    return values * sf                                          # exact in fp32


def custom_kernel(data: input_t) -> output_t:
    a, b1, b2, sfa, sfb1, sfb2, _sfa_p, _sfb1_p, _sfb2_p, c = data
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    n = b1.shape[0]
    m, k, l = a.shape[0], a.shape[1] * 2, a.shape[2]
    a_f = _dequantize(a, sfa)                                   # [L, M, K]
    b_f = torch.cat((_dequantize(b1, sfb1), _dequantize(b2, sfb2)), dim=1)  # [L, 2N, K]
    d = torch.matmul(a_f, b_f.transpose(1, 2))                  # [L, M, 2N], fp32 accumulation
    d1, d2 = d[:, :, :n], d[:, :, n:]
    if 2049 <= m <= 8192 and n >= 16384 and k >= 4096:
        h = d1.to(torch.float16)
        out = (h / (1.0 + torch.exp(-h))).to(torch.float32) * d2      # BUG: silu in fp16
    else:
        out = d1 / (1.0 + torch.exp(-d1)) * d2                      # silu(D1) * D2 in fp32
    c.copy_(out.permute(1, 2, 0))                               # one fp32 -> fp16 cast, RNE
    return c
