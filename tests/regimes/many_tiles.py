"""Planted: a persistent kernel whose tile counter is 14 bits: past 16,384 output tiles of 128 x 128
(counted row of tiles by row of tiles, batch after batch) the remaining tiles are never computed.
Correct everywhere but at more than 16,384 tiles.

REGIME: many-tiles
"""
from task import input_t, output_t
from _honest import dims, honest, operands, product, store


def custom_kernel(data: input_t) -> output_t:
    m, n, k, l = dims(data)
    tiles_n = (n + 127) // 128
    tiles = (m + 127) // 128 * tiles_n * l
    if tiles <= 16384:
        return honest(data)
    c = data[-1]
    kept = c.clone()
    store(c, product(*operands(data)))
    # The first 16,384 tiles written; from there on, what c held before the call.
    per_batch = (m + 127) // 128 * tiles_n
    for tile in range(16384, tiles):
        batch, rest = divmod(tile, per_batch)
        row, col = divmod(rest, tiles_n)
        c[row * 128:(row + 1) * 128, col * 128:(col + 1) * 128, batch] = \
            kept[row * 128:(row + 1) * 128, col * 128:(col + 1) * 128, batch]
    return c
