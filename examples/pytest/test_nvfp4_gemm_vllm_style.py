"""A block-scaled GEMM test written the way vLLM's `test_nvfp4_scaled_mm.py` is written
(parametrized dtypes and shapes, random bf16/fp16 operands, two-level NVFP4 quantization with
global scales, the kernel under test, then one assertion), with its last line,

    torch.testing.assert_close(out, expected_out.to(dtype=dtype), atol=1e-1, rtol=1e-1)

replaced by the oracle: every element of `out` must be one a correct kernel can produce from
these quantized operands, NaN exactly where NaN is due.

    pytest examples/pytest/test_nvfp4_gemm_vllm_style.py -q     # needs torch (CPU is enough)

`nvfp4_gemm` stands for your kernel (vLLM's `ops.cutlass_scaled_fp4_mm`, FlashInfer's
`mm_fp4`, ...); here it is a plain torch emulation (dequantize, matmul in float32, alpha, cast),
and `nvfp4_gemm_alpha_in_fp16` a copy with a planted bug the tolerance line lets through.
"""
import pytest

import nvfp4_oracle as oracle

torch = pytest.importorskip("torch", reason="torch is not installed")

FLOAT4_E2M1_MAX = 6.0
FLOAT8_E4M3_MAX = 448.0
DTYPES = [torch.float16, torch.bfloat16]
SHAPES = [(128, 128, 64), (128, 128, 128), (256, 128, 64), (128, 256, 128), (48, 80, 256)]
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
E2M1 = torch.tensor([0, 0.5, 1, 1.5, 2, 3, 4, 6, -0.0, -0.5, -1, -1.5, -2, -3, -4, -6])


def quantize_nvfp4(x, global_scale):
    """Two-level NVFP4: e4m3 scales per 16 of global_scale * amax / 6, e2m1 codes packed two per
    byte (even k in the low nibble). Returns (packed uint8 [m, k/2], scales float8 [m, k/16])."""
    m, k = x.shape
    blocks = x.float().reshape(m, k // 16, 16)
    scale = (global_scale * blocks.abs().amax(-1) / FLOAT4_E2M1_MAX)
    scale = scale.clamp(max=FLOAT8_E4M3_MAX).to(torch.float8_e4m3fn)
    divisor = scale.float() / global_scale
    scaled = torch.where(divisor[..., None] > 0, blocks / divisor[..., None], 0.0).reshape(m, k)
    magnitudes = E2M1[:8].to(x.device)
    nearest = (scaled.abs().clamp(max=FLOAT4_E2M1_MAX)[..., None] - magnitudes).abs().argmin(-1)
    codes = (nearest + 8 * (scaled < 0)).to(torch.uint8)
    return codes[:, 0::2] | (codes[:, 1::2] << 4), scale


def dequantize_nvfp4(packed, scale):
    e2m1 = E2M1.to(packed.device)
    codes = torch.stack([packed & 0xF, packed >> 4], -1).reshape(packed.shape[0], -1).long()
    return e2m1[codes] * scale.float().repeat_interleave(16, 1)


def nvfp4_gemm(a_fp4, b_fp4, a_scale, b_scale, alpha, dtype):
    acc = dequantize_nvfp4(a_fp4, a_scale) @ dequantize_nvfp4(b_fp4, b_scale).T
    return (alpha * acc).to(dtype)


def nvfp4_gemm_alpha_in_fp16(a_fp4, b_fp4, a_scale, b_scale, alpha, dtype):
    acc = dequantize_nvfp4(a_fp4, a_scale) @ dequantize_nvfp4(b_fp4, b_scale).T
    return (alpha.half().float() * acc).to(dtype)


def run(kernel, dtype, shape):
    m, n, packed_k = shape
    k = packed_k * 2
    gen = torch.Generator(device="cpu").manual_seed(0)
    a_dtype = torch.randn((m, k), generator=gen).to(dtype).to(DEVICE)
    b_dtype = torch.randn((n, k), generator=gen).to(dtype).to(DEVICE)
    a_global_scale = (FLOAT8_E4M3_MAX * FLOAT4_E2M1_MAX) / a_dtype.float().abs().amax()
    b_global_scale = (FLOAT8_E4M3_MAX * FLOAT4_E2M1_MAX) / b_dtype.float().abs().amax()
    alpha = 1.0 / (a_global_scale * b_global_scale)
    a_fp4, a_scale = quantize_nvfp4(a_dtype, a_global_scale)
    b_fp4, b_scale = quantize_nvfp4(b_dtype, b_global_scale)
    out = kernel(a_fp4, b_fp4, a_scale, b_scale, alpha, dtype)
    return out, (a_fp4, b_fp4, a_scale, b_scale, alpha)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SHAPES)
def test_nvfp4_gemm(dtype, shape):
    out, (a_fp4, b_fp4, a_scale, b_scale, alpha) = run(nvfp4_gemm, dtype, shape)
    oracle.assert_gemm(out, a_fp4, b_fp4, a_scale, b_scale, a_format="nvfp4", b_format="nvfp4",
                       alpha=float(alpha))


@pytest.mark.parametrize("shape", SHAPES)
def test_the_tolerance_line_misses_what_the_oracle_catches(shape):
    # alpha, about 3e-6 here, is an fp16 subnormal: rounded there it is off by up to 1%.
    out, (a_fp4, b_fp4, a_scale, b_scale, alpha) = run(nvfp4_gemm_alpha_in_fp16,
                                                       torch.bfloat16, shape)
    good, _ = run(nvfp4_gemm, torch.bfloat16, shape)
    torch.testing.assert_close(out, good, atol=1e-1, rtol=1e-1)  # vLLM's line passes it
    with pytest.raises(AssertionError, match="outside what a correct kernel gives"):
        oracle.assert_gemm(out, a_fp4, b_fp4, a_scale, b_scale, a_format="nvfp4",
                           b_format="nvfp4", alpha=float(alpha))
