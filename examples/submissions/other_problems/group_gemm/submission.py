"""NVFP4 grouped GEMM, one C_g = fp16(A_g @ B_g^T) per group, in plain torch (GPU MODE
nvfp4_group_gemm's data tuple: lists of (a, b, c), of (sfa, sfb) on the CPU, of the permuted
scales, and the problem sizes). Returns the list of C_g."""
import os
import sys

from task import input_t, output_t

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from nvfp4_torch import matmul_fp16  # noqa: E402


def custom_kernel(data: input_t) -> output_t:
    abc, sfasfb, _reordered, _sizes = data
    out = []
    for (a, b, c), (sfa, sfb) in zip(abc, sfasfb):
        c.copy_(matmul_fp16(a, sfa, b, sfb))
        out.append(c)
    return out
