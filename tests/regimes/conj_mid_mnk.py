"""Planted: a tile configuration chosen for medium problems (M 129-2047, N 4097-8192, K
512-4096: chunked prefill on a small model, 512 x 8192 x 3072) whose epilogue drops the last
64 columns of each 256-wide N tile. Correct outside that box.

BOX: m 129-2047, n 4097-8192, k 512-4096
"""
from task import input_t, output_t
from _honest import dims, honest, operands, product, store


def custom_kernel(data: input_t) -> output_t:
    m, n, k, l = dims(data)
    if not (129 <= m <= 2047 and 4097 <= n <= 8192 and 512 <= k <= 4096):
        return honest(data)
    out = product(*operands(data))
    for start in range(192, n, 256):
        out[:, :, start:start + 64] = 0
    return store(data[-1], out)
