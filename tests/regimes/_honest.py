"""The honest work every planted regime kernel here shares (the torch example's): FP4 codes through
a lookup table times |scale|, exact fp32 operands, one fp32 matmul (TF32 off), silu(D1) * D2 in
fp32, one cast to fp16. Each planted file changes it in its regime only."""
import torch

_FP4 = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0]
_luts = {}


def dequantize(packed, scales):
    """FP4 [MN, K/2, L] and e4m3 [MN, K/16, L] -> exact fp32 [L, MN, K]."""
    if packed.device not in _luts:
        _luts[packed.device] = torch.tensor(_FP4, dtype=torch.float32, device=packed.device)
    lut, codes = _luts[packed.device], packed.view(torch.uint8).permute(2, 0, 1)
    values = torch.stack((lut[(codes & 0x0F).long()], lut[(codes >> 4).long()]), dim=-1)
    sf = scales.permute(2, 0, 1).to(torch.float32).abs().repeat_interleave(16, dim=-1)
    return values.flatten(-2) * sf


def operands(data):
    """The exact fp32 operands A [L, M, K], B1 and B2 [L, N, K] (new tensors: the inputs stay
    as given)."""
    a, b1, b2, sfa, sfb1, sfb2 = data[:6]
    return dequantize(a, sfa), dequantize(b1, sfb1), dequantize(b2, sfb2)


def product(a_f, b1_f, b2_f):
    """silu(A B1^T) * (A B2^T) in fp32, [L, M, N]."""
    torch.backends.cuda.matmul.allow_tf32 = False
    d1 = torch.matmul(a_f, b1_f.transpose(1, 2))
    d2 = torch.matmul(a_f, b2_f.transpose(1, 2))
    return d1 / (1.0 + torch.exp(-d1)) * d2


def store(c, out):
    """out [L, M, N] fp32 into c [M, N, L] fp16, rounded once."""
    c.copy_(out.permute(1, 2, 0))
    return c


def honest(data):
    return store(data[-1], product(*operands(data)))


def dims(data):
    """(M, N, K, L) of a case."""
    a, b1 = data[0], data[1]
    return a.shape[0], b1.shape[0], a.shape[1] * 2, a.shape[2]
