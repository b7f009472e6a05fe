"""Planted: a 32-bit byte offset into C: past 2^30 elements (2^31 bytes of fp16) the stores wrap
to the start of C, over earlier elements, and the end of C is never written. Correct everywhere
but at more than 2^30 output elements.

REGIME: huge-output
"""
from task import input_t, output_t
from _honest import dims, honest, operands, product


def custom_kernel(data: input_t) -> output_t:
    m, n, k, l = dims(data)
    c = data[-1]
    if m * n * l <= 1 << 30:
        return honest(data)
    # Element i of C, counted in [L, M, N] order, lands at i mod 2^30.
    out = product(*operands(data)).reshape(-1)
    written = c.permute(2, 0, 1).contiguous()
    flat = written.view(-1)
    flat[: 1 << 30] = out[: 1 << 30]
    flat[: out.numel() - (1 << 30)] = out[1 << 30:]
    c.copy_(written.permute(1, 2, 0))
    return c
