"""Planted: a row-tile index kept in 6 bits of 128 rows: past M = 8192 a row reads A's row m - 8192.
Correct everywhere but at M > 8192.

REGIME: tall-m
"""
from task import input_t, output_t
from _honest import dims, honest, operands, product, store


def custom_kernel(data: input_t) -> output_t:
    m, n, k, _ = dims(data)
    if m <= 8192:
        return honest(data)
    a_f, b1_f, b2_f = operands(data)
    a_f[:, 8192:, :] = a_f[:, : m - 8192, :].clone()
    return store(data[-1], product(a_f, b1_f, b2_f))
