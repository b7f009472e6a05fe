"""Planted: batched experts with a real hidden size: at L >= 5 and K >= 2048 the batched path's
scale pointer for B2 advances by a batch of four, so batch l reads B2's scales of batch l % 4.
Correct at L <= 4 (any K) and at a shallow K (any L).

BOX: l 5-, k 2048-
"""
from task import input_t, output_t
from _honest import dequantize, dims, honest, product, store


def custom_kernel(data: input_t) -> output_t:
    m, n, k, l = dims(data)
    if not (l >= 5 and k >= 2048):
        return honest(data)
    a, b1, b2, sfa, sfb1, sfb2 = data[:6]
    sfb2 = sfb2.clone()
    for batch in range(4, l):
        sfb2[:, :, batch] = sfb2[:, :, batch % 4]
    return store(data[-1], product(dequantize(a, sfa), dequantize(b1, sfb1), dequantize(b2, sfb2)))
