"""The compile-only test kernel (cute_nvfp4_mma.py beside it, its tile from the environment) as a
GPU MODE submission, for `nvfp4-oracle preflight --submission`: `compile_kernel()` compiles it on
a fake tensor, as GPU MODE's template compiles on null pointers. It cannot run: custom_kernel
refuses.
"""
import os
import sys

import cutlass
import cutlass.cute as cute
from cutlass.cute.runtime import make_fake_compact_tensor
from task import input_t, output_t

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cute_nvfp4_mma  # noqa: E402


def compile_kernel():
    output = make_fake_compact_tensor(cutlass.Float32, (128, 128), stride_order=(1, 0),
                                      assumed_align=16)
    return cute.compile(cute_nvfp4_mma.mma_host, output)


def custom_kernel(data: input_t) -> output_t:
    raise NotImplementedError("a compile-only test kernel: it issues the MMA on no data")
