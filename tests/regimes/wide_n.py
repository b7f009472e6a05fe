"""Planted: a tile table of 64 columns of 128 that wraps: past N = 8192 the output's columns are
those of column n - 8192. Correct everywhere but at N > 8192.

REGIME: wide-n
"""
from task import input_t, output_t
from _honest import dims, honest, operands, product, store


def custom_kernel(data: input_t) -> output_t:
    m, n, k, _ = dims(data)
    if n <= 8192:
        return honest(data)
    out = product(*operands(data))
    out[:, :, 8192:] = out[:, :, : n - 8192].clone()
    return store(data[-1], out)
