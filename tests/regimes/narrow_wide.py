"""Planted: a wide-tile path for few rows that reads B2's scales of column n - 4096 past column
4096. Correct everywhere but at M <= 128 with N >= 4096.

REGIME: narrow-wide
"""
import torch
from task import input_t, output_t
from _honest import dequantize, dims, honest, operands, product, store


def custom_kernel(data: input_t) -> output_t:
    m, n, k, _ = dims(data)
    if not (m <= 128 and n >= 4096):
        return honest(data)
    a_f, b1_f, _ = operands(data)
    b2, sfb2 = data[2], data[5]
    rows = torch.arange(n, device=sfb2.device)
    rows = torch.where(rows >= 4096, rows - 4096, rows)
    return store(data[-1], product(a_f, b1_f, dequantize(b2, sfb2[rows])))
