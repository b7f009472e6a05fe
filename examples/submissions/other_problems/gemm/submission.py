"""NVFP4 GEMM, C = fp16(A @ B^T), in plain torch (GPU MODE nvfp4_gemm's data tuple).
Supports every shape; an example of certifying a submission for --problem gemm."""
import os
import sys

from task import input_t, output_t

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from nvfp4_torch import matmul_fp16  # noqa: E402


def custom_kernel(data: input_t) -> output_t:
    a, b, sfa, sfb, _sfa_permuted, _sfb_permuted, c = data
    c.copy_(matmul_fp16(a, sfa, b, sfb))
    return c
